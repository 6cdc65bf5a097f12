"""Sia's measurements read as per-GPU-type speed models (lavaflow.elastic.sia), on small tables of
our own in Sia's file layout (tests/data/sia: the artifact itself is never committed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lavaflow.elastic import sia, spec as es
from lavaflow.elastic.sia import SiaArtifactError, SiaJobSpeed, sia_app
from lavaflow.elastic.speed import PolluxJobSpeed
from lavaflow.elastic.trace_readers import WorkloadError, read_workload, workload_format

ARTIFACT = Path(__file__).resolve().parents[1] / "data" / "sia"
ROOT = str(ARTIFACT)
TRACE = ARTIFACT / "sia-simulator" / "workloads" / "tiny" / "workload-1.csv"


@pytest.fixture
def artifact(monkeypatch):
    monkeypatch.setenv(sia.ENV_VAR, ROOT)
    return ROOT


@pytest.fixture(autouse=True)
def _no_artifact_from_the_environment(monkeypatch):
    monkeypatch.delenv(sia.ENV_VAR, raising=False)
    monkeypatch.delenv(sia.ALL_TRACES_ENV, raising=False)


def test_tables_are_read_by_column_name_whatever_their_order():
    rtx = sia_app(ROOT, "cifar10", "rtx")  # local_bsz,step_time,sync_time,placement
    t4 = sia_app(ROOT, "cifar10", "aws")  # placement,local_bsz,step_time,sync_time
    assert set(rtx.placements) == {(1,), (2,), (8,), (1, 1), (8, 8)}
    assert set(t4.placements) == {(1,), (2,), (4,), (1, 1), (4, 4)}
    bs, st, sy = rtx.placements[(1,)]
    assert list(bs) == [32, 64, 128]
    assert st[0] == pytest.approx(0.6 * (0.01 + 0.004 * 32)) and sy[0] == 0.0
    assert (rtx.min_local_bsz, rtx.max_local_bsz) == (32, 128)
    assert rtx.init_batch_size == 128 and rtx.max_batch_size == 1024 and rtx.max_epochs == 4


def test_the_repository_or_its_sia_simulator_directory_is_accepted():
    assert sia.tables_dir(ROOT) == sia.tables_dir(ARTIFACT / "sia-simulator")


@pytest.mark.parametrize(
    ("label", "suffix"),
    [("t4", "aws"), ("rtx", "rtx"), ("a100", "dgx-ext"), ("quad", "quad"), ("dgx-ext", "dgx-ext"), (None, "rtx")],
)
def test_accelerator_labels_name_the_artifacts_gpu_types(label, suffix):
    assert sia.suffix_of(label) == suffix


def test_an_unmeasured_gpu_type_is_named():
    with pytest.raises(SiaArtifactError, match="'v100' has no Sia measurements"):
        sia.suffix_of("v100")


def test_per_type_speeds_follow_the_tables():
    job = SiaJobSpeed("cifar10", 512, root=ROOT)
    one = {t: job.rate((1,), t) for t in ("t4", "rtx", "a100")}
    assert one["t4"] < one["rtx"] < one["a100"]  # our tables: T4 slowest, A100 fastest
    # more GPUs of one type are faster where the tables say so, on every type
    for t in ("t4", "rtx", "a100"):
        assert job.rate((1,), t) < job.rate((2,), t) < job.rate((4,), t)
    # the work is the same on every type: the gradient statistics are shared
    assert job.total_work() == PolluxJobSpeed.total_work(job)
    # the artifact's calibration: the table's rate divided by the application's slowdown
    raw = sia_app(ROOT, "cifar10", "dgx-ext").rate((1,), 512)
    assert job.rate((1,), "a100") == pytest.approx(raw / sia.SLOWDOWN["cifar10"])


def test_step_times_grow_with_the_batch_between_and_beyond_measured_points():
    for suffix in ("aws", "rtx", "dgx-ext"):
        m = sia_app(ROOT, "cifar10", suffix)
        for pl in ((1,), (2, 2), (3,)):  # measured, unmeasured but inside the tables, interpolated
            steps = [m.step_time(pl, b)[0] for b in (32, 48, 64, 96, 128)]
            assert steps == sorted(steps) and steps[0] < steps[-1], (suffix, pl, steps)


def test_adaptive_jobs_choose_their_batch_per_type():
    job = SiaJobSpeed("cifar10", 128, adaptive=True, root=ROOT)
    assert job.phase_bounds  # progress-dependent, as a Pollux adaptive job
    fixed = SiaJobSpeed("cifar10", 128, root=ROOT)
    for t in ("t4", "a100"):  # choosing the batch never takes longer than keeping the job's own
        assert job.total_work() / job.rate((4,), t) <= fixed.total_work() / fixed.rate((4,), t) * 1.001
    assert job.rate((4,), "a100") > job.rate((4,), "t4")


def test_restore_delays_are_the_artifacts():
    assert SiaJobSpeed("bert", 12, root=ROOT).restore_delay == 120
    assert SiaJobSpeed("cifar10", 128, root=ROOT).restore_delay == 50
    assert sia.restore_delay("imagenet") == 250 and sia.restore_delay("gpt_pmp") == 30


def test_a_missing_table_is_named():
    with pytest.raises(SiaArtifactError, match=r"placements-quad\.csv.*scalability-quad\.csv"):
        sia_app(ROOT, "cifar10", "quad")
    with pytest.raises(SiaArtifactError, match="no such directory"):
        sia.tables_dir("/nonexistent/sia")
    with pytest.raises(SiaArtifactError, match="no sia-simulator/traces directory"):
        sia.tables_dir(ARTIFACT / "sia-simulator" / "workloads")


def test_a_sia_workload_reads_as_sia_jobs(artifact):
    assert workload_format(TRACE) == "sia"
    jobs = read_workload(TRACE)
    assert [j.name for j in jobs] == ["cifar10-0", "bert-1", "cifar10-2", "bert-3", "cifar10-4", "bert-5"]
    assert all(isinstance(j.speed, SiaJobSpeed) and j.speed.root == ROOT for j in jobs)
    assert jobs[1].submit_time == 40.5 and jobs[1].requested == 4 and jobs[1].batch_size == 48


def test_a_sia_workload_without_the_artifact_names_what_is_missing():
    with pytest.raises(WorkloadError, match=r"workload-1\.csv: a Sia workload.*placements-<type>\.csv.*--sia-artifact"):
        workload_format(TRACE)


def test_an_artifact_that_is_not_there_is_named(monkeypatch):
    monkeypatch.setenv(sia.ENV_VAR, "/nonexistent/sia")
    with pytest.raises(WorkloadError, match="'/nonexistent/sia': no such directory"):
        workload_format(TRACE)


def test_the_artifacts_location_alone_leaves_other_pollux_traces_pollux(artifact, tmp_path, monkeypatch):
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nbert-0,0,bert,1,12\n")
    assert workload_format(trace) == "pollux"  # an exported LAVAFLOW_SIA_ARTIFACT changes nothing
    monkeypatch.setenv(sia.ALL_TRACES_ENV, "1")  # as --sia-artifact sets it
    assert workload_format(trace) == "sia"


def test_an_application_the_artifact_lacks_is_named(artifact, tmp_path, monkeypatch):
    monkeypatch.setenv(sia.ALL_TRACES_ENV, "1")
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nncf-0,0,ncf,1,256\n")
    with pytest.raises(WorkloadError, match=r"w\.csv:2: column 'application': .*ncf.*placements-rtx\.csv"):
        read_workload(trace)
    trace.write_text("name,time,application,num_replicas,batch_size\ngpt-0,0,gpt_pmp,8,48\n")
    with pytest.raises(WorkloadError, match="unknown application 'gpt_pmp'"):
        read_workload(trace)


def test_a_trace_job_carries_its_tables_and_restore_delay(artifact):
    from lavaflow.sim.traces import RESTART_PAUSE, job_document
    from lavaflow.sim.training import RESTART_PAUSE as TRAINING_PAUSE

    assert RESTART_PAUSE == TRAINING_PAUSE
    bert = next(j for j in read_workload(TRACE) if j.application == "bert")
    ann = job_document(bert)["metadata"]["annotations"]
    assert ann[es.SPEED_TABLES] == "sia" and ann[RESTART_PAUSE] == "120s" and ann[es.APPLICATION] == "bert"
    again = es.speed_spec(ann)
    assert isinstance(again.speed, SiaJobSpeed) and again.work == pytest.approx(bert.work)


def test_job_annotations_name_sias_tables(artifact):
    spec = es.speed_spec({es.APPLICATION: "bert", es.BATCH_SIZE: "24", es.SPEED_TABLES: "sia"})
    assert isinstance(spec.speed, SiaJobSpeed) and spec.work == pytest.approx(spec.speed.total_work())
    with pytest.raises(es.SpecError, match='expected "pollux" or "sia"'):
        es.speed_spec({es.APPLICATION: "bert", es.SPEED_TABLES: "gavel"})
    with pytest.raises(es.SpecError, match="below bert's smallest per-GPU batch 4"):
        es.speed_spec({es.APPLICATION: "bert", es.BATCH_SIZE: "2", es.SPEED_TABLES: "sia"})


def test_job_annotations_without_the_artifact_say_so():
    with pytest.raises(es.SpecError, match=f"set {sia.ENV_VAR}"):
        es.speed_spec({es.APPLICATION: "bert", es.SPEED_TABLES: "sia"})
