"""lavaflow.testing.lift_not_ready_taint: what kube-controller-manager's node lifecycle controller
does for a Ready node, which the real-server tests need beside a bare API server (its
TaintNodesByCondition admission taints every new Node not-ready)."""

from __future__ import annotations

import asyncio

from lavaflow.kube.client import ClientConfig, KubeClient
from lavaflow.kube.ops import create_manifest
from lavaflow.testing import ApiDouble, fake_node, lift_not_ready_taint


def test_the_not_ready_taint_is_lifted_and_the_nodes_own_taints_stay():
    async def scenario() -> list:
        double = ApiDouble().start()
        client = KubeClient(ClientConfig(server=double.url, qps=0, burst=0))
        try:
            node = fake_node("n0")
            node["spec"]["taints"] = [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},  # as the admission adds it
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            ]
            created = await create_manifest(client, node)
            await lift_not_ready_taint(client, created)
            got = await client.request("GET", "/api/v1/nodes/n0")
            # a node without the taint is left alone (no write)
            await lift_not_ready_taint(client, got)
            return (await client.request("GET", "/api/v1/nodes/n0"))["spec"].get("taints")
        finally:
            await client.close()
            double.stop()

    assert asyncio.run(scenario()) == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
