"""Bound pods of ours kept as light pods (lavaflow.kube.lightpod): they must read exactly as the
pod read whole (slim_pod, decode, compact) for everything the scheduler and its plugins read, fall
back to the whole model for the rest, and be refused whenever the whole decode might differ."""

from __future__ import annotations

import asyncio
import copy
import hashlib

import numpy as np
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)

from lavaflow.api.core import Pod, PodSpec, PodStatus  # noqa: E402
from lavaflow.api.kinds import kind_info  # noqa: E402
from lavaflow.api.meta import ObjectMeta  # noqa: E402
from lavaflow.api.selectors import pod_requests  # noqa: E402
from lavaflow.kube import codec  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient  # noqa: E402
from lavaflow.kube.compact import compact  # noqa: E402
from lavaflow.kube.lightpod import LightPod, light_pod  # noqa: E402
from lavaflow.kube.slim import slim_pod, usage_only_pod  # noqa: E402
from lavaflow.scheduler.model import TaskStatus  # noqa: E402
from lavaflow.scheduler.resources import CPU, MEMORY  # noqa: E402
from lavaflow.testing import fake_node  # noqa: E402

POD = kind_info("Pod")
GROUP = "scheduling.k8s.io/group-name"


def whole(raw: dict) -> Pod | None:
    """The pod as the scheduler's store reads a pod whole."""
    obj = codec.decode(POD, slim_pod(raw))
    if obj is not None:
        compact(obj)
    return obj


def bound(name: str = "p0", **over) -> dict:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": "2026-11-27T14:02:32Z",
            "labels": {"app": "bench", "volcano.sh/task-spec": "worker"},
            "annotations": {GROUP: "g", "volcano.sh/task-index": "3"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "x"}],
            "managedFields": [{"manager": "m"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "img",
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                }
            ],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2"}}},
            ],
            "overhead": {"cpu": "10m"},
            "nodeName": "n0",
            "schedulerName": "lavaflow",
            "priority": 5,
            "priorityClassName": "high",
            "preemptionPolicy": "Never",
            "restartPolicy": "Never",
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-27T14:03:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}],
            "qosClass": "Burstable",
        },
    }
    return changed(raw, over)


DROP = object()


def changed(raw: dict, over: dict) -> dict:
    """``raw`` with each ``part__key`` of ``over`` set to its value (dropped for DROP)."""
    for path, value in over.items():
        part, _, key = path.partition("__")
        if value is DROP:
            raw[part].pop(key, None)
        else:
            raw[part][key] = value
    return raw


def _fields(model_cls) -> list[str]:
    return list(model_cls.model_fields)


def assert_reads_as_whole(light: LightPod, full: Pod) -> None:
    for part, cls in (("metadata", ObjectMeta), ("spec", PodSpec), ("status", PodStatus)):
        for name in _fields(cls):
            got = getattr(getattr(light, part), name)
            want = getattr(getattr(full, part), name)
            assert got == want and type(got) is type(want), (part, name, got, want)
    assert (light.name, light.namespace, light.key) == (full.name, full.namespace, full.key)
    assert (light.kind, light.api_version, light.namespaced) == (full.kind, full.api_version, full.namespaced)
    assert light.requests == pod_requests(full.spec)


def test_a_light_pod_reads_as_the_pod_read_whole():
    raw = bound()
    light = light_pod(copy.deepcopy(raw))
    assert isinstance(light, LightPod)
    full = whole(raw)
    assert full is not None
    # what the cache reads comes from the JSON: nothing is decoded for it
    assert light.metadata.labels == {"app": "bench", "volcano.sh/task-spec": "worker"}
    assert light.spec.node_name == "n0" and light.status.phase == "Running"
    assert light.spec.tolerations == [] and light.spec.affinity is None
    assert light.requests == {"cpu": 2.11, "memory": 2**30, "nvidia.com/gpu": 1.0}
    assert light._full is None
    assert_reads_as_whole(light, full)
    assert light._full is not None and light._raw is None  # the rest came from the whole model, once
    assert light.full() == full
    assert light.spec.containers[0].ports[0].host_port == 8080
    assert light.metadata.owner_references == [] and light.spec.volumes == []
    assert light.model_dump() == full.model_dump()


def test_a_light_pod_s_fallback_is_the_same_model_whatever_is_read_first():
    raw = bound()
    light = light_pod(copy.deepcopy(raw))
    assert light is not None
    assert light.spec.init_containers[0].restart_policy == "Always"  # the first read decodes
    assert light.full() is light.full()
    assert light.metadata.generation == 1 and light.spec.restart_policy == "Never"
    assert_reads_as_whole(light, whole(raw))


@pytest.mark.parametrize(
    "over",
    [
        {"spec__nodeName": DROP},  # pending: read whole
        {"spec__nodeName": ""},
        {"metadata__annotations": {}},  # in no PodGroup
        {"metadata__annotations": {GROUP: "g", "scheduling.volcano.sh/group-name": "g"}},
        {"metadata__labels": {"scheduling.x-k8s.io/pod-group": "x"}},
        {"spec__workloadRef": {"name": "w", "podGroup": "p"}},
        {"spec__affinity": {"podAntiAffinity": {}}},
        {"spec__topologySpreadConstraints": []},
        {"spec__node_name": "n0"},  # a field given by its Python name
        {"metadata__resource_version": "8"},
        {"spec__priority": "5"},  # lax pydantic reads it as 5: whole
        {"spec__priority": True},
        {"metadata__generation": 1.0},
        {"metadata__labels": {"a": 1}},
        {"status__phase": "Done"},
        {"spec__containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
        {"spec__containers": [{"name": 5}]},
        {"spec__containers": [{"name": "c", "ports": [{"hostPort": 1}]}]},  # containerPort missing
    ],
)
def test_a_pod_this_cannot_vouch_for_is_read_whole(over):
    raw = bound(**over)
    assert light_pod(raw) is None


def test_a_pod_whose_resources_do_not_read_is_skipped_as_before():
    raw = bound(spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}])
    assert whole(raw) is None

    async def scenario():
        s = _scheduler()
        s.store._apply(POD, "ADDED", raw)
        assert s.store.get("Pod", "ns/p0") is None and not s.cache.tasks

    asyncio.run(scenario())


def test_requests_are_kept_by_content_with_types_apart():
    a = light_pod(bound("a"))
    b = light_pod(bound("b"))
    assert a is not None and b is not None and a.requests is b.requests  # one template, one dict
    ours = frozenset(("lavaflow",))

    def usage(cpu) -> object:
        raw = bound("u", spec__schedulerName="default-scheduler", metadata__annotations={})
        raw["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
        raw["spec"].pop("initContainers")
        raw["spec"].pop("overhead")
        return usage_only_pod(raw, ours)

    assert usage(1).requests == {"cpu": 1.0}
    assert usage(True) is None  # True == 1, but a quantity is never a boolean
    assert usage(1.5).requests == {"cpu": 1.5}
    assert usage("1").requests == {"cpu": 1.0}

    def sidecar(policy) -> object:
        raw = bound("s", spec__schedulerName="default-scheduler", metadata__annotations={})
        raw["spec"]["initContainers"] = [{"name": "i", "restartPolicy": policy}]
        return usage_only_pod(raw, ours)

    assert sidecar(None) is not None and sidecar(None) is not None
    assert sidecar(float("nan")) is None  # written as null too, but not a policy


# Values of every JSON type for the fields a light pod checks: each pod built from them must either be
# refused or read exactly as the pod read whole.
_values = st.sampled_from([None, "", "x", "Running", "Pending", 0, 3, -1, 1.0, 2.5, True, False, [], {}, {"a": "b"}])
_keys = {
    "metadata": ["name", "namespace", "uid", "resourceVersion", "generation", "generateName", "labels", "annotations"]
    + ["creationTimestamp", "deletionTimestamp", "ownerReferences", "owner_references", "unknownKey"],
    "spec": ["nodeName", "schedulerName", "priority", "priorityClassName", "preemptionPolicy", "restartPolicy"]
    + ["hostname", "subdomain", "nodeSelector", "affinity", "tolerations", "volumes", "overhead"]
    + ["topologySpreadConstraints", "resourceClaims", "workloadRef", "schedulingGroup", "node_name", "dnsPolicy"],
    "status": ["phase", "startTime", "reason", "message", "conditions", "exitCode", "exit_code"],
}


def changes_of(keys: dict[str, list[str]], values: st.SearchStrategy) -> st.SearchStrategy:
    """Up to four (part, key, value) changes, a key of ``keys[part]`` set to one of ``values``."""
    return st.lists(
        st.one_of([st.tuples(st.just(part), st.sampled_from(names), values) for part, names in keys.items()]),
        max_size=4,
    )


_changes = changes_of(_keys, _values)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_changes)
def test_a_light_pod_is_refused_or_reads_as_the_whole_pod(changes):
    raw = bound()
    for part, key, value in changes:
        raw[part][key] = copy.deepcopy(value)
    light = light_pod(copy.deepcopy(raw))
    try:
        full = whole(copy.deepcopy(raw))
    except Exception:  # slim_pod itself fails on some shapes: the light path must not take those
        full = None
    if light is None:
        return
    assert full is not None, changes
    assert_reads_as_whole(light, full)


# ------------------------------------------------------------------ through the store and cache
def _scheduler():
    from lavaflow.kube.scheduler_process import KubeScheduler

    s = KubeScheduler(KubeClient(ClientConfig(server="http://127.0.0.1:9")), emit_events=False)
    for i, n in enumerate(("n0", "n1")):
        s.store._apply(
            kind_info("Node"),
            "ADDED",
            {**fake_node(n, cpu="8", memory="32Gi"), "metadata": {"name": n, "uid": f"n{i}", "resourceVersion": "1"}},
        )
    return s


def _digest(s) -> str:
    c = s.cache
    c.check_consistency()
    rows = []
    for k, t in sorted(c.tasks.items()):
        rows.append(
            (k, t.name, t.namespace, t.job, t.role, t.index, t.resreq.tolist(), t.priority, t.status, t.node)
            + (t.best_effort, t.preemptable, t.critical, t.preemption_policy, t.signature, sorted(t.labels.items()))
            + (t.creation, t.anti_terms, t.has_pod_affinity, t.pod.metadata.resource_version)
        )
    rows.append(c.nodes.used[: len(c.nodes)].tolist())
    rows.append(c.nodes.releasing[: len(c.nodes)].tolist())
    rows.append(sorted((k, j.counts, j.seq) for k, j in c.jobs.items()))
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_updates_and_deletes_of_light_pods_change_the_cache_as_whole_pods_do():
    """The same events through a store keeping light pods and one reading every pod whole."""

    def rv(raw: dict, v: str) -> dict:
        raw["metadata"]["resourceVersion"] = v
        return raw

    events = [
        ("ADDED", bound("a")),
        ("ADDED", bound("b", spec__nodeName="n1", status__phase="Pending")),
        ("MODIFIED", rv(bound("b", spec__nodeName="n1"), "6")),  # older: ignored
        ("MODIFIED", rv(bound("b", spec__nodeName="n1", status__phase="Running"), "9")),
        ("MODIFIED", rv(bound("a", status__phase="Succeeded"), "8")),  # leaves its node
        ("ADDED", bound("c", metadata__deletionTimestamp="2026-11-27T15:00:00Z")),  # releasing
        ("MODIFIED", rv(bound("c", metadata__annotations={}), "10")),  # loses its group: dropped
        ("ADDED", bound("d")),
        ("MODIFIED", rv(bound("d", metadata__annotations={GROUP: "h"}), "11")),  # moves to another group
        (
            "MODIFIED",
            rv(bound("d", metadata__annotations={GROUP: "h"}, spec__containers=[{"name": "c"}]), "12"),
        ),  # a bound task keeps the requests it was placed with
        ("DELETED", rv(bound("b", spec__nodeName="n1"), "13")),
        ("ADDED", bound("e", spec__nodeName="n9")),  # before its node
    ]

    async def scenario():
        light, whole_ = _scheduler(), _scheduler()
        whole_.store.ours = None  # every pod read whole, as before light pods
        for event, raw in events:
            light.store._apply(POD, event, copy.deepcopy(raw))
            whole_.store._apply(POD, event, copy.deepcopy(raw))
            assert _digest(light) == _digest(whole_), (event, raw["metadata"]["name"])
        kinds = {k: type(p).__name__ for k, p in light.store.objects["Pod"].items()}
        assert kinds == {"ns/a": "LightPod", "ns/c": "Pod", "ns/d": "LightPod", "ns/e": "LightPod"}
        assert light.cache.tasks["ns/a"].status == TaskStatus.SUCCEEDED
        d = light.cache.tasks["ns/d"]
        assert d.job == "ns/h" and d.resreq[CPU] == pytest.approx(2.11) and d.resreq[MEMORY] == 2**30
        assert "ns/c" not in light.cache.tasks
        assert all(p._full is None for p in light.store.objects["Pod"].values() if isinstance(p, LightPod))

    asyncio.run(scenario())


def test_a_session_decides_the_same_over_light_pods_as_over_whole_ones():
    """Pending pods that must keep away from bound ones (host ports, anti-affinity, spread by
    labels): binds decided over light pods are those decided over whole pods, and only the light
    pods whose other parts a plugin read were decoded whole."""
    pg_kind, queue_kind = kind_info("PodGroup"), kind_info("Queue")

    def pg(name: str, phase: str) -> dict:
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"pg-{name}", "resourceVersion": "3"},
            "spec": {"minMember": 1, "queue": "default"},
            "status": {"phase": phase},
        }

    def pending(name: str, group: str, **spec) -> dict:
        raw = bound(name, metadata__annotations={GROUP: group}, status__phase="Pending", **spec)
        raw["spec"].pop("nodeName")
        raw["spec"].pop("nodeSelector")
        raw["status"].pop("startTime")
        return raw

    ports = [{"name": "c", "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"role": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    plain = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    bound_pods = [
        bound("a", spec__nodeSelector={}, spec__containers=ports),
        bound("b", spec__nodeName="n1", spec__nodeSelector={}, spec__containers=plain, metadata__labels={"role": "db"}),
    ]
    pods = [
        pending("p", "gp", spec__containers=ports),  # n0's port is taken: n1
        pending("q", "gq", spec__containers=plain, spec__affinity=anti),  # keeps away from b: n0
    ]

    async def scenario():
        decided = []
        for light in (True, False):
            s = _scheduler()
            if not light:
                s.store.ours = None
            s.store._apply(queue_kind, "ADDED", {"metadata": {"name": "default", "uid": "q"}, "spec": {"weight": 1}})
            for name, phase in (("g", "Running"), ("gp", "Inqueue"), ("gq", "Inqueue")):
                s.store._apply(pg_kind, "ADDED", pg(name, phase))
            for raw in bound_pods + pods:
                s.store._apply(POD, "ADDED", copy.deepcopy(raw))
            s.scheduler.run_once(1e10)
            d = s.cache.take_decisions()
            decided.append((sorted(d.binds), sorted(d.evictions)))
            if light:
                a, b = s.store.get("Pod", "ns/a"), s.store.get("Pod", "ns/b")
                assert isinstance(a, LightPod) and isinstance(b, LightPod)
                assert a._full is not None  # its host ports were read
        assert decided[0] == decided[1]
        assert decided[0][0] == [("ns/p", "n1"), ("ns/q", "n0")]

    asyncio.run(scenario())


# ------------------------------------------------------------------ a restart's deferred node usage
def _node(s, name: str, uid: str) -> None:
    s.store._apply(
        kind_info("Node"),
        "ADDED",
        {**fake_node(name, cpu="8", memory="32Gi"), "metadata": {"name": name, "uid": uid, "resourceVersion": "1"}},
    )


def _restart_events() -> list[tuple[str, dict]]:
    """Pods of ours (light, and whole ones) and of another scheduler, added, changed, moved between
    nodes and deleted, some bound to a node the cache has not seen yet. Requests of a third of a
    cpu and the like, so that the nodes' sums depend on the order of the additions."""

    def v(raw: dict, rv: str) -> dict:
        raw["metadata"]["resourceVersion"] = rv
        return raw

    def cpu(amount: str) -> list[dict]:
        return [{"name": "c", "resources": {"requests": {"cpu": amount, "memory": "100M"}}}]

    def foreign(name: str, node: str, rv: str = "7", **over) -> dict:
        raw = bound(name, spec__schedulerName="default-scheduler", metadata__annotations={}, spec__nodeName=node)
        raw["spec"]["containers"] = cpu("333m")
        return v(changed(raw, over), rv)

    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    return [
        ("ADDED", bound("a", spec__containers=cpu("100m"))),
        ("ADDED", bound("b", spec__containers=cpu("333m"), spec__nodeName="n1", status__phase="Pending")),
        ("ADDED", foreign("f1", "n0")),
        ("ADDED", bound("c", spec__containers=cpu("700m"), spec__nodeName="n2")),  # before its node
        ("ADDED", foreign("f2", "n2")),  # likewise
        ("ADDED", bound("w", spec__containers=cpu("333m"), spec__affinity=anti)),  # read whole
        ("ADDED", bound("r", spec__containers=cpu("100m"), metadata__deletionTimestamp="2026-11-27T15:00:00Z")),
        ("ADDED", bound("e", spec__containers=cpu("333m"))),
        ("MODIFIED", v(bound("b", spec__containers=cpu("333m"), spec__nodeName="n1", status__phase="Running"), "8")),
        ("MODIFIED", v(bound("e", spec__containers=cpu("333m"), spec__nodeName="n1"), "8")),  # moves
        ("MODIFIED", foreign("f1", "n1", "8")),  # moves
        ("MODIFIED", v(bound("a", spec__containers=cpu("100m"), status__phase="Succeeded"), "8")),
        ("ADDED", bound("g", spec__containers=cpu("100m"), spec__nodeName="n1")),
        ("MODIFIED", v(bound("g", spec__containers=cpu("100m"), spec__nodeName="n1", metadata__annotations={}), "9")),
        ("DELETED", v(bound("e", spec__containers=cpu("333m"), spec__nodeName="n1"), "9")),
        ("ADDED", bound("h", spec__containers=cpu("333m"))),
        ("DELETED", foreign("f1", "n1", "9")),
        ("ADDED", foreign("f3", "n0")),
    ]


@pytest.mark.parametrize("node_last", [False, True])
def test_a_restart_deferring_node_usage_ends_with_the_cache_of_one_reading_whole_pods(node_last):
    """The same events through a scheduler restarting (light pods, the nodes' use added at once
    when synced) and through one reading every pod whole and adding as it goes: the same tasks,
    jobs and, to the bit, the same node rows; a session over either decides the same."""
    events = _restart_events()

    async def scenario():
        restarting, whole_ = _scheduler(), _scheduler()
        whole_.store.ours = None
        restarting.cache.defer_usage()
        for s in (restarting, whole_):
            if not node_last:
                _node(s, "n2", "n2")
            for event, raw in events:
                s.store._apply(POD, event, copy.deepcopy(raw))
            if node_last:
                _node(s, "n2", "n2")
        # what the last pods add to their nodes is not in the rows yet (what the deferral is for)
        assert restarting.cache._deferred
        assert restarting.cache.nodes.used.tolist() != whole_.cache.nodes.used.tolist()
        assert not restarting.cache.foreign or all(not v.flags.writeable for _, v in restarting.cache.foreign.values())
        restarting.cache.settle_usage()
        assert restarting.cache._deferred is None
        assert _digest(restarting) == _digest(whole_)
        light_tasks = [t for t in restarting.cache.tasks.values() if isinstance(t.pod, LightPod)]
        assert {t.uid for t in light_tasks} == {"ns/b", "ns/c", "ns/r", "ns/h", "ns/a"}
        assert all(not t.resreq.flags.writeable for t in light_tasks)  # shared per template, read-only
        assert restarting.cache.nodes.used[:3].tolist() == whole_.cache.nodes.used[:3].tolist()
        # later events (and sessions) change the rows at once again
        for s in (restarting, whole_):
            s.store._apply(POD, "ADDED", bound("late", spec__nodeName="n2"))
        assert _digest(restarting) == _digest(whole_)

    asyncio.run(scenario())


def test_a_session_settles_the_deferred_node_usage_first():
    async def scenario():
        deferred, eager = _scheduler(), _scheduler()
        deferred.cache.defer_usage()
        for s in (deferred, eager):
            for event, raw in _restart_events():
                s.store._apply(POD, event, copy.deepcopy(raw))
            s.scheduler.run_once(1e10)
        assert deferred.cache._deferred is None
        assert deferred.cache.nodes.used.tolist() == eager.cache.nodes.used.tolist()
        assert _digest(deferred) == _digest(eager)

    asyncio.run(scenario())


def test_settling_adds_row_by_row_in_the_order_the_pods_came():
    """np.add.at against one ``+=`` per pod: the same bits, where summing in another order (or
    summing the rows first) would differ."""
    from lavaflow.scheduler.cache import SchedulerCache

    rng = np.random.default_rng(0)
    vecs = [rng.random(3) * 10.0 ** rng.integers(-3, 9) for _ in range(2000)]
    nodes = rng.integers(0, 7, len(vecs)).tolist()
    want = np.zeros((7, 3))
    for n, vec in zip(nodes, vecs, strict=True):
        want[n] += vec
    c = SchedulerCache()
    c.nodes.used = np.zeros((7, 3))
    c.defer_usage()
    c._deferred.extend(zip(nodes, vecs, strict=True))
    c.settle_usage()
    assert c.nodes.used.tobytes() == want.tobytes()
    summed_first = np.zeros((7, 3))
    np.add.at(summed_first, np.array(nodes[::-1]), np.array(vecs[::-1]))
    assert summed_first.tobytes() != want.tobytes()  # (the order does show in the bits)
