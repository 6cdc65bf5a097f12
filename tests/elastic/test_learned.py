"""Speed models learned from what jobs report (lavaflow.elastic.learned), and the separation of
the simulator's truth from what the scheduler observes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import simulate_cli
from lavaflow.elastic import learned as lr
from lavaflow.elastic.speed import PolluxJobSpeed, pollux_app

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(p: lr.PerfParams, configs):
    out = []
    for nodes, reps, bsz in configs:
        step = float(p.step_time(nodes, reps, bsz, 0))
        out.append((nodes, reps, bsz, float(p.compute_time(bsz)), step))
    return tuple(out)


CONFIGS = [(1, 1, 32), (1, 2, 64), (1, 4, 32), (1, 4, 128), (2, 8, 64), (4, 16, 32), (2, 6, 96)]


@settings(max_examples=40, deadline=None)
@given(
    ac=st.floats(0.005, 0.2),
    bc=st.floats(1e-4, 5e-3),
    an=st.floats(0.01, 0.3),
    ar=st.floats(0.005, 0.1),
    bn=st.floats(0.0, 0.02),
    br=st.floats(0.0, 0.01),
    gamma=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
)
def test_fit_predicts_the_step_times_it_was_fitted_on(ac, bc, an, ar, bn, br, gamma):
    """Measurements made by a model of Pollux's form are predicted back within a few percent."""
    true = lr.PerfParams(ac, bc, max(an, 1.1 * ar), bn, ar, br, gamma)
    rows = _rows(true, CONFIGS)
    fit = lr.fit_perf(rows)
    a = np.array(rows)
    pred = fit.step_time(a[:, 0], a[:, 1], a[:, 2], 0)
    assert np.all(np.abs(pred / a[:, 4] - 1) < 0.08), (pred / a[:, 4], fit)
    assert fit.alpha_c >= 0 and fit.beta_c >= 0 and 1.0 <= fit.gamma <= 10.0


def test_fit_follows_pollux_priors_where_measurements_say_nothing():
    p = lr.PerfParams(0.05, 0.001, 0.2, 0.01, 0.05, 0.005, 1.0)
    # one local batch size: the compute time is split half constant, half per sample
    rows = _rows(p, [(1, 1, 64), (1, 2, 64), (1, 4, 64)])
    fit = lr.fit_perf(rows)
    comp = np.mean([r[3] for r in rows])
    assert fit.alpha_c == pytest.approx(comp / 2)
    assert fit.beta_c == pytest.approx(comp / 2 / 64)
    # nothing measured across nodes: crossing one costs at least 1.1x syncing within one
    assert fit.alpha_n >= 1.1 * fit.alpha_r - 1e-12 and fit.beta_n >= 1.1 * fit.beta_r - 1e-12
    # one replica only: no sync term at all (optimistic), no growth with replicas
    one = lr.fit_perf(_rows(p, [(1, 1, 32), (1, 1, 64)]))
    assert one.alpha_r <= 1e-6 and one.beta_r <= 1e-6


def test_pollux_measurements_are_learned_closely_where_they_were_measured():
    """On the Pollux traces (the simulator's truth), a model fitted on a job's measured placements
    predicts those placements' rates within 25 %."""
    for app in ("cifar10", "imagenet", "yolov3", "bert", "deepspeech2"):
        m = pollux_app(app)
        b = min(2 * m.min_local_bsz, m.max_local_bsz)
        shapes = [(1,), (2,), (4,), (4, 4), (4, 4, 4, 4)]
        prof = tuple(lr.Measurement("default", len(pl), sum(pl), b, 0, *m.step_time(pl, b)) for pl in shapes)
        rep = lr.Report(prof, init_batch_size=m.init_batch_size, local_bsz_bounds=(m.min_local_bsz, m.max_local_bsz))
        bsz = b  # a fixed-batch job of one sample batch per replica count measured
        truth = PolluxJobSpeed(app, bsz)
        learned = lr.LearnedSpeed(rep, batch_size=bsz)
        for pl in ((1,),):
            assert learned.rate(pl) == pytest.approx(truth.rate(pl), rel=0.25), app


def test_placeholder_and_twice_the_largest_measured():
    s = lr.LearnedSpeed(None, batch_size=128)
    assert not s.observed and s.max_allowed == 1
    assert [s.rate((n,)) for n in (1, 2, 4)] == [lr.PLACEHOLDER_RATE * n for n in (1, 2, 4)]
    rep = lr.Report((lr.Measurement("t4", 1, 4, 32, 0, 0.2, 0.05),), batch_size=128, init_batch_size=128)
    s = lr.LearnedSpeed(rep, batch_size=128)
    assert s.observed and s.max_observed == 4 and s.max_allowed == 8


def test_a_user_table_is_a_prior_until_the_job_measures():
    from lavaflow.elastic.speed import TabulatedJobSpeed

    prior = TabulatedJobSpeed({1: 1.0, 2: 1.5, 4: 2.0})
    s = lr.LearnedSpeed(None, prior=prior)
    assert s.rate((2,)) == pytest.approx(1.5)
    measured = lr.LearnedSpeed(lr.Report(rates=(("default", 1, 2, 3.0),)), prior=prior)
    assert measured.rate((2,)) == pytest.approx(3.0) and measured.rate((1,)) == pytest.approx(1.5)


def test_adaptive_job_learns_a_larger_batch_from_its_gradient_noise():
    """With a large gradient noise scale a larger batch pays; with none it does not."""
    prof = (lr.Measurement("default", 1, 4, 32, 0, 0.1, 0.02), lr.Measurement("default", 2, 8, 64, 0, 0.2, 0.08))
    base = dict(init_batch_size=128, max_batch_size=4096, local_bsz_bounds=(16, 256), batch_size=128)
    noisy = lr.LearnedSpeed(lr.Report(prof, grad_sqr=0.01, grad_var=10.0, **base), 128, adaptive=True)
    clean = lr.LearnedSpeed(lr.Report(prof, grad_sqr=10.0, grad_var=0.01, **base), 128, adaptive=True)
    assert noisy.best_batch((4, 4))[1] > clean.best_batch((4, 4))[1]
    assert clean.best_batch((4, 4))[1] == 128


def test_report_round_trip_and_malformed_reports():
    rep = lr.Report(
        (lr.Measurement("t4", 1, 2, 32, 1, 0.3, 0.1),),
        (("v100", 1, 2, 3.5),),
        batch_size=256,
        grad_sqr=0.5,
        grad_var=2.0,
        init_batch_size=128,
        max_batch_size=1024,
        local_bsz_bounds=(16, 64),
    )
    assert lr.parse_report(rep.to_json()) == rep
    assert lr.report_of({lr.METRICS: rep.to_json()}) == rep
    assert lr.report_of({}) is None
    for bad, needle in (
        ("nope", "not JSON"),
        ("[]", "JSON object"),
        ('{"profile": [["t4", 2, 1, 32, 0, 0.1, 0.0]]}', "nodes <= replicas"),
        ('{"profile": [["t4", 1, 1, 32, 0, -1, 0.0]]}', "stepTime"),
        ('{"localBszBounds": [8, 4]}', "localBszBounds"),
        ('{"gradVar": "x"}', "gradVar"),
    ):
        with pytest.raises(lr.ReportError, match=needle):
            lr.parse_report(bad)
        assert lr.report_of({lr.METRICS: bad}) is None  # ignored, never fatal


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["t4", "a100", 'é"x']),
            st.integers(1, 4),
            st.integers(4, 8),
            st.integers(1, 512),
            st.integers(0, 3),
            st.floats(1e-6, 1e3),
            st.floats(0.0, 1e-6),
        ),
        max_size=300,
    ),
    st.booleans(),
    st.booleans(),
)
def test_report_json_is_json_dumps_of_the_whole(rows, rates, extra):
    """to_json writes the profile from rows kept per measurement: the text one json.dumps of the
    whole report writes (rows past the newest 256 left out), whatever else the report holds."""
    prof = tuple(lr.Measurement(*r) for r in rows)
    rep = lr.Report(
        prof,
        (("v100", 1, 2, 3.5),) if rates else (),
        **(dict(batch_size=256, grad_sqr=0.5, grad_var=float("inf"), local_bsz_bounds=(16, 64)) if extra else {}),
    )
    whole: dict = {}
    if prof:
        whole["profile"] = [list(r) for r in rows[-256:]]
    if rates:
        whole["rates"] = [["v100", 1, 2, 3.5]]
    if extra:
        whole.update(batchSize=256, gradSqr=0.5, gradVar=float("inf"), localBszBounds=[16, 64])
    assert rep.to_json() == json.dumps(whole, separators=(",", ":"))
    assert rep.to_json() == rep.to_json()  # (the rows kept the first time)


# --------------------------------------------------------------------------- through the simulator
def _replay(policy: str, oracle: bool, **kw):
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    return replay(
        trace_inputs([DATA / "pollux-20.csv"], gpu_cluster(nodes=4), adaptive=True), policy, oracle=oracle, **kw
    )


def _spy(monkeypatch):
    """Record the speed objects the scheduler's elastic plugin hands its policies."""
    import lavaflow.scheduler.elastic.plugin as plugin

    seen: list[type] = []
    real_curve, real_advance = plugin.rate_curve, plugin.advance

    def curve(speed, *a, **k):
        seen.append(type(speed))
        return real_curve(speed, *a, **k)

    def adv(speed, *a, **k):
        seen.append(type(speed))
        return real_advance(speed, *a, **k)

    monkeypatch.setattr(plugin, "rate_curve", curve)
    monkeypatch.setattr(plugin, "advance", adv)
    return seen


def test_policies_read_only_learned_models_by_default(monkeypatch):
    seen = _spy(monkeypatch)
    res = _replay("Goodput", oracle=False)
    assert res.summary()["completed"] == 20 and res.oracle is False
    assert seen and set(seen) == {lr.LearnedSpeed}


def test_the_oracle_hands_policies_the_true_models_and_is_marked(monkeypatch):
    seen = _spy(monkeypatch)
    res = _replay("Goodput", oracle=True)
    assert res.oracle is True and res.summary()["oracle"] is True
    assert seen and lr.LearnedSpeed not in set(seen)


def test_learned_jobs_grow_at_most_to_twice_what_they_were_measured_on():
    """Pollux's rule: an elastic job is never given more than twice the most workers it has been
    measured on (its first start: one worker, or its minimum)."""
    res = _replay("Goodput", oracle=False, shared_profiles=False)
    for j in res.jobs:
        most = 0
        for _t, n, _ty in j.history:
            if n:
                assert n <= max(2 * most, 1) or most == 0, (j.name, j.history)
                most = max(most, n)


def test_shared_jobs_grow_at_most_to_twice_what_their_model_was_measured_on():
    """With profile groups (the trace's application), the bound is the group's: no job is given
    more than twice the most workers any job of its model held before (a size is measured only
    after it has been held), and sharing lets later jobs of a model start beyond one worker."""
    res = _replay("Goodput", oracle=False)
    held: list[tuple[float, str, int]] = sorted((t, j.application, n) for j in res.jobs for t, n, _ty in j.history if n)
    beyond_one = 0
    for j in res.jobs:
        first = next((n for _t, n, _ty in j.history if n), 0)
        beyond_one += first > 1
        for t, n, _ty in j.history:
            if n:
                most = max((m for (u, a, m) in held if a == j.application and u < t), default=0)
                assert n <= max(2 * most, 1), (j.name, t, n, most)
    assert beyond_one > 0


def test_profile_book_keeps_first_measurements_and_snapshots_only_change_with_news():
    book = lr.ProfileBook()
    m4 = lr.Measurement("t4", 1, 4, 32, 0, 0.2, 0.05)
    first = lr.Report((m4,), grad_sqr=1.0, grad_var=2.0, init_batch_size=128)
    book.record("cifar10", first)
    a = book.snapshot("cifar10")
    assert a is not None and a.profile == (m4,) and a.start is first
    # the same configuration measured again (a later step time), other stats: nothing new
    book.record("cifar10", lr.Report((lr.Measurement("t4", 1, 4, 32, 0, 0.3, 0.05),), grad_sqr=5.0, grad_var=5.0))
    assert book.snapshot("cifar10") is a
    m8 = lr.Measurement("t4", 2, 8, 32, 0, 0.4, 0.2)
    book.record("cifar10", lr.Report((m8,)))
    b = book.snapshot("cifar10")
    assert b is not a and set(b.profile) == {m4, m8} and b.start is first
    assert book.snapshot("bert") is None and len(book) == 1
    book.record("bert", None)
    assert book.snapshot("bert") is None


def test_a_new_job_starts_from_what_its_model_measured():
    """A job that has reported nothing learns its group's fit, bound (twice the group's largest
    measured size) and first gradient statistics; without a group it starts from nothing; its own
    measurement of a configuration wins over the group's."""
    book = lr.ProfileBook()
    prof = (lr.Measurement("default", 1, 4, 32, 0, 0.1, 0.02), lr.Measurement("default", 2, 8, 64, 0, 0.2, 0.08))
    other = lr.Report(prof, batch_size=256, grad_sqr=0.5, grad_var=3.0, init_batch_size=128, local_bsz_bounds=(16, 256))
    ann_a = {
        "lavaflow.io/application": "cifar10",
        "lavaflow.io/batch-size": "128",
        "lavaflow.io/adaptive-batch": "true",
    }
    lr.learned_spec({**ann_a, lr.METRICS: other.to_json(), "lavaflow.io/profile-group": "c10"}, book)
    new = lr.learned_spec({**ann_a, "lavaflow.io/profile-group": "c10"}, book).speed
    alone = lr.learned_spec(ann_a, book).speed
    assert alone.max_allowed == 1 and alone.fit("default") is None
    assert new.max_observed == 8 and new.max_allowed == 16 and new.fit("default") is not None
    assert new.report.grad_sqr == 0.5 and new.report.grad_var == 3.0 and new.report.batch_size is None
    assert new.best_batch((4, 4))[0] > 0
    # its own measurement of (1 node, 4 replicas, 32) replaces the group's
    own = lr.Report((lr.Measurement("default", 1, 4, 32, 0, 0.5, 0.02),), grad_sqr=2.0, grad_var=1.0)
    mine = lr.learned_spec({**ann_a, lr.METRICS: own.to_json(), "lavaflow.io/profile-group": "c10"}, book).speed
    steps = {(m.nodes, m.replicas, m.local_bsz): m.step_time for m in mine.report.profile}
    assert steps[(1, 4, 32)] == 0.5 and steps[(2, 8, 64)] == 0.2
    assert mine.report.grad_sqr == 2.0  # its own statistics, not the group's first


def test_pollux_does_not_share_unless_asked_and_sharing_can_be_turned_off():
    """Pollux runs as its artifact does (every job learns alone); the others share by default;
    elastic.sharedProfiles turns it either way (ablations)."""
    from lavaflow.scheduler.elastic.state import elastic_setup

    assert elastic_setup({"elastic.policy": "Pollux"}).shared_profiles is False
    assert elastic_setup({"elastic.policy": "Goodput"}).shared_profiles is True
    assert elastic_setup({"elastic.policy": "Pollux", "elastic.sharedProfiles": True}).shared_profiles is True
    assert elastic_setup({"elastic.policy": "Goodput", "elastic.sharedProfiles": "false"}).shared_profiles is False
    alone = _replay("Goodput", oracle=False, shared_profiles=False)
    for j in alone.jobs:
        assert next((n for _t, n, _ty in j.history if n), 1) == 1, j.history


def test_reports_are_deterministic_and_noise_is_seeded():
    a = _replay("Goodput", oracle=False, report_noise=0.2, seed=1).summary()
    b = _replay("Goodput", oracle=False, report_noise=0.2, seed=1).summary()
    c = _replay("Goodput", oracle=False, report_noise=0.2, seed=2).summary()
    assert a["avg_jct"] == b["avg_jct"]
    assert a["completed"] == c["completed"] == 20


def test_a_job_reports_what_a_real_agent_would(tmp_path):
    """The PodGroup of a running adaptive job carries a parseable report: measured step times on
    the placements it ran, its batch limits and its gradient statistics."""
    from lavaflow.sim.engine import Simulation
    from lavaflow.sim.inputs import prepare
    from lavaflow.sim.replay import trace_inputs

    p = tmp_path / "one.csv"
    p.write_text("name,time,application,num_replicas,batch_size\nj,0,cifar10,2,256\n")
    sim = Simulation(prepare(trace_inputs([p], yaml_files=[DATA / "gpu-16.yaml"], adaptive=True)), until=600)
    sim.run()
    pg = sim.store.list("PodGroup")[0]
    rep = lr.report_of(pg.metadata.annotations)
    assert rep is not None and rep.profile
    m = pollux_app("cifar10")
    assert rep.init_batch_size == m.init_batch_size
    assert rep.local_bsz_bounds == (m.min_local_bsz, m.max_local_bsz)
    assert rep.grad_sqr is not None and rep.grad_var is not None
    assert all(x.step_time > 0 and 0 <= x.sync_time <= x.step_time for x in rep.profile)


# --------------------------------------------------------------------------- the command line
cli = simulate_cli


def test_cli_marks_the_oracle_in_table_and_json():
    trace = str(DATA / "pollux-20.csv")
    p = cli(trace, str(DATA / "gpu-16.yaml"), "--policy", "Goodput", "--oracle", "--output", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["elastic"]["summary"]["oracle"] is True
    p = cli(trace, str(DATA / "gpu-16.yaml"), "--policy", "Goodput")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = next(line for line in lines if line.startswith("policy") and "reads work" in line)
    row = next(line for line in lines if line.startswith("Goodput"))
    cols = header.replace("reads work", "reads-work").split()
    assert cols[:4] == ["policy", "reads-work", "oracle", "shares"] and row.split()[1:4] == ["no", "no", "yes"]
    p = cli(trace, str(DATA / "gpu-16.yaml"), "--policy", "Pollux", "--output", "json")
    assert json.loads(p.stdout)["elastic"]["summary"]["shared_profiles"] is False  # (as its artifact)
    p = cli(trace, str(DATA / "gpu-16.yaml"), "--policy", "Pollux", "--shared-profiles", "--output", "json")
    assert json.loads(p.stdout)["elastic"]["summary"]["shared_profiles"] is True


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--report-period", "0s"], "--report-period: must be longer than 0s"),
        (["--report-period", "soon"], "--report-period:"),
        (["--report-noise", "-1"], "--report-noise: must be between 0 and 10"),
    ],
)
def test_cli_refuses_bad_report_settings(args, needle):
    p = cli(str(DATA / "pollux-20.csv"), *args)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert needle in p.stderr


def test_oracle_argument_is_checked_with_the_configuration(tmp_path):
    from lavaflow.scheduler.framework.conf import SchedulerConfError, load_scheduler_conf

    bad = """
actions: "enqueue, elastic, allocate"
tiers:
- plugins:
  - name: gang
  - name: elastic
    arguments:
      elastic.oracle: maybe
"""
    with pytest.raises(SchedulerConfError) as exc:
        load_scheduler_conf(bad)
    assert any("elastic.oracle" in p and "true or false" in m for p, m in exc.value.problems), exc.value.problems
    with pytest.raises(SchedulerConfError) as exc:
        load_scheduler_conf(bad.replace("elastic.oracle", "elastic.sharedProfiles"))
    assert any("elastic.sharedProfiles" in p and "true or false" in m for p, m in exc.value.problems)


def test_cli_shared_profiles_flag_needs_elastic_scheduling(tmp_path):
    conf = tmp_path / "plain.yaml"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    p = cli(str(DATA / "pollux-20.csv"), "--config", str(conf), "--no-shared-profiles")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "--no-shared-profiles" in p.stderr and "does not enable elastic scheduling" in p.stderr


@settings(max_examples=60, deadline=None)
@given(
    adaptive=st.booleans(),
    stats=st.sampled_from([(0.01, 10.0), (10.0, 0.01), (1.0, 1.0), None]),
    own=st.sampled_from([64, 128, 256, 1000]),
    per_node=st.sampled_from([1, 4, 8]),
    bounds=st.sampled_from([(8, 32), (16, 64), (1, 512)]),
)
def test_whole_curve_equals_rates_one_by_one(adaptive, stats, own, per_node, bounds):
    """The vectorised curve the policies read gives exactly the rates of each placement."""
    from lavaflow.elastic.speed import consolidated_placement, rate_curve

    prof = (
        lr.Measurement("default", 1, 4, 32, 0, 0.1, 0.02),
        lr.Measurement("default", 2, 8, 64, 1, 0.2, 0.08),
        lr.Measurement("default", 1, 2, 16, 0, 0.05, 0.01),
    )
    sqr, var = stats if stats is not None else (None, None)
    rep = lr.Report(prof, grad_sqr=sqr, grad_var=var, init_batch_size=64, max_batch_size=4096, local_bsz_bounds=bounds)
    whole = rate_curve(lr.LearnedSpeed(rep, own, adaptive=adaptive), "default", 40, per_node)
    one = lr.LearnedSpeed(rep, own, adaptive=adaptive)
    assert whole == tuple(
        0.0 if n == 0 else one.rate(consolidated_placement(n, per_node), "default") for n in range(41)
    )


def test_a_gavel_trace_runs_on_the_default_untyped_cluster(tmp_path):
    """Issue 35, item 4: untyped nodes are named "default" by the plugin and the simulator; a Gavel
    model's run times are given on V100s, so that is the type an untyped node stands for (it used
    to end in KeyError: 'default')."""
    trace = tmp_path / "gavel.csv"
    trace.write_text(
        "name,time,model,num_replicas,duration\n"
        "j1,0,ResNet-50 (batch size 64),2,600\n"
        "j2,10,ResNet-50 (batch size 64),1,300\n"
    )
    for extra in ([], ["--oracle"]):
        p = cli(str(trace), "--policy", "Goodput", "--output", "json", *extra)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert json.loads(p.stdout)["elastic"]["summary"]["completed"] == 2


def test_goodput_looks_again_while_gpus_stand_idle(tmp_path):
    """A learned model moves as the job reports (an adaptive job's gradient noise grows as it
    trains, and with it the workers it can use). Alone on an idle cluster nothing else happens:
    without rounds while GPUs stand idle, a cifar10 job sized on its first statistics keeps 4 of
    64 GPUs to the end; with them (Goodput on learned models) it is asked again and grows."""
    from lavaflow.elastic.policies import make_policy
    from lavaflow.elastic.policies.goodput import IDLE_ROUNDS
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    f = tmp_path / "one.csv"
    f.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,6,2048\n")

    def run(**params):
        return replay(trace_inputs([f], gpu_cluster(nodes=16), adaptive=True), "Goodput", params=params)

    rounds, still = run(), run(idle_rounds=0)
    assert max(n for _t, n, _ty in still.jobs[0].history) == 4
    assert max(n for _t, n, _ty in rounds.jobs[0].history) > 8
    assert rounds.jobs[0].jct < 0.8 * still.jobs[0].jct
    assert rounds.reschedules > still.reschedules
    # the oracle's models do not move: no such rounds there, nor for the periodic Pollux
    assert make_policy("Goodput", learned=True).idle_rounds == IDLE_ROUNDS > 0
    assert make_policy("Goodput").idle_rounds == 0 and make_policy("Pollux", learned=True).idle_rounds == 0


@pytest.mark.parametrize("policy", ["Tiresias-Voda", "FIFO"])
def test_reports_are_no_news_to_a_policy_that_reads_neither_speed_nor_sizes(policy):
    """Voda reschedules on arrivals, completions, priority changes and node changes, never on a
    job's measurements. A policy that neither sizes jobs nor reads their speed decides the same
    with learned models as with the true ones: a report that a job ran on more workers is not a
    reason for a round of its own (it was, and Tiresias-Voda's rounds moved with the reports)."""
    from lavaflow.sim.replay import gpu_cluster, replay, trace_inputs

    def run(oracle: bool):
        return replay(trace_inputs([DATA / "pollux-20.csv"], gpu_cluster(nodes=4)), policy, oracle=oracle)

    learned, true = run(False), run(True)
    assert learned.reschedules == true.reschedules
    assert [(j.name, j.halts) for j in learned.jobs] == [(j.name, j.halts) for j in true.jobs]
    for a, b in zip(learned.jobs, true.jobs):  # (the same to the last bits or so: sums in another order)
        assert (a.start, a.finish) == pytest.approx((b.start, b.finish), rel=1e-12), a.name
