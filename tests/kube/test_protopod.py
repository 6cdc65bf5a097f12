"""Bound pods read from Kubernetes' protobuf encoding (lavaflow.kube.protopod).

The pods are encoded by lavaflow.testing.kube_protobuf, written by hand from the wire format as
the API server marshals (plain fields always, pointers when set), so the reader is checked
against the server's conventions, not against itself. The property that matters: the store keeps
exactly what it keeps from the same pod read as JSON."""

from __future__ import annotations

import struct
from typing import Any

import pytest

pytest.importorskip("google.protobuf")

from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)

from kube_harness import pod_view as _view  # noqa: E402
from lavaflow.api.kinds import kind_info  # noqa: E402
from lavaflow.api.volcano import GROUP_NAME_ANNOTATION  # noqa: E402
from lavaflow.kube import protopod  # noqa: E402
from lavaflow.kube.compact import compact  # noqa: E402
from lavaflow.kube.lightpod import LightPod  # noqa: E402
from lavaflow.kube.slim import SLIM, UsageOnlyPod, decode_object, proto_bound_pod, usage_only_pod  # noqa: E402
from lavaflow.testing.kube_protobuf import encode, envelope, object_bytes, watch_frame  # noqa: E402

OURS = frozenset({"lavaflow"})
_POD = kind_info("Pod")


def _pod(**over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "w-0",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-28T06:00:00Z",
            "labels": {"app": "train"},
            "annotations": {GROUP_NAME_ANNOTATION: "pg-1"},
            "ownerReferences": [
                {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "x", "controller": True}
            ],
            "finalizers": ["f"],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sleep", "1d"],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                    "ports": [
                        {"containerPort": 8080, "protocol": "TCP"},
                        {"name": "ssh", "containerPort": 22, "hostPort": 2222, "protocol": "TCP"},
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": "n-1",
            "securityContext": {},
            "schedulerName": "lavaflow",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-11-28T06:00:05Z"}
            ],
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.7",
            "startTime": "2026-11-28T06:00:01Z",
            "qosClass": "Burstable",
        },
    }
    for path, value in over.items():
        part, key = path.split("__")
        if value is None:
            pod[part].pop(key, None)
        else:
            pod[part][key] = value
    return pod


def _through(pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return protopod.pod(encode("Pod", pod))


def _kept(raw: dict[str, Any]) -> Any:
    """What the scheduler's store keeps of ``raw`` (KubeStore._apply with keep_raw off)."""
    obj = usage_only_pod(raw, OURS)
    if obj is None:
        obj = decode_object(_POD, SLIM["Pod"](raw))
        if obj is not None:
            compact(obj)
    return obj


def test_a_bound_pod_reads_as_its_json_would():
    d, partial = _through(_pod())
    assert not partial
    dropped = ("ownerReferences", "finalizers")  # (not read: not declared, skipped)
    assert d["metadata"] == {k: v for k, v in _pod()["metadata"].items() if k not in dropped}
    spec = d["spec"]
    assert spec["containers"] == [
        {
            "name": "main",
            "ports": [
                {"containerPort": 8080, "protocol": "TCP"},
                {"name": "ssh", "hostPort": 2222, "containerPort": 22, "protocol": "TCP"},
            ],
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
        }
    ]
    assert spec["priority"] == 0  # a pointer: kept when zero
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "hostname" not in spec and "priorityClassName" not in spec  # plain strings: omitted when empty
    assert d["status"] == {"phase": "Running", "startTime": "2026-11-28T06:00:01Z"}
    assert _view(_kept(d)) == _view(_kept(_pod()))
    assert isinstance(_kept(d), LightPod)


def test_zero_times_pointers_and_empty_values():
    d, _ = _through(
        _pod(metadata__creationTimestamp=None, spec__priority=None, spec__preemptionPolicy=None, status__startTime=None)
    )
    assert d["metadata"]["creationTimestamp"] is None  # a plain Time, zero: JSON's null
    assert "priority" not in d["spec"] and "preemptionPolicy" not in d["spec"]
    assert "startTime" not in d["status"]
    d, _ = _through(
        _pod(metadata__deletionTimestamp="2026-11-28T07:00:00Z", metadata__generation=3, metadata__labels=None)
    )
    assert d["metadata"]["deletionTimestamp"] == "2026-11-28T07:00:00Z"
    assert d["metadata"]["generation"] == 3
    assert "labels" not in d["metadata"]


def test_sidecars_init_containers_selector_and_overhead():
    init = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "setup", "resources": {}},
    ]
    pod = _pod(
        spec__initContainers=init,
        spec__nodeSelector={"pool": "a100"},
        spec__overhead={"cpu": "250m"},
        spec__hostname="w-0",
        spec__subdomain="j",
    )
    d, partial = _through(pod)
    assert not partial
    assert d["spec"]["initContainers"] == [
        {"name": "proxy", "resources": {"requests": {"cpu": "100m"}}, "restartPolicy": "Always"},
        {"name": "setup", "resources": {}},
    ]
    assert d["spec"]["nodeSelector"] == {"pool": "a100"}
    assert d["spec"]["overhead"] == {"cpu": "250m"}
    assert _view(_kept(d)) == _view(_kept(pod))


@pytest.mark.parametrize(
    "field,value",
    [
        ("affinity", {"nodeAffinity": {}}),
        ("topologySpreadConstraints", [{"maxSkew": 1}]),
        ("resourceClaims", [{"name": "gpu"}]),
        ("workloadRef", {"name": "w"}),
        ("schedulingGroup", {"podGroupName": "g"}),
    ],
)
def test_what_is_not_converted_marks_the_pod_partial(field, value):
    d, partial = _through(_pod(**{f"spec__{field}": value}))
    assert partial
    assert d["spec"][field] in (protopod.NOT_CONVERTED, [protopod.NOT_CONVERTED])


def test_container_claims_mark_the_pod_partial():
    pod = _pod()
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    assert _through(pod)[1]


def test_a_partial_pod_of_another_scheduler_is_still_usage_only():
    pod = _pod(
        spec__schedulerName="default-scheduler", spec__affinity={"podAntiAffinity": {}}, metadata__annotations=None
    )
    d, partial = _through(pod)
    assert partial
    assert type(usage_only_pod(d, OURS)) is UsageOnlyPod
    assert _view(_kept(d)) == _view(_kept(pod))
    raw = encode("Pod", pod)
    built = proto_bound_pod(protopod.message(raw), raw, OURS)  # (built straight from the message too)
    assert type(built) is UsageOnlyPod and _view(built) == _view(_kept(pod))


def test_watch_events_bookmarks_and_errors():
    pod = _pod()
    frame = watch_frame("ADDED", pod)
    (n,) = struct.unpack(">I", frame[:4])
    etype, kind, raw = protopod.event(frame[4:])
    assert n == len(frame) - 4 and (etype, kind) == ("ADDED", "Pod")
    assert protopod.pod(raw)[0]["metadata"]["name"] == "w-0"
    end = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "77", "annotations": {"k8s.io/initial-events-end": "true"}},
    }
    etype, _, raw = protopod.event(watch_frame("BOOKMARK", end)[4:])
    assert etype == "BOOKMARK" and protopod.bookmark(raw) == ("77", {"k8s.io/initial-events-end": "true"})
    gone = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "message": "too old",
        "code": 410,
    }
    etype, kind, raw = protopod.event(watch_frame("ERROR", gone)[4:])
    assert (etype, kind) == ("ERROR", "Status")
    assert protopod.status(raw) == {"status": "Failure", "message": "too old", "reason": "Expired", "code": 410}


def test_what_is_not_kubernetes_protobuf_is_an_error():
    with pytest.raises(protopod.ProtobufError):
        protopod.event(b"\x0a\x05ADDED\x12\x06\x0a\x04{}{}")  # an object without the k8s prefix
    with pytest.raises(protopod.ProtobufError):
        protopod.event(b"\xff\xff\xff")
    with pytest.raises(protopod.ProtobufError):
        protopod.pod(b"\x0a\x05ab")  # a length past the end
    assert object_bytes(_pod()).startswith(envelope("v1", "Pod", b"")[:4])


def test_frames_split_anywhere_in_the_stream():
    frames = [watch_frame("ADDED", _pod(metadata__name=f"w-{i}")) for i in range(5)]
    stream = b"".join(frames)
    for cut in (1, 3, 4, 7, 50, len(stream) - 1):
        reader = protopod.Frames()
        got = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert got == [f[4:] for f in frames] and reader.pending == 0
    reader = protopod.Frames()
    assert reader.feed(stream[:10]) == [] and reader.pending == 10


# ---------------------------------------------------------------- property: the store keeps the same
_names = st.text("abcdefghij-", min_size=1, max_size=8)
_quantity = st.sampled_from(["1", "500m", "2", "1Gi", "128Mi", "0", "1.5"])
_resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity, max_size=3),
        "limits": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity, max_size=3),
    },
)
_container = st.fixed_dictionaries(
    {"name": _names, "resources": _resources},
    optional={
        "image": _names,
        "restartPolicy": st.just("Always"),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.integers(1, 65535), "protocol": st.sampled_from(["TCP", "UDP"])},
                optional={"hostPort": st.integers(1, 65535), "name": _names, "hostIP": st.just("0.0.0.0")},
            ),
            max_size=2,
        ),
    },
)
_time = st.sampled_from(["2026-11-28T06:00:00Z", "2025-01-01T00:00:59Z", "2030-06-30T23:59:59Z"])


@st.composite
def _pods(draw):
    ours = draw(st.booleans())
    meta: dict[str, Any] = {
        "name": draw(_names),
        "namespace": draw(_names),
        "uid": draw(_names),
        "resourceVersion": str(draw(st.integers(1, 10**9))),
    }
    meta["creationTimestamp"] = draw(st.one_of(st.none(), _time))
    if draw(st.booleans()):
        meta["deletionTimestamp"] = draw(_time)
    if draw(st.booleans()):
        meta["generateName"] = draw(_names)
    if draw(st.booleans()):
        meta["generation"] = draw(st.integers(1, 5))
    labels = draw(st.dictionaries(_names, _names, max_size=3))
    annotations = draw(st.dictionaries(_names, _names, max_size=2))
    if draw(st.booleans()):
        annotations[GROUP_NAME_ANNOTATION] = draw(_names)
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "containers": draw(st.lists(_container, min_size=1, max_size=3)),
        "nodeName": draw(_names),
        "schedulerName": "lavaflow" if ours else draw(st.sampled_from(["default-scheduler", "other"])),
    }
    for key, strat in (
        ("initContainers", st.lists(_container, min_size=1, max_size=2)),
        ("restartPolicy", st.sampled_from(["Always", "Never", "OnFailure"])),
        ("nodeSelector", st.dictionaries(_names, _names, min_size=1, max_size=2)),
        ("hostname", _names),
        ("subdomain", _names),
        ("priorityClassName", _names),
        ("priority", st.integers(-10, 10**6)),
        ("preemptionPolicy", st.sampled_from(["Never", "PreemptLowerPriority"])),
        ("overhead", st.dictionaries(st.sampled_from(["cpu", "memory"]), _quantity, min_size=1, max_size=2)),
        ("tolerations", st.lists(st.fixed_dictionaries({"key": _names, "operator": st.just("Exists")}), max_size=2)),
        ("affinity", st.just({"nodeAffinity": {}})),
    ):
        if draw(st.integers(0, 3)) == 0:
            spec[key] = draw(strat)
    status: dict[str, Any] = {}
    for key, strat in (
        ("phase", st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"])),
        ("startTime", _time),
        ("reason", _names),
        ("message", _names),
    ):
        if draw(st.booleans()):
            status[key] = draw(strat)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pods())
def test_the_store_keeps_what_it_keeps_of_the_json(pod):
    want = _view(_kept(pod))
    raw = encode("Pod", pod)
    built = proto_bound_pod(protopod.message(raw), raw, OURS)  # straight from the message, where it can be
    if built is not None:
        assert _view(built) == want
        assert type(_kept(pod)) is type(built)
    else:  # then through the dict: a pod that is neither light nor usage only, or has an affinity
        assert type(_kept(pod)) not in (LightPod, UsageOnlyPod)  # (every light or usage-only pod is built)
    d, partial = _through(pod)
    if partial and type(usage_only_pod(d, OURS)) is not UsageOnlyPod:
        assert "affinity" in pod["spec"]  # the only field of these pods not converted
        return  # read as JSON instead (the informer's part)
    assert _view(_kept(d)) == want


def test_a_light_pod_built_from_protobuf_reads_whole_as_its_json_does():
    pod = _pod()
    raw = encode("Pod", pod)
    built = proto_bound_pod(protopod.message(raw), raw, OURS)
    assert isinstance(built, LightPod)
    assert built.spec.containers[0].ports[1].host_port == 2222  # (read through the whole model)
    assert built.full().model_dump() == _kept(pod).full().model_dump()
    raw = encode("Pod", _pod(spec__schedulerName="default-scheduler", metadata__annotations=None))
    other = proto_bound_pod(protopod.message(raw), raw, OURS)
    assert type(other) is UsageOnlyPod and other.requests == _kept(pod).requests
