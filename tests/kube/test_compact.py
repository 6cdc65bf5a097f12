"""Decoded objects of the scheduler's cache share their sets of given fields by shape."""

from __future__ import annotations

import copy
import json

from lavaflow.api.kinds import kind_info
from lavaflow.kube import codec
from lavaflow.kube.compact import compact


def _pod(name: str, node: str) -> dict:
    # Built from parts (json round trip) so that no two pods share a string object, as decoded
    # from the wire.
    return json.loads(
        json.dumps(
            {
                "metadata": {
                    "name": name,
                    "namespace": "team-a",
                    "uid": f"uid-{name}",
                    "resourceVersion": "17",
                    "labels": {"app": "trainer", "volcano.sh/job-name": "train"},
                    "annotations": {"scheduling.k8s.io/group-name": "train"},
                },
                "spec": {
                    "schedulerName": "lavaflow",
                    "nodeName": node,
                    "containers": [{"name": "worker", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    "tolerations": [
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                    ],
                },
                "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]},
            }
        )
    )


def _decode(raw: dict):
    return codec.decode(kind_info("Pod"), raw)


def test_compacted_pods_share_field_sets_but_read_the_same():
    a, b = _decode(_pod("w-0", "node-1")), _decode(_pod("w-1", "node-1"))
    plain = _decode(_pod("w-0", "node-1"))
    assert a.metadata.__pydantic_fields_set__ is not b.metadata.__pydantic_fields_set__  # as decoded
    compact(a)
    compact(b)
    assert a.model_dump() == plain.model_dump()
    assert a == plain
    # one field set per shape, at every level (metadata, spec, container, toleration, condition)
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    assert a.metadata.__pydantic_fields_set__ is b.metadata.__pydantic_fields_set__
    assert a.spec.containers[0].__pydantic_fields_set__ is b.spec.containers[0].__pydantic_fields_set__
    assert a.spec.tolerations[0].__pydantic_fields_set__ is b.spec.tolerations[0].__pydantic_fields_set__
    assert a.status.conditions[0].__pydantic_fields_set__ is b.status.conditions[0].__pydantic_fields_set__
    assert a.metadata.__pydantic_fields_set__ == plain.metadata.__pydantic_fields_set__
    assert a.metadata.name == "w-0" and b.metadata.name == "w-1"
    assert b.model_dump() == _decode(_pod("w-1", "node-1")).model_dump()


def test_a_different_shape_gets_its_own_field_set():
    a = _decode(_pod("w-0", "node-1"))
    raw = _pod("w-1", "node-2")
    del raw["metadata"]["labels"]
    b = _decode(raw)
    compact(a)
    compact(b)
    assert a.metadata.__pydantic_fields_set__ is not b.metadata.__pydantic_fields_set__
    assert "labels" not in b.metadata.__pydantic_fields_set__
    assert "labels" in a.metadata.__pydantic_fields_set__


def test_podgroups_compact_and_read_the_same():
    raw = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg-1", "namespace": "team-a", "uid": "u1", "resourceVersion": "5"},
        "spec": {"minMember": 2, "minResources": {"cpu": "2"}, "queue": "research"},
        "status": {"phase": "Running", "running": 2, "conditions": [{"type": "Scheduled", "status": "True"}]},
    }
    res = kind_info("PodGroup")
    a, b, plain = codec.decode(res, copy.deepcopy(raw)), codec.decode(res, copy.deepcopy(raw)), codec.decode(res, raw)
    compact(a)
    compact(b)
    assert a == plain and a.model_dump() == plain.model_dump()
    assert a.spec.__pydantic_fields_set__ is b.spec.__pydantic_fields_set__
    assert a.status.conditions[0].__pydantic_fields_set__ is b.status.conditions[0].__pydantic_fields_set__
