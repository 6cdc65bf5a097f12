"""Elastic training on a cluster: the scheduler process resizes a Volcano Job by policy.

Against the in-process API double (or a real kube-apiserver with LAVAFLOW_TEST_KUBECONFIG, see
test_kube_real.py): fake GPU nodes with an accelerator label, the scheduler with the elastic
action, the controllers, the fake kubelet (pods with an infinite duration run until deleted).
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, elastic_job, settled  # noqa: E402
from lavaflow.cli.tables import format_train_jobs  # noqa: E402
from lavaflow.scheduler.framework.conf import load_scheduler_conf  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402

# The pods here run no training agent, so no job reports its speed: these tests follow the
# resize mechanics on speeds the policy is handed (the oracle); learning from reports is tested
# in tests/elastic/test_learned.py and below (a report patched on the Job reaches the PodGroup).
CONF = """\
actions: "enqueue, elastic, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: elastic
    arguments: {elastic.policy: Lavaflow, elastic.resizeInterval: 0s, elastic.resizeCost: 30s, elastic.oracle: true}
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


def running_workers(pods: list[dict], job: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if (p["metadata"].get("labels") or {}).get("volcano.sh/job-name") == job
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def gpu_nodes(suffix: str = "") -> list[dict]:
    return [
        gpu_node(f"v100-0{suffix}", 4, "v100"),
        gpu_node(f"v100-1{suffix}", 4, "v100"),
        gpu_node(f"k80-0{suffix}", 4, "k80"),
    ]


async def resize_scenario(c: Cluster, ns: str = "default", admit=lambda d: d, suffix: str = "") -> None:
    """An elastic job runs at its maximum, shrinks when a second job arrives (highest indices out,
    no restart), grows back when that one completes; GPU types honoured; `train get jobs` shows it.
    Used against the API double here and against a real kube-apiserver in test_kube_real.py."""
    s = c.start_scheduler(conf=load_scheduler_conf(CONF))
    await c.until_ready()

    def job(*a, **kw):
        d = elastic_job(*a, **kw)
        d["metadata"]["namespace"] = ns
        return admit(d)

    # a long job: up to 8 v100 workers; it must stay on the v100 pool
    await c.create([job("big", 1000, 2, 8, "inf")])

    async def at(name: str, n: int):
        pods = await c.pods(ns)
        return len(running_workers(pods, name)) == n and pods

    await c.wait_for(lambda: at("big", 8), 60, "big running at its maximum (8 workers)")
    # a short job arrives: big shrinks to make room, without a restart
    await c.create([job("small", 10, 2, 4, "300s")])
    pods = await c.wait_for(lambda: at("small", 4), 60, "small started with 4 workers")
    big = running_workers(pods, "big")
    # scale-in removed the highest-index workers
    assert big == [f"big-worker-{i}" for i in range(4)], big
    table = format_train_jobs(await c.objects("Job", ns), pods)
    rows = {ln.split()[0]: ln.split() for ln in table.splitlines()[1:]}
    assert rows["big"][1] == "Running" and rows["big"][2:4] == ["4", "(2-8)"], table
    assert rows["small"][2:4] == ["4", "(2-4)"], table
    # no GPU of the other type was used
    assert not any(p["spec"].get("nodeName") == f"k80-0{suffix}" for p in pods)
    # small completes (its pods run 3 s here): big grows back to 8
    await c.wait_for(lambda: at("big", 8), 90, "big back at 8 workers after small completed")

    async def small_completed():
        jobs = {j["metadata"]["name"]: j for j in await c.objects("Job", ns)}
        return (jobs["small"].get("status") or {}).get("state", {}).get("phase") == "Completed" and jobs

    jobs = await c.wait_for(small_completed, 30, "small Completed")
    assert jobs["big"]["status"]["state"]["phase"] == "Running"
    assert jobs["big"]["status"].get("retryCount", 0) == 0

    async def resize_events():
        events = await c.objects("Event", ns)
        reasons = [(e["reason"], e.get("message", "")) for e in events if e["involvedObject"]["kind"] == "PodGroup"]
        return (
            any(r == "Resized" and "8 → 4" in m for r, m in reasons)
            and any(r == "Resized" and "4 → 8" in m for r, m in reasons)
        ) and reasons

    await c.wait_for(resize_events, 30, "Resized events 8 → 4 and 4 → 8")
    pgs = [g for g in await c.objects("PodGroup", ns) if g["metadata"]["name"].startswith("big-")]
    assert any(cd["type"] == "Resized" for cd in pgs[0]["status"]["conditions"])
    from prometheus_client import generate_latest

    text = generate_latest(s.metrics.registry).decode() if hasattr(s.metrics, "registry") else ""
    if text:
        assert 'lavaflow_elastic_resizes_total{kind="resized"}' in text


def test_elastic_job_shrinks_for_a_second_job_and_grows_back():
    async def scenario():
        async with Cluster(gpu_nodes(), time_scale=0.01) as c:
            c.start_controllers()
            await resize_scenario(c)

    asyncio.run(asyncio.wait_for(scenario(), 240))


def test_running_job_can_report_its_measured_speed():
    """A training script patches lavaflow.io/speedup on its Job; the PodGroup the scheduler reads follows."""

    async def scenario():
        async with Cluster([gpu_node("v100-0", 4, "v100")], time_scale=0.01) as c:
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(CONF))
            await c.until_ready()
            job = elastic_job("m", 10, 1, 4, "inf")
            job["metadata"]["annotations"] = {
                "lavaflow.io/speedup": "1:1,2:1.9",
                "lavaflow.io/epoch-time": "60s",
                "lavaflow.io/epochs": "10",
            }
            await c.create([copy.deepcopy(job)])

            async def pg_ann(key: str, value: str):
                pgs = await c.objects("PodGroup", "default")
                return bool(pgs) and (pgs[0]["metadata"].get("annotations") or {}).get(key) == value

            await c.wait_for(
                lambda: pg_ann("lavaflow.io/speedup", "1:1,2:1.9"), 30, "the PodGroup with the Job's annotations"
            )
            from lavaflow.kube.client import MERGE_PATCH

            await c.api.request(
                "PATCH",
                "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/m",
                body={"metadata": {"annotations": {"lavaflow.io/speedup": "1:1,2:1.9,4:3.5"}}},
                content_type=MERGE_PATCH,
            )
            await c.wait_for(
                lambda: pg_ann("lavaflow.io/speedup", "1:1,2:1.9,4:3.5"), 30, "the measured speed-up on the PodGroup"
            )
            # the training agent's report (lavaflow.elastic.learned) takes the same way
            report = '{"rates":[["v100",1,2,0.05]]}'
            await c.api.request(
                "PATCH",
                "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/m",
                body={"metadata": {"annotations": {"lavaflow.io/metrics": report}}},
                content_type=MERGE_PATCH,
            )
            await c.wait_for(lambda: pg_ann("lavaflow.io/metrics", report), 30, "the job's report on the PodGroup")

    asyncio.run(asyncio.wait_for(scenario(), 90))


async def learning_scenario(c: Cluster, ns: str = "default", admit=lambda d: d, suffix: str = "") -> None:
    """With learned models (no oracle) an elastic job starts on its minimum and is given more
    workers only as its training agent's reports show it measured on more: twice the most it was
    measured on. Used against the API double here and a real kube-apiserver in test_kube_real.py."""
    learned = CONF.replace(", elastic.oracle: true", "")
    assert "oracle" not in learned
    s = c.start_scheduler(conf=load_scheduler_conf(learned))
    await c.until_ready()
    job = elastic_job("learner", 1000, 1, 8, "inf")
    job["metadata"]["namespace"] = ns
    await c.create([admit(job)])

    async def running(n: int):
        pods = await c.pods(ns)
        return len(running_workers(pods, "learner")) == n

    await c.wait_for(lambda: running(1), 60, "the job on one worker (nothing measured yet)")
    await settled(s)
    await settled(s)
    assert await running(1), "no more workers before a report"
    from lavaflow.kube.client import MERGE_PATCH

    async def report(rows):
        body = {"metadata": {"annotations": {"lavaflow.io/metrics": json.dumps({"rates": rows})}}}
        await c.api.request(
            "PATCH",
            f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs/learner",
            body=body,
            content_type=MERGE_PATCH,
        )

    # the agent reports one worker's speed: the policy may now give two
    await report([["v100", 1, 1, 1.0 / 60]])
    await c.wait_for(lambda: running(2), 60, "two workers after a report on one")
    # and measured on two (nearly twice as fast): up to four
    await report([["v100", 1, 1, 1.0 / 60], ["v100", 1, 2, 1.9 / 60]])
    await c.wait_for(lambda: running(4), 60, "four workers after a report on two")


def test_a_job_grows_as_its_training_agent_reports_on_a_cluster():
    async def scenario():
        async with Cluster(gpu_nodes(), time_scale=0.01) as c:
            c.start_controllers()
            await learning_scenario(c)

    asyncio.run(asyncio.wait_for(scenario(), 120))
