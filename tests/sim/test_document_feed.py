"""Issue 35, item 24: many Volcano Jobs in YAML are held as their documents until their time.

The feed (sim/documents.py) must give the simulator exactly what loading the whole input gave —
the same objects, submitted in the same order, the same results and warnings — and an input with
any problem must be refused before anything runs, told exactly as the whole load tells it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from lavaflow.sim import documents
from lavaflow.sim.documents import DocumentFeed, load_documents

cli = importlib.import_module("lavaflow.cli.main")  # the package exports its main() as "main"


def _job(name: str, at: int | None, duration: int = 120, extra: str = "", task: str = "worker") -> str:
    annotations = f"\n  annotations: {{sim.lavaflow.io/submit-at: '{at}'}}" if at is not None else ""
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}{annotations}
spec:
  minAvailable: 1
  schedulerName: volcano{extra}
  tasks:
  - name: {task}
    replicas: 2
    template:
      metadata: {{annotations: {{sim.lavaflow.io/duration: '{duration}'}}}}
      spec:
        containers:
        - name: c
          image: busybox
          resources: {{requests: {{cpu: '1', memory: 1Gi}}}}
"""


NODES = """apiVersion: sim.lavaflow.io/v1alpha1
kind: NodeGroup
metadata: {name: n}
spec: {count: 2, capacity: {cpu: '4', memory: 8Gi, pods: '110'}}
"""
LATE_NODE = """apiVersion: v1
kind: Node
metadata:
  name: late
  annotations: {sim.lavaflow.io/submit-at: '30'}
status: {allocatable: {cpu: '2', memory: 4Gi, pods: '110'}}
"""
QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team}
spec: {weight: 2}
"""


def _write(tmp_path: Path, docs: list[str], name: str = "in.yaml") -> Path:
    path = tmp_path / name
    path.write_text("---\n".join(docs))
    return path


def _mixed(tmp_path: Path) -> Path:
    """Jobs out of time order, at the times of other objects and of each other; a Queue they use
    defined after them; a Node that arrives at a Job's time; a warning; a List document."""
    in_list = _job("listed", 30).replace("\n", "\n  ").rstrip()
    return _write(
        tmp_path,
        [
            NODES,
            _job("late", 90),
            _job("at-node", 30),
            _job("first", None, duration=40),
            LATE_NODE,
            _job("same-time", 30, extra="\n  queue: team"),
            _job("plugin", 60, extra="\n  networkTopology: {mode: hard, highestTierName: rack}"),
            f"apiVersion: v1\nkind: List\nitems:\n- {in_list}\n",
            QUEUE,
            _job("zero", 0),
        ],
    )


def _whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "load_documents", lambda paths, skip=False: None)


def _both(monkeypatch: pytest.MonkeyPatch, files: list[Path], taken: bool = True) -> tuple[str, str]:
    """The JSON result of the whole load and of the feed's way (FEED_MIN 0; ``taken``: the input
    is held by a feed, not left to the whole load)."""
    monkeypatch.setattr(documents, "FEED_MIN", 0)
    assert (load_documents([str(f) for f in files]) is not None) == taken
    fed, _ = cli._run(files, None, "lavaflow", 0, None, 60.0, False)
    with monkeypatch.context() as m:
        _whole(m)
        whole, _ = cli._run(files, None, "lavaflow", 0, None, 60.0, False)
    return json.dumps(whole, sort_keys=True), json.dumps(fed, sort_keys=True)


def test_the_feed_gives_what_the_whole_load_gave(tmp_path, monkeypatch):
    whole, fed = _both(monkeypatch, [_mixed(tmp_path)])
    assert fed == whole
    result = json.loads(fed)
    assert result["summary"]["completed"] == 7
    assert any("highestTierName" in w for w in result["warnings"])


def test_jobs_of_two_files_deleted_at_a_time_run_as_before(tmp_path, monkeypatch):
    deleted = _job("deleted", 5, duration=600).replace(
        "sim.lavaflow.io/submit-at: '5'", "sim.lavaflow.io/submit-at: '5', sim.lavaflow.io/delete-at: '70'"
    )
    files = [
        _write(tmp_path, [NODES, _job("a", 20), deleted], "one.yaml"),
        _write(tmp_path, [_job("b", 5), QUEUE, _job("c", 0, extra="\n  queue: team")], "two.yaml"),
    ]
    whole, fed = _both(monkeypatch, files)
    assert fed == whole
    assert json.loads(fed)["summary"]["jobs"] == 4


def test_the_feed_submits_in_the_order_prepare_sorts(tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "FEED_MIN", 0)
    held = load_documents([str(_mixed(tmp_path))])
    assert held is not None
    sim_input, _ = held
    feed = sim_input.stream
    assert isinstance(feed, DocumentFeed)
    order = sorted(
        [(it.rank, it.obj.kind, it.obj.name, it.submit_at) for it in sim_input.items]
        + [(it.rank, it.obj.kind, it.obj.name, it.submit_at) for it in feed]
    )
    ranks = [r for r, *_ in order]
    assert ranks == list(range(len(order)))  # every submission numbered once
    named = [(kind, name, at) for _, kind, name, at in order if kind != "Node" or name == "late"]
    assert named == [
        ("Job", "first", 0.0),
        ("Queue", "team", 0.0),
        ("Job", "zero", 0.0),
        ("Job", "at-node", 30.0),
        ("Node", "late", 30.0),
        ("Job", "same-time", 30.0),
        ("Job", "listed", 30.0),
        ("Job", "plugin", 60.0),
        ("Job", "late", 90.0),
    ]
    assert feed.docs == [None] * feed.count  # each document let go of once its Job is made
    with pytest.raises(RuntimeError, match="read once"):
        next(iter(feed))


def test_a_bad_job_is_refused_before_the_run_as_the_whole_load_refuses_it(tmp_path, monkeypatch):
    path = _write(tmp_path, [NODES, _job("a", 10), _job("b", 20).replace("replicas: 2", "replicas: '2'"), _job("c", 5)])
    monkeypatch.setattr(documents, "FEED_MIN", 0)
    with pytest.raises(cli.Invalid) as fed:
        cli._load([path], None)
    with monkeypatch.context() as m:
        _whole(m)
        with pytest.raises(cli.Invalid) as whole:
            cli._load([path], None)
    assert fed.value.problems == whole.value.problems
    assert fed.value.problems == [
        f"{path}: document 3: Job/b: spec.tasks[0].replicas: expected a whole number, found the string '2'"
    ]


def test_inputs_the_feed_does_not_change_are_the_only_ones_it_takes(tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "FEED_MIN", 0)
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n"
    update = _job("a", 50).replace("replicas: 2", "replicas: 1")
    # pods' names meet: job "a-b" task "c" and job "a" task "b-c" both make pod a-b-c-0
    meet = [_job("a-b", 1, task="c"), _job("a", 2, task="b-c")]
    storage = _job("s", 1).replace("memory: 1Gi", "memory: 1Gi, ephemeral-storage: 1Gi")
    for i, docs in enumerate(
        [[NODES, _job("a", 1), pod], [NODES, _job("a", 1), update], [NODES, *meet], [NODES, storage]]
    ):
        path = _write(tmp_path, docs, f"in{i}.yaml")
        assert load_documents([str(path)]) is None, docs
    monkeypatch.setattr(documents, "FEED_MIN", 3)
    assert load_documents([str(_write(tmp_path, [NODES, _job("a", 1), _job("b", 2)], "two.yaml"))]) is None


def test_an_update_runs_as_before(tmp_path, monkeypatch):
    update = _job("a", 50).replace("replicas: 2", "replicas: 1")
    path = _write(tmp_path, [NODES, _job("a", 1), update, _job("b", 3)])
    whole, fed = _both(monkeypatch, [path], taken=False)
    assert fed == whole
