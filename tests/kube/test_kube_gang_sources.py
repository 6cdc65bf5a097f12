"""The scheduler process's gang sources (kube/gang_source.py): one list holds Volcano's PodGroups,
scheduler-plugins' PodGroups and the Workload API, the writer shares it, and any source plugged
into it is asked the same questions as the three. (Each API's own behaviour:
tests/kube/test_kube_x_k8s_podgroup.py, tests/kube/test_kube_workload_api.py, the Volcano tests.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, settled  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.scheduler_process import KubeScheduler  # noqa: E402
from lavaflow.kube.volcano_podgroup import VolcanoPodGroups  # noqa: E402
from lavaflow.kube.workload_api import WorkloadGangs  # noqa: E402
from lavaflow.kube.x_k8s_podgroup import CoschedulingGroups  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_the_scheduler_process_holds_the_three_gang_apis_in_one_list():
    async def scenario():
        client = KubeClient(ClientConfig(server="http://127.0.0.1:1"))
        try:
            s = KubeScheduler(client)
            assert [type(x) for x in s.gang_sources] == [CoschedulingGroups, WorkloadGangs, VolcanoPodGroups]
            assert [x.api for x in s.gang_sources] == [
                "scheduling.x-k8s.io",
                "scheduling.k8s.io",
                "scheduling.volcano.sh",
            ]
            assert (s.cosched, s.workloads, s.volcano) == tuple(s.gang_sources)
            assert s.writer.gang_sources is s.gang_sources  # one list, the write side's too
            # Volcano's is always on and maps no pod (its pods name their PodGroup themselves)
            assert s.volcano.enabled and not s.volcano.maps_pods
            assert s.cosched.maps_pods and s.workloads.maps_pods
        finally:
            await client.close()

    run(scenario())


class FakeSource:
    """A fourth gang API: records what it is asked, owns nothing (until told to take statuses)."""

    api = "fake.example.com"
    enabled = True
    maps_pods = True

    def __init__(self) -> None:
        self.asked: dict[str, list[Any]] = {}
        self.take = False

    def _ask(self, what: str, arg: Any = None) -> None:
        self.asked.setdefault(what, []).append(arg)

    async def discover(self) -> bool:
        self._ask("discover")
        return True

    def owns(self, key: str) -> bool:
        self._ask("owns", key)
        return self.take

    def on_pod(self, event: str, pod: Any) -> Any:
        self._ask("on_pod", pod.key)
        return pod

    def decided(self, key: str, status: dict[str, Any]) -> bool:
        self._ask("decided", (key, status.get("phase")))
        return self.take

    def adopt(self, pg: Any, status: dict[str, Any]) -> bool:
        self._ask("adopt", pg.key)
        return self.take

    def after_cycle(self) -> None:
        self._ask("after_cycle")

    def pod_message(self, job_uid: str, message: str) -> str:
        self._ask("pod_message", job_uid)
        return message


def _pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": {"sim.lavaflow.io/duration": "inf"}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def test_a_fourth_gang_source_plugged_into_the_list_is_asked_its_questions():
    async def scenario():
        async with Cluster([fake_node("n0", cpu="2")]) as c:
            c.start_controllers()
            s = c.start_scheduler()
            fake = FakeSource()
            s.gang_sources.insert(0, fake)  # (before the scheduler's task starts: asked from the first)
            await c.until_ready()
            await c.create([_pod("fits", "1"), _pod("big", "8")])

            async def both_groups_decided():
                pgs = await c.objects("PodGroup", "default")
                phases = sorted((pg.get("status") or {}).get("phase") or "" for pg in pgs)
                return len(pgs) == 2 and phases == ["Pending", "Running"] or None

            await c.wait_for(both_groups_decided, 15, "Volcano PodGroups of both pods with their status")
            await settled(s)
            asked = fake.asked
            assert asked["discover"] == [None]  # once, with the others, before the informers start
            assert {"default/fits", "default/big"} <= set(asked["on_pod"])
            # each status the sessions decided went to the fake first, then (not its) to Volcano's
            assert {key for key, _ in asked["decided"]} == {pg for pg in s.writer.cache.jobs}
            assert len(asked["after_cycle"]) >= 1
            # the unschedulable gang's pod message passes through every source
            big = next(j for j in s.cache.jobs.values() if "default/big" in j.tasks)
            assert big.uid in asked["pod_message"]
            assert c.bindings() == [("default/fits", "n0")]

            # a source ahead of Volcano's that takes a status: Volcano's writer never sees it
            fake.take = True
            fake.asked.clear()
            s.writer.pg_wanted.clear()
            await c.create([_pod("later", "8")])
            await settled(s, ("default/later",))
            await settled(s)
            later = next(j for j in s.cache.jobs.values() if "default/later" in j.tasks)
            assert later.uid in {key for key, _ in fake.asked["decided"]}
            pg = next(
                p for p in await c.objects("PodGroup", "default") if p["metadata"]["name"] == later.uid.split("/")[1]
            )
            assert not (pg.get("status") or {}).get("phase")  # nothing written to the Volcano PodGroup

    run(scenario())
