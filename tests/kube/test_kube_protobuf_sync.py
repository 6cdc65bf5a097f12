"""The scheduler's pod informer reads bound pods as protobuf at start-up (see protopod), and
holds exactly what it holds when it reads every pod as JSON: against the API double, which
streams pods in protobuf as a real server does (and can refuse to, as a server does for custom
resources)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("google.protobuf")

from kube_harness import pod_view  # noqa: E402
from lavaflow.api.volcano import GROUP_NAME_ANNOTATION  # noqa: E402
from lavaflow.api.x_k8s_podgroup import POD_GROUP_LABEL  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.informer import _BY_NAME  # noqa: E402
from lavaflow.kube.store import KubeStore  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402


def _pod(name: str, node: str | None, scheduler: str = "lavaflow", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "creationTimestamp": "2026-11-28T06:00:00Z",
        "labels": {"app": name.split("-")[0]},
    }
    if scheduler == "lavaflow":
        meta["annotations"] = {GROUP_NAME_ANNOTATION: "pg"}
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "priority": 0,
        "tolerations": [
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
        **spec,
    }
    if node:
        body["nodeName"] = node
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if not node:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status}


AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
        ]
    }
}


def _cluster(whole: int) -> list[dict[str, Any]]:
    pods = [_pod(f"train-{i}", f"n{i % 3}") for i in range(6)]  # ours, in a PodGroup: light
    pods += [_pod(f"web-{i}", f"n{i % 3}", scheduler="default-scheduler") for i in range(4)]  # usage only
    pods.append(_pod("web-aff", "n1", scheduler="default-scheduler", affinity=AFFINITY))  # partial, usage only
    gang = _pod("kf-0", "n2", scheduler="default-scheduler", affinity=AFFINITY)  # partial, read whole
    gang["metadata"]["labels"][POD_GROUP_LABEL] = "kf"
    pods.append(gang)
    pods += [_pod(f"wait-{i}", None, nodeSelector={"pool": "a"}) for i in range(3)]  # unbound
    pods += [_pod(f"aff-{i}", "n0", affinity=AFFINITY) for i in range(whole - 1)]  # ours, partial: read whole
    sidecar = _pod("side-0", "n1")
    sidecar["spec"]["initContainers"] = [
        {"name": "proxy", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
    ]
    sidecar["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
    pods.append(sidecar)
    return pods


async def _sync(double: ApiDouble, protobuf: bool | None, page_size: int = 500) -> KubeStore:
    client = KubeClient(ClientConfig(server=double.url, qps=0))
    store = KubeStore(client, keep_raw=False)
    store.ours = frozenset({"lavaflow"})
    store.protobuf_pods = protobuf
    store.inform("Pod", page_size=page_size)
    await store.start()
    assert await store.wait_synced(20)
    return store


async def _close(store: KubeStore) -> None:
    await store.stop()
    await store.client.close()


@pytest.mark.parametrize("whole", [3, _BY_NAME + 4])
@pytest.mark.parametrize("streams", [True, False])
def test_bound_pods_read_as_protobuf_and_the_store_holds_what_json_gives(whole, streams, caplog):
    """Streamed (a server that sends a watch's initial state) or listed (one whose etcd cannot, so
    the streaming request fails and the informer lists instead, in pages)."""
    double = ApiDouble(bookmark_interval=0.05).start()
    double.watch_list = streams
    try:
        pods = _cluster(whole)
        for p in pods:
            double.put_object(p)

        async def both():
            caplog.set_level(logging.INFO, logger="lavaflow.kube")
            lists_before = double.counts["list/Pod"]
            a = await _sync(double, None, page_size=5)
            assert a.protobuf_pods is True and a.informers["Pod"].protobuf is None
            # (where the server cannot stream, the start-up probe found out: no streaming request)
            assert double.protobuf_watches == (1 if streams else 0)
            bound = len(pods) - 3
            assert double.protobuf_lists == (0 if streams else -(-bound // 5))  # in pages of 5
            lists = double.counts["list/Pod"] - lists_before - double.protobuf_lists
            # the unbound pods in one list; the bound ones read whole by name, or all in one more list
            assert lists == (1 + whole if whole <= _BY_NAME else 1 + -(-bound // 5))
            b = await _sync(double, False)
            assert double.protobuf_watches == (1 if streams else 0)
            try:
                return dict(a.objects["Pod"]), dict(b.objects["Pod"])
            finally:
                await _close(a)
                await _close(b)

        got, want = asyncio.run(asyncio.wait_for(both(), 60))
        assert set(got) == set(want) == {f"ns/{p['metadata']['name']}" for p in pods}
        for key in want:
            assert pod_view(got[key]) == pod_view(want[key]), key
        kinds = {key: type(obj).__name__ for key, obj in got.items()}
        assert kinds["ns/train-0"] == "LightPod" and kinds["ns/web-aff"] == "UsageOnlyPod"
        assert kinds["ns/kf-0"] == kinds["ns/aff-0"] == kinds["ns/wait-0"] == "Pod"
        assert any(f"then 3 unbound and {whole} bound as JSON" in r.getMessage() for r in caplog.records)
    finally:
        double.stop()


def test_a_server_that_will_not_send_protobuf_is_read_as_json(caplog):
    double = ApiDouble(bookmark_interval=0.05).start()
    double.protobuf_pods = False
    try:
        for p in _cluster(2):
            double.put_object(p)

        async def go():
            caplog.set_level(logging.INFO, logger="lavaflow.kube")
            s = await _sync(double, None)
            try:
                return s.informers["Pod"].protobuf, len(s.objects["Pod"])
            finally:
                await _close(s)

        protobuf, n = asyncio.run(asyncio.wait_for(go(), 60))
        assert protobuf is False and n == len(_cluster(2))
        assert any("not read as protobuf" in r.getMessage() and "406" in r.getMessage() for r in caplog.records)
    finally:
        double.stop()


def test_what_changes_after_the_protobuf_state_comes_through_the_watch():
    double = ApiDouble(bookmark_interval=0.05).start()
    try:
        for p in _cluster(2):
            double.put_object(p)

        async def go():
            s = await _sync(double, None)
            try:
                double.put_object(_pod("late-0", "n2"))
                moved = _pod("wait-0", "n1", nodeSelector={"pool": "a"})
                double.put_object(moved)
                for _ in range(200):
                    pod = s.objects["Pod"].get("ns/wait-0")
                    if "ns/late-0" in s.objects["Pod"] and pod is not None and pod.spec.node_name == "n1":
                        return True
                    await asyncio.sleep(0.02)
                return False
            finally:
                await _close(s)

        assert asyncio.run(asyncio.wait_for(go(), 60))
    finally:
        double.stop()


@pytest.mark.parametrize("protobuf", [True, False])
def test_the_scheduler_reads_bound_pods_as_told(protobuf):
    """`lavaflow scheduler --kube-api-content-type application/json` reads every pod as JSON; the
    default reads the bound ones as protobuf where the server sends it."""
    from kube_harness import Cluster
    from lavaflow.testing import fake_node

    async def go():
        async with Cluster([fake_node("n0", cpu="8", memory="32Gi")]) as c:
            c.double.put_object(_pod("train-0", "n0"))
            s = c.start_scheduler(protobuf_pods=protobuf)
            await c.until_ready()
            return c.double.protobuf_watches, s.store.protobuf_pods, type(s.store.objects["Pod"]["ns/train-0"]).__name__

    watches, decided, kept = asyncio.run(asyncio.wait_for(go(), 60))
    assert (watches, decided) == ((1, True) if protobuf else (0, False))
    assert kept == "LightPod"  # the same object either way
