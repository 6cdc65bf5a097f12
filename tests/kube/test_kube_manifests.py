"""Every manifest lavaflow ships validates against the Kubernetes JSON schemas (kubernetes-validate).

Covers the CRDs (deploy/crds and the chart's copy, structural), `lavaflow install --print`,
the Helm chart rendered by `helm template` (helm from PATH, .venv/bin or $LAVAFLOW_HELM;
`sh deploy/get-helm.sh` installs one), and the examples' Volcano objects against the CRDs' own
schemas.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

kv = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")

from lavaflow.kube.manifests import (  # noqa: E402
    CONTROLLER_RULES,
    SCHEDULER_RULES,
    WEBHOOK_RULES,
    crds,
    install_manifests,
)

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("1.30.0", "1.37.0")


def validate(doc, version: str) -> None:
    try:
        kv.validate(doc, version, strict=True)
    except kv.ValidationError as exc:
        raise AssertionError(
            f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}: {exc.message} at {list(exc.path)}"
        ) from None


def helm_binary() -> str | None:
    for cand in (
        os.environ.get("LAVAFLOW_HELM"),
        shutil.which("helm"),
        str(Path(sys.executable).parent / "helm"),
        str(ROOT / ".venv/bin/helm"),
    ):
        if cand and Path(cand).exists() and os.access(cand, os.X_OK):
            return cand
    return None


def test_crd_files_are_generated_from_the_code():
    want = crds()
    for d in (ROOT / "deploy" / "crds", ROOT / "charts" / "lavaflow" / "crds"):
        files = {p.name: yaml.safe_load(p.read_text()) for p in d.glob("*.yaml")}
        assert files == want, f"{d} is stale: run python -m lavaflow.kube.manifests --write ."


def _structural(schema, path="") -> list[str]:
    """Problems against the structural-schema rules: a type everywhere (or preserve-unknown/int-or-string)."""
    out = []
    if not isinstance(schema, dict):
        return out
    if (
        "type" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and not schema.get("x-kubernetes-int-or-string")
    ):
        out.append(f"{path or '/'}: no type")
    for k, v in (schema.get("properties") or {}).items():
        out += _structural(v, f"{path}.{k}")
    if isinstance(schema.get("items"), dict):
        out += _structural(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _structural(schema["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("name", sorted(crds()))
def test_crds_are_valid_and_structural(name):
    doc = crds()[name]
    for v in VERSIONS:
        validate(doc, v)
    for ver in doc["spec"]["versions"]:
        assert not _structural(ver["schema"]["openAPIV3Schema"])
    group = doc["spec"]["group"]
    assert group in (
        "scheduling.volcano.sh",
        "batch.volcano.sh",
        "bus.volcano.sh",
        "flow.volcano.sh",
        "topology.volcano.sh",
        "nodeinfo.volcano.sh",
    )
    if doc["spec"]["names"]["kind"] not in ("Command", "Numatopology"):  # Volcano's have no status
        assert doc["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_install_print_manifests_validate():
    docs = install_manifests()
    kinds = [d["kind"] for d in docs]
    assert kinds.count("CustomResourceDefinition") == 8
    assert {"Deployment", "ClusterRole", "ConfigMap", "MutatingWebhookConfiguration"} <= set(kinds)
    for d in docs:
        for v in VERSIONS:
            validate(d, v)


def test_install_print_command(tmp_path):
    from typer.testing import CliRunner

    from lavaflow.cli import app

    res = CliRunner().invoke(app, ["install", "--print", "--namespace", "batch-system"])
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.output) if d]
    assert any(d["kind"] == "Namespace" and d["metadata"]["name"] == "batch-system" for d in docs)
    for d in docs:
        validate(d, VERSIONS[-1])


def _crd_schema(kind: str):
    for doc in crds().values():
        if doc["spec"]["names"]["kind"] == kind:
            return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    raise KeyError(kind)


def _jsonschema(schema):
    """OpenAPI v3 with Kubernetes extensions -> plain JSON schema (for jsonschema)."""
    s = copy.deepcopy(schema)
    if isinstance(s, dict):
        if s.get("x-kubernetes-int-or-string"):
            return {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": s.get("pattern", ".*")}]}
        s = {
            k: _jsonschema(v) if isinstance(v, (dict, list)) else v
            for k, v in s.items()
            if not k.startswith("x-kubernetes")
        }
        if "properties" in s and "additionalProperties" not in s and schema.get("type") == "object":
            s["additionalProperties"] = False  # pruning would drop unknown fields: catch them
        s.pop("format", None)
    elif isinstance(s, list):
        return [_jsonschema(x) for x in s]
    return s


@pytest.mark.parametrize("example", ["mpi-hello.yaml", "tensorflow-benchmark.yaml", "spark-wordcount.yaml"])
def test_examples_match_the_crd_schemas(example):
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / example).read_text()) if d]
    checked = 0
    for d in docs:
        if d["apiVersion"].split("/")[0] in (
            "batch.volcano.sh",
            "scheduling.volcano.sh",
            "bus.volcano.sh",
            "flow.volcano.sh",
        ):
            schema = _jsonschema(_crd_schema(d["kind"]))
            schema["properties"]["metadata"] = {"type": "object"}
            jsonschema.validate(d, schema)
            checked += 1
        elif d["apiVersion"] == "v1":
            validate(d, VERSIONS[-1])
            checked += 1
    assert checked


def render_chart(*sets: str) -> list[dict]:
    helm = helm_binary()
    if helm is None:
        pytest.skip("no helm binary (PATH, .venv/bin or $LAVAFLOW_HELM): run `sh deploy/get-helm.sh` to install one")
    args = [
        helm,
        "template",
        "rel",
        str(ROOT / "charts" / "lavaflow"),
        "--namespace",
        "lavaflow-system",
        "--include-crds",
    ]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize(
    "sets", [(), ("webhook.certManager.enabled=true",), ("webhook.enabled=false", "scheduler.leaderElect=false")]
)
def test_helm_chart_renders_valid_manifests(sets):
    docs = render_chart(*sets)
    kinds = [d["kind"] for d in docs]
    assert kinds.count("CustomResourceDefinition") == 8
    assert "Queue" in kinds
    for d in docs:
        if d["kind"] in ("Queue", "Certificate", "Issuer"):
            continue  # custom resources: not in the Kubernetes schemas
        for v in VERSIONS:
            validate(d, v)
    conf = next(d for d in docs if d["kind"] == "ConfigMap")
    from lavaflow.scheduler.framework.conf import load_scheduler_conf

    load_scheduler_conf(conf["data"]["volcano-scheduler.conf"])


def test_helm_chart_rbac_matches_the_code():
    docs = render_chart()
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    assert roles["rel-lavaflow-scheduler"] == SCHEDULER_RULES
    assert roles["rel-lavaflow-controller"] == CONTROLLER_RULES
    assert roles["rel-lavaflow-webhook"] == WEBHOOK_RULES
    py = {(d["kind"], d["metadata"]["name"]) for d in install_manifests(with_crds=False)}
    chart = {
        (d["kind"], d["metadata"]["name"].replace("rel-", "")) for d in docs if d["kind"] != "CustomResourceDefinition"
    }
    assert py - {("Namespace", "lavaflow-system")} <= chart | {
        (k, n) for k, n in py if k in ("ClusterRole", "ClusterRoleBinding")
    }
    # No role grants everything.
    for rules in roles.values():
        for r in rules:
            assert "*" not in r["verbs"] and "*" not in r["resources"]


def test_helm_chart_dashboard_is_off_by_default_and_only_reads():
    assert not [d for d in render_chart() if "dashboard" in d["metadata"]["name"]]
    docs = render_chart("dashboard.enabled=true")
    for d in docs:
        if "dashboard" in d["metadata"]["name"]:
            for v in VERSIONS:
                validate(d, v)
    rules = next(
        d["rules"] for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "rel-lavaflow-dashboard"
    )
    assert all(r["verbs"] == ["get", "list", "watch"] for r in rules)
    granted = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    from lavaflow.api.kinds import kind_info
    from lavaflow.dashboard.live import CORE_KINDS, OPTIONAL_KINDS

    for kind in (*CORE_KINDS, *OPTIONAL_KINDS, "Event"):
        res = kind_info(kind)
        group = res.api_version.rpartition("/")[0]
        assert (group, res.plural) in granted, f"the dashboard watches {kind} but its role cannot read it"
    deploy = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "lavaflow-dashboard")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "dashboard" and container["image"].endswith("-dashboard")
    # without its own role: the ServiceAccount and the Deployment, for a role the user binds
    bare = render_chart("dashboard.enabled=true", "dashboard.rbac.create=false")
    assert not [d for d in bare if d["kind"].startswith("ClusterRole") and "dashboard" in d["metadata"]["name"]]
    assert [d for d in bare if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "lavaflow-dashboard"]


def _fields_missing_from(model, schema, path: str = "") -> list[str]:
    """The fields of ``model`` (by their wire names, nested models followed through lists and maps)
    that ``schema`` does not declare: a structural schema makes the API server drop them."""
    import types
    import typing

    from pydantic import BaseModel

    def unwrap(tp):
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            return unwrap(args[0]) if len(args) == 1 else ("leaf", None)
        if origin is typing.Annotated:
            return unwrap(typing.get_args(tp)[0])
        if origin in (list, tuple, set):
            return ("items", typing.get_args(tp)[0])
        if origin is dict:
            return ("additionalProperties", typing.get_args(tp)[1])
        return ("model", tp) if isinstance(tp, type) and issubclass(tp, BaseModel) else ("leaf", None)

    props = schema.get("properties") if isinstance(schema, dict) else None
    if props is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out = []
    for name, f in model.model_fields.items():
        wire = f.alias or name
        if not path and wire in ("apiVersion", "kind", "metadata"):
            continue
        if wire not in props:
            out.append(f"{path}{wire}")
            continue
        sub, (how, inner) = props[wire], unwrap(f.annotation)
        while how in ("items", "additionalProperties") and isinstance(sub, dict):
            sub = sub.get(how)
            how, inner = unwrap(inner)
        if how == "model" and isinstance(sub, dict):
            out += _fields_missing_from(inner, sub, f"{path}{wire}.")
    return out


def test_every_model_field_is_in_the_crd_schema():
    """The CRDs are written by hand beside the pydantic models (issue 37): every field a model reads
    or writes must be in its CRD's schema, under the same name, or the API server prunes it."""
    from lavaflow.api.kinds import API_KINDS

    models = {(k.api_version, k.api_kind): k.model for k in API_KINDS.values() if k.model is not None}
    checked = 0
    for doc in crds().values():
        for version in doc["spec"]["versions"]:
            model = models.get((f"{doc['spec']['group']}/{version['name']}", doc["spec"]["names"]["kind"]))
            if model is None:
                continue
            checked += 1
            missing = _fields_missing_from(model, version["schema"]["openAPIV3Schema"])
            assert not missing, f"{doc['spec']['names']['kind']} {version['name']}: not in the CRD: {missing}"
    assert checked >= 8


def test_the_crd_check_catches_a_field_the_schema_lacks():
    from lavaflow.api.volcano import PodGroup

    schema = _crd_schema("PodGroup")
    conditions = schema["properties"]["status"]["properties"]["conditions"]["items"]["properties"]
    del conditions["reason"]
    assert _fields_missing_from(PodGroup, schema) == ["status.conditions.reason"]
