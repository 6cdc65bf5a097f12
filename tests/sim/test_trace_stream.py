"""Issue 35, item 24: trace jobs are made as the simulated clock reaches them, not loaded whole.

The feed (sim/traces.py) must give the simulator exactly what loading the whole trace gave —
the same objects, in the same order, the same results — and refuse a bad row anywhere in a trace
before anything runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from conftest import simulate_cli
from lavaflow.api.loader import InputError, Loaded, Problems, load_files
from lavaflow.sim import traces
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare
from lavaflow.sim.traces import TraceFeed, default_cluster_for, load_traces

DATA = Path(__file__).resolve().parents[1] / "data"
POLLUX = DATA / "pollux-20.csv"
CLUSTER = DATA / "gpu-16.yaml"


def _rows(path: Path) -> tuple[str, list[str]]:
    lines = path.read_text().splitlines()
    return lines[0], lines[1:]


def _unsorted(tmp_path: Path) -> Path:
    """pollux-20 with its rows out of time order, a byte-order mark, CRLF line ends, a blank line
    and two jobs at one time."""
    head, rows = _rows(POLLUX)
    rows = rows[10:] + rows[:10]
    rows[3] = rows[3].split(",", 2)[0] + "," + rows[4].split(",")[1] + "," + rows[3].split(",", 2)[2]
    path = tmp_path / "unsorted.csv"
    path.write_bytes(
        ("\ufeff" + head + "\r\n" + "\r\n".join(rows[:7]) + "\r\n\r\n" + "\r\n".join(rows[7:]) + "\r\n").encode()
    )
    return path


def _gavel(tmp_path: Path) -> Path:
    path = tmp_path / "gavel.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "time", "model", "num_replicas", "duration"])
        for i in range(12):  # three jobs at each time
            w.writerow([f"g-{i}", i // 3 * 100, "ResNet-50 (batch size 64)", 1 + i % 3, 600 + i])
    return path


def _eager(paths: list[Path], adaptive: bool = False):
    """What the whole trace gave: prepare() over the cluster and every trace job."""
    loaded = load_files([str(CLUSTER)])
    problems = Problems()
    loaded += load_traces([str(p) for p in paths], loaded, problems, adaptive=adaptive)
    problems.raise_if_any()
    return prepare(loaded)


def _streamed(paths: list[Path], adaptive: bool = False):
    loaded = load_files([str(CLUSTER)])
    problems = Problems()
    loaded += default_cluster_for(loaded, problems)
    feed = TraceFeed.open([str(p) for p in paths], loaded, problems, adaptive=adaptive)
    problems.raise_if_any()
    assert feed is not None and not feed.problems
    sim_input = prepare(loaded)
    sim_input.stream = feed
    return sim_input


def _trace_items(sim_input) -> list[tuple]:
    """The trace jobs' Items: (time, source, the object as the API would show it)."""
    items = [it for it in sim_input.items if type(it.obj).__name__ == "Job"]
    if sim_input.stream is not None:
        items += list(sim_input.stream)
    return [(it.submit_at, str(it.source), it.update, it.delete_at, it.obj.model_dump(mode="json")) for it in items]


@pytest.fixture(params=["kept", "read-again"])
def mode(request, monkeypatch):
    """Small traces keep the objects their check made; larger ones are read again, a batch at a time."""
    if request.param == "read-again":
        monkeypatch.setattr(traces, "KEEP_CHECKED", 0)
        monkeypatch.setattr(traces, "STREAM_BATCH", 3)
    return request.param


@pytest.mark.parametrize("which", ["sorted", "unsorted", "gavel", "two files, names met", "adaptive"])
def test_the_feed_yields_what_the_whole_trace_gave(tmp_path, mode, which):
    paths = {
        "sorted": [POLLUX],
        "unsorted": [_unsorted(tmp_path)],
        "gavel": [_gavel(tmp_path)],
        "two files, names met": [POLLUX, _unsorted(tmp_path), _gavel(tmp_path), _gavel(tmp_path)],
        "adaptive": [POLLUX],
    }[which]
    adaptive = which == "adaptive"
    eager, streamed = _eager(paths, adaptive), _streamed(paths, adaptive)
    expected = sorted(_trace_items(eager), key=lambda t: t[0])  # (prepare() sorts stably by time)
    assert _trace_items(streamed) == expected
    assert (
        len(expected) == {"sorted": 20, "unsorted": 20, "gavel": 12, "two files, names met": 64, "adaptive": 20}[which]
    )
    # the rest of the input is what it was
    assert [it.obj.model_dump(mode="json") for it in streamed.items] == [
        it.obj.model_dump(mode="json") for it in eager.items if type(it.obj).__name__ != "Job"
    ]


@pytest.mark.parametrize("which", ["sorted", "unsorted"])
def test_a_replay_from_the_feed_is_the_replay_of_the_whole_trace(tmp_path, mode, which):
    from lavaflow.scheduler.framework.conf import load_scheduler_conf

    paths = [POLLUX] if which == "sorted" else [_unsorted(tmp_path), POLLUX]

    def run(sim_input) -> str:
        conf = load_scheduler_conf()
        opt = next(p for t in conf.tiers for p in t.plugins if p.name == "elastic")
        opt.arguments["elastic.policy"] = "Tiresias"
        return json.dumps(Simulation(sim_input, conf=conf).run(), sort_keys=True, default=str)

    assert run(_streamed(paths)) == run(_eager(paths))


def test_the_feed_makes_jobs_only_as_they_are_taken(monkeypatch):
    monkeypatch.setattr(traces, "KEEP_CHECKED", 0)
    monkeypatch.setattr(traces, "STREAM_BATCH", 4)
    made = []
    job = traces._TraceFile.job

    def counted(self, *a, **kw):
        made.append(1)
        return job(self, *a, **kw)

    sim_input = _streamed([POLLUX])
    monkeypatch.setattr(traces._TraceFile, "job", counted)
    feed = iter(sim_input.stream)
    for taken in range(1, 21):
        next(feed)
        assert len(made) <= taken + 4  # never more than a batch ahead of what was taken
    assert next(feed, None) is None and len(made) == 20


def test_the_simulator_takes_trace_jobs_as_its_clock_reaches_them(monkeypatch):
    monkeypatch.setattr(traces, "KEEP_CHECKED", 0)
    monkeypatch.setattr(traces, "STREAM_BATCH", 1)
    sim_input = _streamed([POLLUX])
    made = []
    job = traces._TraceFile.job
    monkeypatch.setattr(traces._TraceFile, "job", lambda self, *a, **kw: made.append(1) or job(self, *a, **kw))
    sim = Simulation(sim_input)
    submitted: list[tuple[float, float, int]] = []  # (clock, the job's time, jobs made by then)
    submit = sim._submit

    def watched(it):
        submitted.append((sim.now, it.submit_at, len(made)))
        submit(it)

    monkeypatch.setattr(sim, "_submit", watched)
    sim.run()
    jobs = [s for s in submitted if type(s) is tuple and s[1] > 0]
    assert len(jobs) == 20
    for i, (clock, at, n) in enumerate(jobs, start=1):
        assert clock == at  # submitted at its time
        assert n <= i + 1  # made when the one before it was submitted, not before
    assert sim_input.stream.files[0].starts == []  # a trace in time order keeps no row positions


def _bad_late_row(tmp_path: Path, row: str, extra_header: str = "", fill: str = "") -> Path:
    head, rows = _rows(POLLUX)
    rows = [r + fill for r in rows]
    rows[-2] = row
    path = tmp_path / "late.csv"
    path.write_text("\n".join([head + extra_header, *rows]) + "\n")
    return path


def test_a_bad_late_row_refuses_the_input_before_anything_runs(tmp_path):
    path = _bad_late_row(tmp_path, "bad-19,3600,cifar11,1,128")
    p = simulate_cli(str(path), str(CLUSTER), "--output", "json")
    assert p.returncode == 2
    assert p.stdout == ""  # nothing was simulated
    assert p.stderr.strip().splitlines() == [
        f"error: {path}:20: column 'application': unknown application 'cifar11' "
        "(known: bert, cifar10, deepspeech2, imagenet, ncf, yolov3)"
    ]


def test_a_late_row_admission_refuses_names_file_line_object_and_field(tmp_path):
    path = _bad_late_row(tmp_path, "ncf-late,3600,ncf,1,32768,1,200000", ",min_replicas,max_replicas", ",,")
    p = simulate_cli(str(path), str(CLUSTER), "--output", "json")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        f"error: {path}: line 20: Job/ncf-late: spec.tasks[0].replicas: replicas is 200000; "
        "the simulator creates at most 100000 pods per task or workload; lower it."
    ]


def test_a_bad_row_is_told_alone_as_before_even_after_rows_admission_refuses(tmp_path):
    """The reader's problems come first, without admission's (which never ran on a whole trace
    whose reading failed)."""
    head, rows = _rows(POLLUX)
    rows = [f"ncf-{i},{i},ncf,1,32768,," for i in range(traces.STREAM_BATCH + 10)]  # more than a batch
    rows[2] = "ncf-big,2,ncf,1,32768,1,200000"
    rows[-1] = "x,99,ncf,1,32768,1,1,extra"
    path = tmp_path / "two.csv"
    path.write_text("\n".join([head + ",min_replicas,max_replicas", *rows]) + "\n")
    p = simulate_cli(str(path), str(CLUSTER), "--output", "json")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [f"error: {path}:{len(rows) + 1}: expected 7 fields"]
    rows[-1] = "x,99,ncf,1,32768,,"
    path.write_text("\n".join([head + ",min_replicas,max_replicas", *rows]) + "\n")
    p = simulate_cli(str(path), str(CLUSTER), "--output", "json")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        f"error: {path}: line 4: Job/ncf-big: spec.tasks[0].replicas: replicas is 200000; "
        "the simulator creates at most 100000 pods per task or workload; lower it."
    ]


def test_bad_rows_are_refused_as_the_whole_trace_refused_them(tmp_path):
    for name, row in [
        ("time", "x-19,12x,ncf,1,32768"),
        ("fields", "x-19,1,ncf,1,32768,9"),
        ("duplicate", "cifar10-0,1,ncf,1,32768"),
    ]:
        path = _bad_late_row(tmp_path, row)
        problems = Problems()
        loaded = load_files([str(CLUSTER)])
        assert TraceFeed.open([str(path)], loaded, problems) is not None
        eager = Problems()
        load_traces([str(path)], loaded, eager)
        assert problems.lines == eager.lines and len(eager.lines) == 1, name


def test_traces_beside_objects_admission_checks_them_against_are_read_whole(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: ncf-2}\n"
        "spec: {minAvailable: 1, tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c}]}}}]}\n"
    )
    loaded = load_files([str(CLUSTER), str(job)])
    assert TraceFeed.open([str(POLLUX)], loaded, Problems()) is None  # a Job of a trace job's name
    problems = Problems()
    loaded += load_traces([str(POLLUX)], loaded, problems)
    with pytest.raises(InputError) as err:
        prepare(loaded)  # ... which admission takes for an update of the Job, and refuses
    assert any("Job/ncf-2" in line and "after the job is created" in line for line in err.value.problems)


def test_a_trace_changed_while_it_is_replayed_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "KEEP_CHECKED", 0)
    path = tmp_path / "t.csv"
    path.write_text(POLLUX.read_text())
    sim_input = _streamed([path])
    path.write_text(POLLUX.read_text().replace("cifar10-0,107", "cifar10-0,108"))
    with pytest.raises(RuntimeError, match="changed while it was replayed"):
        list(sim_input.stream)


def test_the_feed_keeps_its_checked_jobs_only_while_the_traces_are_small(monkeypatch):
    feed = _streamed([POLLUX]).stream
    assert all(t.checked is not None for t in feed.files)
    monkeypatch.setattr(traces, "KEEP_CHECKED", 19)
    feed = _streamed([POLLUX]).stream
    assert all(t.checked is None for t in feed.files)
    assert [it.obj.name for it in feed] == [it.obj.name for it in _streamed([POLLUX]).stream]


def test_loaded_whole_the_trace_is_what_it_always_was():
    """load_traces (the reference) against the readers: names, sources and times unchanged."""
    from lavaflow.elastic.trace_readers import read_workload

    loaded = load_files([str(CLUSTER)])
    jobs = load_traces([str(POLLUX)], loaded, Problems())
    specs = read_workload(POLLUX, max_gpus=16)
    assert [j.obj.name for j in jobs] == [traces.dns_name(s.name) for s in specs]
    assert [j.source.document for j in jobs] == list(range(2, 22))
    assert isinstance(jobs[0], Loaded)


def test_progress_counts_every_trace_job_from_the_start_and_the_events(monkeypatch):
    """The progress display's total is the trace's length from the first call, though its jobs
    are made only as the clock reaches them; the events handled only grow."""
    monkeypatch.setattr(traces, "KEEP_CHECKED", 0)
    sim = Simulation(_streamed([POLLUX]))
    seen: list[tuple[float, int, int, int]] = []
    sim.run(progress=lambda now, done, total, events: seen.append((now, done, total, events)))
    assert seen and {total for _, _, total, _ in seen} == {20}
    assert seen[0][1] == 0 and seen[-1][1] == 20  # jobs finished: none at first, all at the end
    events = [e for *_, e in seen]
    assert events == sorted(events) and events[-1] == sim.events_done > 20


def test_the_progress_clock_reads_hours_and_days():
    from lavaflow.cli.main import _clock

    assert (_clock(0), _clock(3725.9), _clock(86400 * 2 + 61)) == ("0:00:00", "1:02:05", "2d 0:01:01")
