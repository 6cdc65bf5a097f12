"""The agent is a library for training images: it imports nothing of the scheduler (nor numpy,
pydantic, ...) — only the standard library, torch in its PyTorch helper, and PyYAML for a YAML
kubeconfig; and the example job that uses it is valid input."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import yaml

from lavaflow.api.loader import load_files
from lavaflow.elastic import spec as es

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "src" / "lavaflow" / "agent"
ALLOWED = {"torch.py": {"torch"}, "sinks.py": {"yaml"}}


def test_the_agent_imports_only_the_standard_library():
    for path in sorted(AGENT.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # within the package
                    assert node.level == 1, f"{path.name}: {ast.unparse(node)}"
                    continue
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                ok = top in sys.stdlib_module_names or top in ALLOWED.get(path.name, ())
                assert ok, f"{path.name} imports {name}"


def test_importing_the_agent_loads_nothing_else():
    code = (
        "import sys, lavaflow.agent, lavaflow.agent.torch\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('lavaflow', 'numpy', 'pydantic', 'scipy', 'yaml', 'torch'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    mods = out.stdout.split()
    assert all(m == "lavaflow" or m.startswith("lavaflow.agent") for m in mods), mods


def test_the_example_job_and_its_role():
    (loaded,) = load_files([ROOT / "examples" / "agent" / "elastic-ddp-job.yaml"])
    job = loaded.obj
    assert es.speed_spec(job.metadata.annotations).work == 20
    assert es.job_shape(job)[:2] == (1, 4)
    env = {e.name for e in job.spec.tasks[0].template.spec.containers[0].env}
    assert {"LAVAFLOW_CHECKPOINT_DIR", "LAVAFLOW_JOB_NAME", "POD_NAMESPACE", "NODE_NAME"} <= env
    docs = list(yaml.safe_load_all((ROOT / "examples" / "agent" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "Role")
    assert {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get", "patch"]} in role["rules"]
