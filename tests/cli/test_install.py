"""`lavaflow install` against a cluster (the API double): CRDs of Volcano's already there are left
as they are and reported; lavaflow's own are applied; a CRD that cannot serve lavaflow is an error."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from typer.testing import CliRunner  # noqa: E402

from lavaflow.cli import app  # noqa: E402
from lavaflow.kube.manifests import OWN_CRD_LABEL, crds  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402

PODGROUPS = "podgroups.scheduling.volcano.sh"
QUEUES = "queues.scheduling.volcano.sh"


def volcano_crd(plural: str, group: str, kind: str, versions: dict[str, bool]) -> dict:
    """A CRD as Volcano's installer leaves it (no lavaflow label): ``versions`` maps each served
    version to whether it has a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "annotations": {"controller-gen.kubebuilder.io/version": "v0.20.0"},
        },
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "subresources": {"status": {}} if status else {},
                }
                for i, (v, status) in enumerate(versions.items())
            ],
        },
    }


@pytest.fixture
def double(tmp_path):
    d = ApiDouble().start()
    d.config = d.kubeconfig(str(tmp_path / "kubeconfig"))  # type: ignore[attr-defined]
    yield d
    if d.loop is not None and not d.loop.is_closed():
        d.stop()


def crd_on(double: ApiDouble, name: str) -> dict | None:
    return double.get("CustomResourceDefinition", name)


def test_install_leaves_volcanos_crds_as_they_are_and_says_so(double):
    volcano_pg = double.put_object(volcano_crd("podgroups", "scheduling.volcano.sh", "PodGroup", {"v1beta1": False}))
    volcano_q = double.put_object(volcano_crd("queues", "scheduling.volcano.sh", "Queue", {"v1beta1": True}))
    res = CliRunner().invoke(app, ["install", "--kubeconfig", double.config, "--namespace", "batch-system"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert (
        f"{PODGROUPS}: found (not lavaflow's; serves v1beta1; no status subresource — lavaflow writes status on "
        "the object): left as it is"
    ) in lines
    assert f"{QUEUES}: found (not lavaflow's; serves v1beta1; status subresource): left as it is" in lines
    assert "jobs.batch.volcano.sh: not found: created" in lines
    assert "Deployment batch-system/lavaflow-scheduler: applied" in lines
    assert "ClusterRole lavaflow-scheduler: applied" in lines
    # Volcano's CRDs untouched, lavaflow's created with their label, the processes' objects there
    assert crd_on(double, PODGROUPS)["metadata"]["resourceVersion"] == volcano_pg["metadata"]["resourceVersion"]
    assert crd_on(double, QUEUES)["metadata"]["resourceVersion"] == volcano_q["metadata"]["resourceVersion"]
    jobs = crd_on(double, "jobs.batch.volcano.sh")
    assert jobs["metadata"]["labels"][OWN_CRD_LABEL[0]] == OWN_CRD_LABEL[1]
    assert double.get("Deployment", "batch-system/lavaflow-controller") is not None
    assert double.get("ValidatingWebhookConfiguration", "lavaflow-webhook") is not None
    # again: lavaflow's own CRDs are found as lavaflow's and updated
    again = CliRunner().invoke(app, ["install", "--kubeconfig", double.config, "--crds-only"])
    assert again.exit_code == 0, again.output
    assert "jobs.batch.volcano.sh: found (lavaflow's): updated" in again.stdout.splitlines()
    assert not any(": applied" in line for line in again.stdout.splitlines())  # --crds-only


def test_install_print_with_a_cluster_leaves_out_the_crds_it_has(double):
    double.put_object(volcano_crd("podgroups", "scheduling.volcano.sh", "PodGroup", {"v1beta1": False}))
    res = CliRunner().invoke(app, ["install", "--print", "--crds-only", "--kubeconfig", double.config])
    assert res.exit_code == 0, res.output
    printed = [d["metadata"]["name"] for d in yaml.safe_load_all(res.stdout) if d]
    assert PODGROUPS not in printed and len(printed) == len(crds()) - 1
    assert f"{PODGROUPS}: found (not lavaflow's; serves v1beta1; no status subresource" in res.stderr
    assert "): left out" in res.stderr and f"{QUEUES}: not found: printed" in res.stderr
    assert crd_on(double, QUEUES) is None  # printing applies nothing


def test_install_refuses_a_crd_that_does_not_serve_lavaflows_version(double):
    double.put_object(volcano_crd("podgroups", "scheduling.volcano.sh", "PodGroup", {"v1alpha1": True}))
    res = CliRunner().invoke(app, ["install", "--kubeconfig", double.config])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {PODGROUPS}: found (not lavaflow's), but it does not serve v1beta1")
    assert "(it serves v1alpha1)" in res.stderr and len(res.stderr.splitlines()) == 1
    assert crd_on(double, QUEUES) is None  # nothing applied


def test_install_errors_are_one_line(double, tmp_path):
    missing = CliRunner().invoke(app, ["install", "--kubeconfig", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and missing.stderr.startswith("error: ") and len(missing.stderr.splitlines()) == 1
    double.fail_next("CustomResourceDefinition", "patch", 403)
    refused = CliRunner().invoke(app, ["install", "--kubeconfig", double.config, "--crds-only"])
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: the API server refused PATCH /apis/apiextensions.k8s.io/v1/")
    assert "HTTP 403 Forbidden" in refused.stderr
    double.stop()
    gone = CliRunner().invoke(app, ["install", "--kubeconfig", double.config])
    assert gone.exit_code == 1 and gone.stderr.startswith("error: cannot reach the API server at http://127.0.0.1:")
    assert "Traceback" not in gone.output
