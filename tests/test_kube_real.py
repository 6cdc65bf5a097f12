"""The acceptance scenarios against a real kube-apiserver (v1.30+) with fake nodes.

Skipped unless LAVAFLOW_TEST_KUBECONFIG names a kubeconfig of a disposable cluster (an apiserver
with etcd and no kubelets is enough: the fake kubelet here marks bound pods Running and then
Succeeded, and finishes deletions). The CRDs are applied from deploy/crds; nodes, namespaces and
objects made by a test are removed afterwards. kube-scheduler should be absent or not own the
schedulerName "volcano". No admission webhook runs: objects are defaulted by lavaflow's admission
code before being created, as the webhook would.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
import yaml

KUBECONFIG = os.environ.get("LAVAFLOW_TEST_KUBECONFIG")
pytestmark = pytest.mark.skipif(
    not KUBECONFIG,
    reason="no real API server configured: set LAVAFLOW_TEST_KUBECONFIG to a kubeconfig of a disposable cluster (kube-apiserver v1.30+)",
)

ROOT = Path(__file__).resolve().parent.parent


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 180))


async def _install_crds(client) -> None:
    from lavaflow.kube.ops import apply_manifest

    for p in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        await apply_manifest(client, yaml.safe_load(p.read_text()))
    await asyncio.sleep(2)  # CRDs become Established


def _admitted(doc: dict) -> dict:
    from lavaflow.kube.resources import resource_of_manifest
    from lavaflow.kube.webhook import review

    res = resource_of_manifest(doc)
    if res.kind not in ("Job", "PodGroup", "Queue"):
        return doc
    resp = review({"uid": "t", "operation": "CREATE", "object": doc, "namespace": doc["metadata"].get("namespace")}, res.kind, True)
    if resp.get("patch"):
        import base64
        import json

        from lavaflow.kube.webhook import apply_json_patch

        doc = apply_json_patch(doc, json.loads(base64.b64decode(resp["patch"])))
    return doc


@pytest.mark.parametrize("example,pods", [("mpi-hello.yaml", 4), ("tensorflow-benchmark.yaml", 3), ("spark-wordcount.yaml", 18)])
def test_examples_on_a_real_api_server(example, pods):
    from kube_harness import Cluster, load_example

    from lavaflow.kube.ops import delete_object

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        nodes, objs, held = load_example(example)
        for n in nodes:
            n["metadata"]["name"] += f"-{suffix}"
        ns = f"lavaflow-e2e-{suffix}"
        for d in objs + held:
            d.setdefault("metadata", {})["namespace"] = ns
        async with Cluster(nodes, held, real=True, period=0.2, time_scale=0.02) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                c.start_scheduler()
                await c.until_ready()
                await c.create([_admitted(d) for d in objs])

                async def finished():
                    ps = await c.pods(ns)
                    return len(ps) >= pods and all(p["spec"].get("nodeName") for p in ps)

                await c.wait_for(finished, 120, "every pod bound")
                ps = await c.pods(ns)
                assert {p["spec"]["nodeName"] for p in ps} <= {n["metadata"]["name"] for n in nodes}
                for pg in await c.objects("PodGroup", ns):
                    assert pg["status"]["phase"] in ("Running", "Completed", "Inqueue")
            finally:
                await delete_object(c.api, "Namespace", ns)
                for n in nodes:
                    await delete_object(c.api, "Node", n["metadata"]["name"])

    run(scenario())
