"""Elastic training on a cluster: the scheduler process resizes a Volcano Job by policy.

Against the in-process API double (or a real kube-apiserver with LAVAFLOW_TEST_KUBECONFIG, see
test_kube_real.py): fake GPU nodes with an accelerator label, the scheduler with the elastic
action, the controllers, the fake kubelet (pods with an infinite duration run until deleted).
"""

from __future__ import annotations

import asyncio
import copy

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster  # noqa: E402

from lavaflow.kube.cli import format_train_jobs  # noqa: E402
from lavaflow.kube.testing import fake_node  # noqa: E402
from lavaflow.scheduler.framework.conf import load_scheduler_conf  # noqa: E402

CONF = """\
actions: "enqueue, elastic, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: elastic
    arguments: {elastic.policy: Lavaflow, elastic.resizeInterval: 0s, elastic.resizeCost: 30s}
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def gpu_node(name: str, gpus: int, gpu_type: str) -> dict:
    n = fake_node(name, cpu="32", memory="128Gi", labels={"lavaflow.io/accelerator": gpu_type})
    for part in ("capacity", "allocatable"):
        n["status"][part]["nvidia.com/gpu"] = str(gpus)
    return n


LINEAR = "1:1,2:2,4:4,8:8"


def elastic_job(name: str, epochs: int, lo: int, hi: int, duration: str, gpu_type: str = "v100") -> dict:
    """A job that scales linearly (measured speed-ups), ``epochs`` of 60 s on one worker."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"lavaflow.io/speedup": LINEAR, "lavaflow.io/epoch-time": "60s",
                                     "lavaflow.io/epochs": str(epochs)}},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": lo,
            "tasks": [{
                "name": "worker",
                "replicas": hi,
                "template": {
                    "metadata": {"annotations": {"sim.lavaflow.io/duration": duration}},
                    "spec": {
                        "nodeSelector": {"lavaflow.io/accelerator": gpu_type},
                        "containers": [{"name": "train", "image": "pytorch",
                                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}],
                    },
                },
            }],
        },
    }


def running_workers(pods: list[dict], job: str) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in pods
        if (p["metadata"].get("labels") or {}).get("volcano.sh/job-name") == job
        and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


def test_elastic_job_shrinks_for_a_second_job_and_grows_back():
    async def scenario():
        nodes = [gpu_node("v100-0", 4, "v100"), gpu_node("v100-1", 4, "v100"), gpu_node("k80-0", 4, "k80")]
        async with Cluster(nodes, time_scale=0.01) as c:
            c.start_controllers()
            s = c.start_scheduler(conf=load_scheduler_conf(CONF))
            await c.until_ready()
            # a long job: up to 8 v100 workers; it must stay on the v100 pool
            await c.create([elastic_job("big", 1000, 2, 8, "inf")])

            async def at(job: str, n: int):
                pods = await c.pods("default")
                return len(running_workers(pods, job)) == n and pods

            await c.wait_for(lambda: at("big", 8), 30, "big running at its maximum (8 workers)")
            # a short job arrives: big shrinks to make room, without a restart
            await c.create([elastic_job("small", 10, 2, 4, "300s")])
            pods = await c.wait_for(lambda: at("small", 4), 30, "small started with 4 workers")
            big = running_workers(pods, "big")
            assert len(big) == 4
            # scale-in removed the highest-index workers
            assert big == [f"big-worker-{i}" for i in range(4)]
            table = format_train_jobs(await c.objects("Job", "default"), pods)
            rows = {ln.split()[0]: ln.split() for ln in table.splitlines()[1:]}
            assert rows["big"][1] == "Running" and rows["big"][2:4] == ["4", "(2-8)"]
            assert rows["small"][2:4] == ["4", "(2-4)"]
            # no GPU of the other type was used
            assert not any(p["spec"].get("nodeName") == "k80-0" for p in pods)
            # small completes (its pods run 3 s here): big grows back to 8
            await c.wait_for(lambda: at("big", 8), 45, "big back at 8 workers after small completed")
            jobs = {j["metadata"]["name"]: j for j in await c.objects("Job", "default")}
            assert jobs["small"]["status"]["state"]["phase"] == "Completed"
            assert jobs["big"]["status"]["state"]["phase"] == "Running"
            assert jobs["big"]["status"].get("retryCount", 0) == 0
            events = await c.objects("Event", "default")
            reasons = [(e["reason"], e["message"]) for e in events if e["involvedObject"]["kind"] == "PodGroup"]
            assert any(r == "Resized" and "8 → 4" in m for r, m in reasons), reasons
            assert any(r == "Resized" and "4 → 8" in m for r, m in reasons), reasons
            pgs = [g for g in await c.objects("PodGroup", "default") if g["metadata"]["name"].startswith("big-")]
            assert any(cd["type"] == "Resized" for cd in pgs[0]["status"]["conditions"])
            metrics = s.metrics.render().decode() if hasattr(s.metrics, "render") else ""
            if metrics:
                assert "lavaflow_elastic_resizes" in metrics

    asyncio.run(asyncio.wait_for(scenario(), 150))


def test_running_job_can_report_its_measured_speed():
    """A training script patches lavaflow.io/speedup on its Job; the PodGroup the scheduler reads follows."""

    async def scenario():
        async with Cluster([gpu_node("v100-0", 4, "v100")], time_scale=0.01) as c:
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(CONF))
            await c.until_ready()
            job = elastic_job("m", 10, 1, 4, "inf")
            job["metadata"]["annotations"] = {"lavaflow.io/speedup": "1:1,2:1.9", "lavaflow.io/epoch-time": "60s", "lavaflow.io/epochs": "10"}
            await c.create([copy.deepcopy(job)])

            async def pg_ann(key: str, value: str):
                pgs = await c.objects("PodGroup", "default")
                return bool(pgs) and (pgs[0]["metadata"].get("annotations") or {}).get(key) == value

            await c.wait_for(lambda: pg_ann("lavaflow.io/speedup", "1:1,2:1.9"), 30, "the PodGroup with the Job's annotations")
            from lavaflow.kube.client import MERGE_PATCH

            await c.api.request(
                "PATCH", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/m",
                body={"metadata": {"annotations": {"lavaflow.io/speedup": "1:1,2:1.9,4:3.5"}}}, content_type=MERGE_PATCH,
            )
            await c.wait_for(lambda: pg_ann("lavaflow.io/speedup", "1:1,2:1.9,4:3.5"), 30, "the measured speed-up on the PodGroup")

    asyncio.run(asyncio.wait_for(scenario(), 90))
