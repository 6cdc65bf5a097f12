"""The simulator's gang sources (sim/gang_source.py): one list holds Volcano's PodGroups,
scheduler-plugins' PodGroups and the Workload API, and any API plugged into it is asked the same
questions as the three: its input checks, its controller, what the results say of its groups.
(Each API's own behaviour: tests/sim/test_x_k8s_podgroup.py, tests/sim/test_workload_api.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import node_group
from lavaflow.api.loader import InputError, load_text
from lavaflow.api.validation import Problem
from lavaflow.controllers.base import Controller
from lavaflow.sim import gang_source
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare
from lavaflow.sim.volcano_podgroup import VolcanoPodGroups
from lavaflow.sim.workload_api import WorkloadGangs
from lavaflow.sim.x_k8s_podgroup import CoschedulingPodGroups


def test_the_simulator_holds_the_three_gang_apis_in_one_list():
    assert gang_source.GANG_APIS == (CoschedulingPodGroups, WorkloadGangs, VolcanoPodGroups)
    sim = Simulation(prepare(load_text("")), seed=0)
    assert [type(s) for s in sim.gang_sources] == list(gang_source.GANG_APIS)
    assert [s.api for s in sim.gang_sources] == ["scheduling.x-k8s.io", "scheduling.k8s.io", "scheduling.volcano.sh"]
    # their controllers run in the list's order, Volcano's (the shared PodGroup controller) last
    ctrls = [s.controller for s in sim.gang_sources]
    assert ctrls[-1] is sim.pg_ctrl
    i = sim.controllers.index(ctrls[0])
    assert sim.controllers[i : i + 3] == ctrls


def _pod(name: str, **meta: Any) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"schedulerName": "lavaflow", "containers": [{"name": "c", "image": "x"}]},
    }
    return "---\n" + json.dumps(doc) + "\n"


class FakeChecks:
    def __init__(self, items: Any, asked: dict[str, list[Any]]) -> None:
        self.asked = asked
        asked["input_check"] = [len(items)]

    def problems(self, obj: Any, queues: Any) -> list[Problem] | None:
        self.asked.setdefault("problems", []).append(type(obj).__name__)
        return None

    def pod_problems(self, pod: Any) -> list[Problem]:
        self.asked.setdefault("pod_problems", []).append(pod.name)
        if pod.metadata.labels.get("fake.example.com/group") == "missing":
            return [Problem("metadata.labels[fake.example.com/group]", "no such fake group")]
        return []

    def template_problems(self, owner: Any, template: Any) -> list[Problem]:
        self.asked.setdefault("template_problems", []).append(owner.name)
        return []


class FakeSource(Controller):
    """A fourth gang API: records what it is asked; its controller counts its passes."""

    api = "fake.example.com"
    asked: dict[str, list[Any]] = {}

    @classmethod
    def build(cls, store: Any, clock: Any, on_event: Any, shared: Any) -> FakeSource:
        src = cls(store, clock)
        cls.asked.setdefault("build", []).append(src)
        store.watch("Pod", lambda ev, pod, old: src.mark(pod.key))
        return src

    @staticmethod
    def input_check(items: Any) -> FakeChecks:
        return FakeChecks(items, FakeSource.asked)

    @property
    def controller(self) -> Controller:
        return self

    def sync(self, key: str) -> None:
        self.asked.setdefault("sync", []).append(key)

    def owns(self, key: str) -> bool:
        return False

    def describe(self, entry: dict[str, Any], key: str) -> None:
        self.asked.setdefault("describe", []).append(key)
        entry["fake"] = True


@pytest.fixture
def fake_api(monkeypatch):
    FakeSource.asked = {}
    monkeypatch.setattr(gang_source, "GANG_APIS", (*gang_source.GANG_APIS[:-1], FakeSource, gang_source.GANG_APIS[-1]))
    return FakeSource.asked


def test_a_fourth_gang_api_plugged_into_the_list_is_asked_its_questions(fake_api):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"sim.lavaflow.io/duration": "10s"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    text = node_group() + _pod("solo", annotations={"sim.lavaflow.io/duration": "10s"})
    text += "---\n" + json.dumps(deployment) + "\n"
    sim = Simulation(prepare(load_text(text)), seed=0)
    # the input check: made once for the whole input, asked about every object and each pod
    assert fake_api["input_check"] == [3]
    assert sorted(fake_api["problems"]) == ["Deployment", "Node", "Pod"]
    assert fake_api["pod_problems"] == ["solo"] and fake_api["template_problems"] == ["web"]
    # one source per simulation, its controller run with the others (after the foreign APIs', before Volcano's)
    (src,) = fake_api["build"]
    assert sim.gang_sources[-2] is src and sim.controllers.index(src) == sim.controllers.index(sim.pg_ctrl) - 1
    result = sim.run()
    assert "default/solo" in fake_api["sync"]
    # the results ask it of every PodGroup (the two made for the bare pod and the Deployment)
    assert sorted(fake_api["describe"]) == sorted(f"{p['namespace']}/{p['name']}" for p in result["podGroups"])
    assert len(result["podGroups"]) == 2 and all(p["fake"] for p in result["podGroups"])
    assert [p["phase"] for p in result["pods"]] == ["Succeeded", "Succeeded"]  # scheduled as ever


def test_a_plugged_in_gang_apis_input_problem_refuses_the_input(fake_api):
    text = node_group() + _pod("lost", labels={"fake.example.com/group": "missing"})
    with pytest.raises(InputError) as exc:
        prepare(load_text(text))
    assert "metadata.labels[fake.example.com/group]: no such fake group" in str(exc.value)
