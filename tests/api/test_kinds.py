"""The one table of kinds (lavaflow.api.kinds): the loader, the Kubernetes layer and the webhook
read the same entries."""

from __future__ import annotations

import pytest

from lavaflow.api import admission
from lavaflow.api.kinds import ALL, API_KINDS, BY_WIRE, LOADABLE, kind_info, kind_of_manifest
from lavaflow.api.loader import InputError, load_text


def test_every_loadable_kind_loads_into_the_model_the_kubernetes_layer_decodes_into():
    for k in ALL:
        if not k.loadable:
            continue
        assert LOADABLE[(k.api_version, k.api_kind)] is k.model
        if k.served:
            assert kind_info(k.kind) is k and kind_of_manifest({"apiVersion": k.api_version, "kind": k.api_kind}) is k


def test_volcano_and_native_jobs_are_told_apart_by_api_version():
    assert BY_WIRE[("batch.volcano.sh/v1alpha1", "Job")].kind == "Job"
    assert BY_WIRE[("batch/v1", "Job")].kind == "BatchJob"
    assert API_KINDS["BatchJob"].path("ns", "x") == "/apis/batch/v1/namespaces/ns/jobs/x"
    assert API_KINDS["Queue"].path("ignored", "q") == "/apis/scheduling.volcano.sh/v1beta1/queues/q"


def test_the_simulators_own_kinds_are_not_in_the_kubernetes_api():
    assert "NodeGroup" not in API_KINDS
    with pytest.raises(KeyError, match="does not know where 'NodeGroup' lives"):
        kind_info("NodeGroup")
    assert load_text(
        "apiVersion: sim.lavaflow.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: n}\nspec: {capacity: {cpu: 1}}\n"
    )


def test_older_priorityclass_versions_load_but_are_not_offered():
    doc = "apiVersion: scheduling.k8s.io/v1beta1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 10\n"
    assert load_text(doc)[0].obj.value == 10
    with pytest.raises(InputError) as err:
        load_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    assert "PriorityClass (scheduling.k8s.io/v1)" in str(err.value) and "scheduling.k8s.io/v1beta1" not in str(
        err.value
    )


def test_an_older_priorityclass_version_is_read_but_said(tmp_path):
    """Issue 35, item 17: scheduling.k8s.io/v1beta1 is read as v1, with a warning naming the file,
    the object and the version (current Kubernetes refuses it)."""
    from conftest import simulate_cli

    f = tmp_path / "pc.yaml"
    f.write_text(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 10\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  priorityClassName: high\n"
        "  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', pods: '10'}}\n"
    )
    p = simulate_cli(str(f), "--output", "json")
    assert p.returncode == 0, p.stderr
    assert "warning:" in p.stderr and "PriorityClass/high" in p.stderr and "scheduling.k8s.io/v1beta1" in p.stderr
    assert "read as scheduling.k8s.io/v1" in p.stderr


def test_every_kind_the_webhook_serves_has_admission_rules():
    served = [k for k in ALL if k.webhook_ops]
    assert {k.kind for k in served} == {
        "Job",
        "PodGroup",
        "Queue",
        "Pod",
        "JobFlow",
        "JobTemplate",
        "Command",
        "HyperNode",
    }
    for k in served:
        assert k.admission is admission.RULES[k.kind]
        assert "CREATE" in k.webhook_ops
    assert API_KINDS["Queue"].admission.validate_delete is not None and "DELETE" in API_KINDS["Queue"].webhook_ops
