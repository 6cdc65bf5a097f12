"""Volcano PodGroups decoded by lavaflow.kube.plainpg: each must be exactly the model
``codec.decode`` gives (every value of the same type, the same fields given), or be left to
``codec.decode``; and a scheduler fed through it must hold the same cache."""

from __future__ import annotations

import asyncio
import copy
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)
from pydantic import BaseModel  # noqa: E402
from test_lightpod import DROP, changed, changes_of  # noqa: E402

from lavaflow.api.kinds import kind_info  # noqa: E402
from lavaflow.api.volcano import PodGroup  # noqa: E402
from lavaflow.kube import (
    codec,  # noqa: E402
    slim as slim_mod,  # noqa: E402
)
from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.plainpg import volcano_podgroup  # noqa: E402
from lavaflow.kube.store import KubeStore  # noqa: E402

PG = kind_info("PodGroup")


def exact(v: Any) -> Any:
    """Everything a reader may tell apart: model classes, fields given, field order, values and
    their types (1, 1.0 and True; Decimal("0.010") and Decimal("0.01"))."""
    if isinstance(v, BaseModel):
        return (
            type(v).__name__,
            sorted(v.__pydantic_fields_set__),
            [(k, exact(x)) for k, x in v.__dict__.items()],
            v.__pydantic_extra__,
            v.__pydantic_private__,
        )
    if isinstance(v, dict):
        return ("dict", [(exact(k), exact(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [exact(x) for x in v])
    return (type(v).__name__, repr(v))


def podgroup(name: str = "g", **over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "generation": 2,
            "creationTimestamp": "2026-11-27T12:58:24Z",
            "labels": {"volcano.sh/job-name": "j"},
            "annotations": {"a": "b"},
            "ownerReferences": [
                {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "x", "controller": True}
            ],
            "finalizers": ["f"],
            "managedFields": [{"manager": "m", "time": "2026-11-27T12:58:24Z"}],
        },
        "spec": {
            "minMember": 3,
            "minTaskMember": {"worker": 2, "ps": 1},
            "minResources": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": "1"},
            "queue": "q",
            "priorityClassName": "high",
        },
        "status": {
            "phase": "Running",
            "running": 3,
            "succeeded": 0,
            "failed": 1,
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "transitionID": "t",
                    "lastTransitionTime": "2026-11-27T14:10:14Z",
                    "reason": "tasks in gang are ready to be scheduled",
                },
                {"type": "Unschedulable", "status": "False", "message": "m"},
            ],
        },
    }
    return changed(raw, over)


def test_a_podgroup_is_the_model_decode_gives():
    raw = podgroup()
    pg = volcano_podgroup(copy.deepcopy(raw))
    whole = codec.decode(PG, copy.deepcopy(raw))
    assert isinstance(pg, PodGroup) and whole is not None
    assert exact(pg) == exact(whole) and pg == whole
    # the times are floats, as decode makes them
    assert pg.metadata.creation_timestamp == whole.metadata.creation_timestamp == 1795784304.0
    assert pg.status.conditions[0].last_transition_time == 1795788614.0
    assert pg.status.conditions[1].last_transition_time is None
    assert pg.spec.min_resources == {"cpu": Decimal("0.010"), "memory": Decimal(16 * 2**20), "nvidia.com/gpu": 1}
    assert pg.metadata.owner_references[0].controller is True
    assert codec.encode(pg, PG) == codec.encode(whole, PG)


def test_the_json_is_left_as_it_was():
    raw = podgroup()
    before = copy.deepcopy(raw)
    pg = volcano_podgroup(raw)
    assert pg is not None and raw == before
    pg.metadata.labels["x"] = "y"  # the model owns its containers
    pg.spec.min_resources["cpu"] = Decimal(5)
    assert raw == before


@pytest.mark.parametrize(
    "over",
    [
        # a time under its Python name: decode does not turn it into a float, validation reads it
        {"metadata__creation_timestamp": "2026-11-27T12:58:24Z", "metadata__creationTimestamp": DROP},
        {"metadata__deletion_timestamp": "2026-11-27T12:58:24Z"},
        {"status__conditions": [{"type": "Scheduled", "last_transition_time": "2026-11-27T14:10:14Z"}]},
        # what does not validate: decode reports it
        {"spec__minMember": "x"},
        {"spec__minResources": {"cpu": "lots"}},
        {"status__conditions": [{"status": "True"}]},  # no type
        {"status__conditions": None},
        {"status__conditions": ["Scheduled"]},
        {"metadata__labels": {"a": 1}},
    ],
)
def test_what_plainpg_cannot_vouch_for_is_left_to_decode(over):
    assert volcano_podgroup(podgroup(**over)) is None


def test_a_podgroup_without_metadata_or_status_is_left_to_decode_or_read_alike():
    raw = podgroup()
    raw.pop("metadata")
    assert volcano_podgroup(raw) is None
    raw = podgroup()
    raw.pop("status")
    pg = volcano_podgroup(copy.deepcopy(raw))
    whole = codec.decode(PG, raw)
    assert pg is not None and whole is not None and exact(pg) == exact(whole)
    raw = podgroup(status__phase="Pending")
    raw["status"] = "Pending"
    assert volcano_podgroup(raw) is None


# Values of every JSON type for the keys a PodGroup's models read (by alias and by Python name) and
# some they do not: each PodGroup built from them must be refused or decoded exactly as decode does.
_values = st.sampled_from(
    [None, "", "x", "10m", "2026-11-27T12:58:24Z", "not a time", 0, 3, -1, 1.0, 2.5, True, False, [], {}]
    + [{"a": "b"}, {"a": 1}, {"cpu": "1"}, {"cpu": 1}, [{"type": "T"}], [{"type": "T", "lastTransitionTime": 5}]]
    + [[{"name": "j"}], [{"apiVersion": "v", "kind": "K", "name": "n", "uid": "u", "blockOwnerDeletion": "x"}]]
)
_keys = {
    "metadata": ["name", "namespace", "uid", "resourceVersion", "generation", "generateName", "labels"]
    + ["annotations", "creationTimestamp", "deletionTimestamp", "ownerReferences", "owner_references"]
    + ["creation_timestamp", "resource_version", "finalizers"],
    "spec": ["minMember", "minTaskMember", "minResources", "queue", "priorityClassName", "networkTopology"]
    + ["min_member", "min_resources", "unknownKey"],
    "status": ["phase", "running", "succeeded", "failed", "conditions", "startTime"],
    "condition": ["type", "status", "transitionId", "transitionID", "lastTransitionTime", "last_transition_time"]
    + ["reason", "message"],
}
_changes = changes_of(_keys, _values)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_changes)
def test_a_podgroup_is_refused_or_decoded_exactly_as_decode_does(changes):
    raw = podgroup()
    first = raw["status"]["conditions"][0]
    for part, key, value in changes:
        target = first if part == "condition" else raw[part]  # (still read if conditions are replaced)
        target[key] = copy.deepcopy(value)
    pg = volcano_podgroup(copy.deepcopy(raw))
    whole = codec.decode(PG, copy.deepcopy(raw))
    if pg is None:
        return
    assert whole is not None, changes
    assert exact(pg) == exact(whole), changes


# ------------------------------------------------------------------ through the store and cache
def _scheduler():
    from lavaflow.kube.scheduler_process import KubeScheduler

    return KubeScheduler(KubeClient(ClientConfig(server="http://127.0.0.1:9")), emit_events=False)


def _jobs(s) -> list[Any]:
    return [
        (k, j.uid, j.name, j.namespace, j.queue, j.seq, j.priority, j.min_available, j.min_task_member, j.creation)
        + (None if j.min_resources is None else j.min_resources.tolist(), j.version, exact(j.pg))
        for k, j in s.cache.jobs.items()
    ] + [list(s.cache.pg_jobs), list(s.cache.orphans)]


def test_a_scheduler_fed_plain_podgroups_holds_what_one_fed_whole_ones_does(monkeypatch):
    def rv(raw: dict, v: str) -> dict:
        raw["metadata"]["resourceVersion"] = v
        return raw

    events = [
        ("ADDED", podgroup("a")),
        ("ADDED", podgroup("b", spec__minResources={"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": "1"})),
        ("ADDED", podgroup("c", spec__minResources={"cpu": "1", "example.com/new": "2"})),  # widens the index
        ("MODIFIED", rv(podgroup("a", status__phase="Inqueue"), "9")),
        ("MODIFIED", rv(podgroup("b", spec__minResources=None), "10")),
        ("MODIFIED", rv(podgroup("a", spec__minResources={"cpu": "3"}), "11")),
        ("ADDED", podgroup("d", spec__minMember="2")),  # lax: decode reads it as 2
        ("ADDED", podgroup("e", metadata__creation_timestamp="2026-11-27T12:58:24Z")),
        ("DELETED", rv(podgroup("c"), "12")),
        ("ADDED", podgroup("f", spec__queue=1)),  # does not validate: skipped by both
    ]

    async def scenario():
        plain, whole = _scheduler(), _scheduler()
        monkeypatch.setattr(slim_mod, "volcano_podgroup", lambda raw: None)
        for event, raw in events:
            whole.store._apply(PG, event, copy.deepcopy(raw))
        monkeypatch.undo()
        for event, raw in events:
            plain.store._apply(PG, event, copy.deepcopy(raw))
        assert _jobs(plain) == _jobs(whole)
        assert sorted(plain.store.objects["PodGroup"]) == ["ns/a", "ns/b", "ns/d", "ns/e"]
        for key, obj in whole.store.objects["PodGroup"].items():
            got = plain.store.objects["PodGroup"][key]
            assert exact(got) == exact(obj)
        # compacted as before: the objects of one shape share their sets of given fields
        a, b = plain.store.objects["PodGroup"]["ns/a"], plain.store.objects["PodGroup"]["ns/b"]
        assert a.metadata.__pydantic_fields_set__ is b.metadata.__pydantic_fields_set__
        assert a.status.conditions[0].__pydantic_fields_set__ is b.status.conditions[0].__pydantic_fields_set__
        d = plain.cache.jobs["ns/d"]
        assert d.min_available == 2 and d.creation == 1795784304.0
        assert plain.cache.jobs["ns/e"].creation == 1795784304.0  # (parsed by the cache, as before)
        assert plain.cache.jobs["ns/a"].min_resources.tolist()[:2] == [3.0, 0.0]

    asyncio.run(scenario())


def test_the_controllers_store_reads_plain_podgroups_as_decode_does():
    """The controllers' store keeps each object's JSON beside its model (and does not compact)."""
    store = KubeStore(KubeClient(ClientConfig(server="http://127.0.0.1:9")))
    raw = podgroup()
    store._apply(PG, "ADDED", copy.deepcopy(raw))
    pg = store.objects["PodGroup"]["ns/g"]
    whole = codec.decode(PG, raw)
    assert exact(pg) == exact(whole)
    assert pg.metadata.__pydantic_fields_set__ is not whole.metadata.__pydantic_fields_set__
    assert store.raw["PodGroup"]["ns/g"]["metadata"]["creationTimestamp"] == "2026-11-27T12:58:24Z"


def test_min_resources_vectors_are_kept_by_amounts():
    from lavaflow.scheduler.cache import SchedulerCache

    def pg(name: str, amounts: dict[str, str]) -> PodGroup:
        return PodGroup.model_validate({"metadata": {"name": name}, "spec": {"minResources": amounts}})

    cache = SchedulerCache()
    cache.on_podgroup(pg("a", {"cpu": "2", "memory": "1Ki"}))
    cache.on_podgroup(pg("b", {"cpu": "2", "memory": "1Ki"}))
    a, b = cache.jobs["default/a"].min_resources, cache.jobs["default/b"].min_resources
    assert a.tolist() == b.tolist() == [2.0, 1024.0, 0.0] and a is not b
    a[0] = 99.0  # each job owns its vector
    cache.on_podgroup(pg("c", {"cpu": "2", "memory": "1Ki"}))
    assert cache.jobs["default/c"].min_resources.tolist() == [2.0, 1024.0, 0.0]
    cache.on_podgroup(pg("d", {"example.com/x": "1"}))  # a new resource: every vector one wider
    cache.on_podgroup(pg("e", {"cpu": "2", "memory": "1Ki"}))
    assert cache.jobs["default/e"].min_resources.tolist() == [2.0, 1024.0, 0.0, 0.0]
    assert cache.jobs["default/b"].min_resources.tolist() == [2.0, 1024.0, 0.0, 0.0]
    assert cache.jobs["default/d"].min_resources.tolist() == [0.0, 0.0, 0.0, 1.0]
