"""The ``lavaflow simulate`` command line, run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, node_group

CLI = [sys.executable, "-c", "from lavaflow.cli import main; main()"]

JOB_KEYS = {"namespace", "name", "queue", "phase", "submitTime", "startTime", "finishTime"}
PG_KEYS = {"namespace", "name", "queue", "phase", "minMember", "conditions"}
COND_KEYS = {"type", "status", "reason", "message"}
POD_KEYS = {"namespace", "name", "job", "task", "node", "phase", "createTime", "startTime", "finishTime", "exitCode"}
STUCK_KEYS = {"namespace", "name", "reason"}
TOP_KEYS = {"scheduler", "stalled", "endTime", "jobs", "podGroups", "pods", "stuck", "summary"}


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    return write(tmp_path, "cluster.yaml", node_group(count=1, cpu="2"))


def check_contract(result: dict) -> None:
    assert TOP_KEYS <= set(result)
    assert isinstance(result["stalled"], bool)
    assert isinstance(result["summary"], dict)
    assert result["jobs"] and result["pods"] and result["podGroups"]
    for j in result["jobs"]:
        assert JOB_KEYS <= set(j), j
    for pg in result["podGroups"]:
        assert PG_KEYS <= set(pg), pg
        for c in pg["conditions"]:
            assert COND_KEYS <= set(c), c
    for p in result["pods"]:
        assert POD_KEYS <= set(p), p
    for s in result["stuck"]:
        assert STUCK_KEYS <= set(s), s


# ---------------------------------------------------------------- successful runs
def test_table_output():
    r = run("simulate", EXAMPLES / "mpi-hello.yaml")
    assert r.returncode == 0, r.stderr
    assert "lm-mpi-job" in r.stdout
    assert "summary" in r.stdout
    assert "Traceback" not in r.stderr


def test_table_output_lists_stalled_jobs_with_reasons():
    r = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--scheduler", "kube-default")
    assert r.returncode == 0, r.stderr
    assert "stalled" in r.stdout
    assert r.stdout.count("Insufficient cpu") == 6
    for i in range(1, 7):
        assert f"spark-wordcount-{i}-podgroup" in r.stdout


def test_json_output_has_the_contract_keys():
    r = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--scheduler", "kube-default", "--output", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    check_contract(res)
    assert res["scheduler"] == "kube-default"
    assert res["stalled"] is True and len(res["stuck"]) == 6
    # A run whose jobs are Volcano Jobs with conditions and exit codes.
    r = run("simulate", EXAMPLES / "tensorflow-benchmark.yaml", "--output", "json")
    res = json.loads(r.stdout)
    check_contract(res)
    assert res["scheduler"] == "lavaflow"
    assert res["jobs"][0]["name"] == "tensorflow-benchmark" and res["jobs"][0]["phase"] == "Completed"
    assert all(p["exitCode"] == 0 for p in res["pods"] if p["phase"] == "Succeeded")


def test_the_command_leaves_without_teardown_after_writing_everything(tmp_path):
    """Run as its own command (``python -m lavaflow.cli``), ``simulate`` ends with ``os._exit``
    once its output is written: the JSON on a pipe, the table and a warning on stderr are whole,
    and the exit status is 0."""
    mod = [sys.executable, "-m", "lavaflow.cli"]
    r = subprocess.run(
        [*mod, "simulate", EXAMPLES / "spark-wordcount.yaml", "--compare", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert [x["scheduler"] for x in res["results"]] == ["kube-default", "lavaflow"]
    out = tmp_path / "out.json"
    with out.open("w") as f:  # a file rather than a pipe: block-buffered, flushed before leaving
        r = subprocess.run([*mod, "simulate", EXAMPLES / "mpi-hello.yaml", "--output", "json"], stdout=f, timeout=120)
    assert r.returncode == 0
    assert json.loads(out.read_text())["summary"]["completed"] >= 1
    r = subprocess.run([*mod, "simulate", EXAMPLES / "mpi-hello.yaml"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "summary" in r.stdout and r.stdout.rstrip().endswith("┘"), r.stdout[-500:]


def test_the_fast_exit_is_only_for_the_lavaflow_command_itself(monkeypatch):
    """Called in-process — under pytest, whose own ``__main__.py`` may be argv[0], or by a caller
    that set ``sys.argv`` to a lavaflow command line — ``exit_now`` returns: it must never end the
    program that called the CLI."""
    from lavaflow.cli.quick_exit import exit_now, own_command

    monkeypatch.setattr(sys, "argv", ["lavaflow", "simulate"])
    assert not own_command()
    exit_now()  # still here
    probe = "from lavaflow.cli.quick_exit import own_command; print(own_command())"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False"


def test_compare_json():
    r = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--compare", "--output", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert list(res) == ["results"]
    assert [x["scheduler"] for x in res["results"]] == ["kube-default", "lavaflow"]
    for x in res["results"]:
        check_contract(x)
    kd, lf = res["results"]
    assert kd["stalled"] is True and lf["stalled"] is False
    assert lf["summary"]["completed"] == 6


def test_compare_table_shows_both():
    r = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--compare")
    assert r.returncode == 0, r.stderr
    assert "scheduler: kube-default" in r.stdout and "scheduler: lavaflow" in r.stdout


def test_seed_until_and_default_duration(tmp_path, cluster):
    w = write(
        tmp_path,
        "w.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n",
    )
    r = run("simulate", cluster, w, "--output", "json", "--default-duration", "5m", "--seed", "3")
    res = json.loads(r.stdout)
    p = res["pods"][0]
    assert p["finishTime"] - p["startTime"] == 300
    r = run("simulate", cluster, w, "--output", "json", "--default-duration", "5m", "--until", "1m")
    res = json.loads(r.stdout)
    assert res["endTime"] == 60 and len(res["stuck"]) == 1 and res["stuck"][0]["reason"]


def test_same_seed_same_output():
    a = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--output", "json", "--seed", "5")
    b = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--output", "json", "--seed", "5")
    assert a.returncode == 0 and a.stdout == b.stdout


def test_report_writes_html(tmp_path):
    out = tmp_path / "report.html"
    r = run("simulate", EXAMPLES / "spark-wordcount.yaml", "--compare", "--report", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "spark-wordcount-1" in html


def test_report_without_matplotlib_is_a_clear_error(tmp_path):
    # matplotlib is the report extra: without it --report is refused before anything runs
    out = tmp_path / "report.html"
    code = "import sys; sys.modules['matplotlib'] = None; from lavaflow.cli import main; main()"
    r = subprocess.run(
        [sys.executable, "-c", code, "simulate", str(EXAMPLES / "mpi-hello.yaml"), "--report", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "--report" in r.stderr and "lavaflow[report]" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("where", ["dir", "missing-dir"])
def test_report_path_is_checked_before_the_run(tmp_path, where):
    """Issue 35, item 5: --report naming a directory or a path in a missing directory is one error
    line, exit 2, before anything runs (it used to crash after the whole simulation)."""
    out = tmp_path if where == "dir" else tmp_path / "nope" / "r.html"
    r = run("simulate", EXAMPLES / "mpi-hello.yaml", "--report", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: --report: {out}")
    assert r.stdout == ""  # nothing ran


def test_config_that_is_not_utf8_is_a_clear_error(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_bytes(b"\xff\xfe actions: allocate\n")
    r = run("simulate", EXAMPLES / "mpi-hello.yaml", "--config", conf)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{conf}: not UTF-8 text" in r.stderr


def test_config_option(tmp_path):
    conf = write(
        tmp_path,
        "conf.yaml",
        'actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n',
    )
    r = run("simulate", EXAMPLES / "mpi-hello.yaml", "--config", conf, "--output", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"][0]["phase"] == "Completed"


# ---------------------------------------------------------------- bad input
def bad(r: subprocess.CompletedProcess) -> list[str]:
    """Assert an input refusal and return its problem lines."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stdout == ""  # nothing simulated, no table
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("error: ") for ln in lines), lines
    return lines


POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{ann}}}\nspec:\n  containers: [{{name: c{res}}}]\n"
JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  {extra}
  tasks: [{{name: t, replicas: 2, template: {{spec: {{containers: [{{name: c}}]}}}}}}]
"""

CASES = {
    "kind": ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", ["document 1", "Service/s", "unsupported kind"]),
    "quantity": (
        "---\n" + POD.format(ann="", res=", resources: {requests: {cpu: '1x'}}"),
        ["document 1", "Pod/p", "spec.containers[0].resources.requests.cpu", "quantity"],
    ),
    "noname": (
        "apiVersion: v1\nkind: Pod\nmetadata: {labels: {a: b}}\nspec:\n  containers: [{name: c}]\n",
        ["document 1", "Pod", "metadata.name", "required"],
    ),
    "minavailable": (JOB.format(extra="minAvailable: 5"), ["document 1", "Job/j", "spec.minAvailable", "greater than"]),
    "queue": (JOB.format(extra="queue: nope"), ["document 1", "Job/j", "spec.queue", "nope"]),
    "duration": (
        POD.format(ann=", annotations: {sim.lavaflow.io/duration: soon}", res=""),
        ["document 1", "Pod/p", "metadata.annotations[sim.lavaflow.io/duration]", "soon"],
    ),
    "spawned-by": (
        POD.format(ann=", annotations: {sim.lavaflow.io/spawned-by: ghost}", res=""),
        ["document 1", "Pod/p", "metadata.annotations[sim.lavaflow.io/spawned-by]", "ghost"],
    ),
    "configmap": (
        """apiVersion: v1
kind: ConfigMap
metadata: {name: volcano-scheduler-configmap}
data:
  volcano-scheduler.conf: |
    actions: "enqueue, nosuchaction"
    tiers:
    - plugins:
      - name: gang
""",
        ["document 1", "ConfigMap/volcano-scheduler-configmap", "data[volcano-scheduler.conf].actions", "nosuchaction"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_one_line_naming_the_place(tmp_path, cluster, case):
    text, must = CASES[case]
    f = write(tmp_path, f"{case}.yaml", text)
    lines = bad(run("simulate", cluster, f))
    assert len(lines) == 1, lines
    assert f"{case}.yaml: " in lines[0]
    for m in must:
        assert m in lines[0], (m, lines[0])


def test_invalid_yaml(tmp_path, cluster):
    f = write(tmp_path, "broken.yaml", "a: [1, 2\nb: c\n")
    (line,) = bad(run("simulate", cluster, f))
    assert "broken.yaml" in line and "line 2" in line and "not valid YAML" in line


def test_document_number_counts_documents(tmp_path):
    f = write(
        tmp_path,
        "multi.yaml",
        node_group(count=1)
        + "---\n"
        + POD.format(ann="", res="")
        + "---\n"
        + POD.format(ann="", res=", resources: {requests: {memory: lots}}").replace("name: p", "name: q"),
    )
    (line,) = bad(run("simulate", f))
    assert "multi.yaml: document 3: Pod/q: spec.containers[0].resources.requests.memory" in line


@pytest.mark.parametrize("cases", [("kind", "noname", "quantity"), ("duration", "minavailable", "queue", "spawned-by")])
def test_every_problem_of_every_file_is_reported(tmp_path, cluster, cases):
    # Parsing problems are all reported together; so are admission/annotation problems
    # (which are checked once every document has parsed).
    files = [
        write(
            tmp_path,
            f"{case}.yaml",
            CASES[case][0].replace("{name: p", f"{{name: p-{case}").replace("{name: j}", f"{{name: j-{case}}}"),
        )
        for case in cases
    ]
    lines = bad(run("simulate", cluster, *files))
    assert len(lines) == len(cases), lines
    for case in cases:
        assert sum(f"{case}.yaml: document 1" in ln for ln in lines) == 1, (case, lines)


def test_config_with_unknown_action(tmp_path, cluster):
    conf = write(tmp_path, "conf.yaml", 'actions: "enqueue, allocate, dance"\ntiers:\n- plugins:\n  - name: gang\n')
    (line,) = bad(run("simulate", cluster, "--config", conf))
    assert "conf.yaml" in line and "actions" in line and "dance" in line


def test_until_garbage(cluster):
    (line,) = bad(run("simulate", cluster, "--until", "garbage"))
    assert "--until" in line and "garbage" in line


def test_unknown_scheduler(cluster):
    (line,) = bad(run("simulate", cluster, "--scheduler", "nope"))
    assert "--scheduler" in line and "nope" in line


def test_missing_file(tmp_path, cluster):
    (line,) = bad(run("simulate", cluster, tmp_path / "missing.yaml"))
    assert "missing.yaml" in line and "not found" in line


def test_invalid_set_with_valid_workload_is_not_simulated(tmp_path, cluster):
    ok = write(tmp_path, "ok.yaml", POD.format(ann="", res=""))
    broken = write(tmp_path, "b.yaml", CASES["quantity"][0])
    for fmt in ("table", "json"):
        lines = bad(run("simulate", cluster, ok, broken, "--output", fmt))
        assert len(lines) == 1


# ---------------------------------------------------------------- the JSON writer
def test_json_writer_matches_the_standard_library_byte_for_byte():
    """--output json uses lavaflow.jsonout; it must write what json.dumps(indent=2, default=str) writes."""
    import collections
    import enum

    import numpy as np

    from conftest import simulate
    from lavaflow import jsonout

    class Level(enum.IntEnum):
        HIGH = 3

    class Colour(str, enum.Enum):  # noqa: UP042 (a str-mixin enum is what the test feeds)
        RED = "red"

    samples = [
        {},
        [],
        (),
        "",
        0,
        -1,
        1.5,
        1e-7,
        1e22,
        float("nan"),
        float("inf"),
        -float("inf"),
        None,
        True,
        False,
        {"a": [1, 2.5, None, True, False, 'é\n"\\ \u2028', {"b": {}}, []], 1: "x", 2.5: 1, True: 2, None: 3, False: 0},  # noqa: F601 (True and 1 collide on purpose)
        {"enum": Level.HIGH, "str-enum": Colour.RED, "np": [np.float64(0.1), np.int64(4), np.bool_(True)]},
        {"tuple": (1, (2, [3])), "object": object, "path": Path("/tmp/x")},
        [[[]]],
        [{"p": {"q": [{}]}}],
        # Flat containers (written by the C encoder at their depth), inside and outside others.
        {"name": "p-0", "node": None, "start": 1.5, "exit": 0, "ok": True, "env": {}, "ports": [], "t": ()},
        [{"a": 1, "b": "x"}, [1, 2.5, "y", None, float("nan")], {"deep": [{"c": -0.0, 3: 1e300}]}],
        {"sub": collections.OrderedDict([("k", 1), ("v", 2)]), "dd": collections.defaultdict(int, {"n": 1})},
        collections.OrderedDict([("k", [1, {"x": 1}])]),
        {"ints": [Level.HIGH, 1], "strs": [Colour.RED], "np": {"x": np.float64(2.0)}, "obj": [object]},
        {"nonempty-inside": {"a": [1], "b": {"c": 2}}, "one": [[1]]},
    ]
    result = simulate((EXAMPLES / "spark-wordcount.yaml").read_text())
    for obj in samples + [result]:
        assert jsonout.dumps(obj) == json.dumps(obj, indent=2, default=str)
    with pytest.raises(TypeError):
        jsonout.dumps({(1, 2): 3})


def test_scheduler_refuses_an_unknown_api_content_type():
    (line,) = bad(run("scheduler", "--kube-api-content-type", "text/plain"))
    assert "--kube-api-content-type" in line and "text/plain" in line


# ---------------------------------------------------------------- node choice (issue 40)
def test_node_choice_options_run_volcanos_sampling():
    r = run(
        "simulate", EXAMPLES / "mpi-hello.yaml", "--node-choice", "volcano", "--percentage-nodes-to-find", "10",
        "--output", "json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"][0]["phase"] == "Completed"
    # Any of Volcano's sampling flags alone turns Volcano's node choice on.
    r = run("simulate", EXAMPLES / "mpi-hello.yaml", "--minimum-feasible-nodes", "0", "--output", "json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--percentage-nodes-to-find", "101"], "--percentage-nodes-to-find: 101 is not a percentage from 0 to 100"),
        (["--percentage-nodes-to-find", "-1"], "--percentage-nodes-to-find: -1 is not a percentage"),
        (["--minimum-percentage-nodes-to-find", "150"], "--minimum-percentage-nodes-to-find: 150 is not a percentage"),
        (["--minimum-feasible-nodes", "-3"], "--minimum-feasible-nodes: -3 is negative"),
        (["--node-choice", "random"], "--node-choice: 'random' is not one of lavaflow, volcano"),
        (
            ["--node-choice", "lavaflow", "--minimum-feasible-nodes", "50"],
            "--minimum-feasible-nodes: Volcano's sampling options apply only with --node-choice volcano",
        ),
    ],
)
def test_bad_node_choice_options_are_refused(args, named):
    lines = bad(run("simulate", EXAMPLES / "mpi-hello.yaml", *args))
    assert any(named in ln for ln in lines), lines


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--percentage-nodes-to-find", "200"], "--percentage-nodes-to-find: 200 is not a percentage"),
        (["--minimum-feasible-nodes", "-1"], "--minimum-feasible-nodes: -1 is negative"),
        (["--node-choice", "kube"], "--node-choice: 'kube' is not one of"),
    ],
)
def test_scheduler_refuses_bad_node_choice_options_before_connecting(args, named):
    r = run("scheduler", "--kubeconfig", "/nonexistent/kubeconfig", *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert named in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\x00\n",
            "line 4, column 10: not valid YAML (character U+0000",
        ),
        ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  name: q\n", "line 5, column 3: not valid YAML (duplicate"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
            + "apiVersion: v1\nkind: Pod\n",
            "line 1, column 1: not valid YAML (excessive aliasing",
        ),
    ],
    ids=["nul", "duplicate-key", "alias-bomb"],
)
def test_yaml_the_api_server_refuses_is_one_error_line(tmp_path, cluster, text, expected):
    f = tmp_path / "bad.yaml"
    f.write_bytes(text.encode())
    (line,) = bad(run("simulate", cluster, f))
    assert f"{f}: {expected}" in line, line


@pytest.mark.parametrize("command", [["job", "run"], ["train", "create"]])
def test_cluster_commands_refuse_bad_yaml_before_connecting(tmp_path, command):
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  name: q\n")
    r = run(*command, "-f", f, "--kubeconfig", tmp_path / "none")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert (
        r.stderr.strip()
        == f"error: {f}: line 5, column 3: not valid YAML (duplicate key 'name' (first at line 4, column 3))"
    )
