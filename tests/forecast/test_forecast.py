"""The forecast library: exact starts behind annotated gangs, sources, seeded ranges, no oracle."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, node_group
from lavaflow.api.loader import load_text
from lavaflow.forecast import RunTimeHistory, forecast
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare


def vcjob(name: str, replicas: int, cpu: str, duration: str | None = None, submit: str | None = None, **kw) -> str:
    """A Volcano Job document: one task, a gang of all its pods."""
    ann = {}
    if duration is not None:
        ann["sim.lavaflow.io/duration"] = duration
    meta: dict = {"name": name}
    if submit is not None:
        meta["annotations"] = {"sim.lavaflow.io/submit-at": submit}
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "minAvailable": replicas,
            "queue": kw.get("queue", "default"),
            **({"priorityClassName": kw["priority"]} if "priority" in kw else {}),
            "tasks": [
                {
                    "name": "t",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": ann},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                    },
                }
            ],
        },
    }
    return "---\n" + json.dumps(doc) + "\n"


def run_to(text: str, at: float, sim_cls: type[Simulation] = Simulation, **kw) -> Simulation:
    sim = sim_cls(prepare(load_text(text)), until=at, **kw)
    sim.run()
    return sim


def fc_of(sim: Simulation, **kw):
    return forecast(sim.store, sim.scheduler.conf, sim.now, **kw)


GANGS = node_group(count=2, cpu="4") + vcjob("a", 2, "3", "100s") + vcjob("b", 2, "3", "50s")


def test_a_job_behind_a_running_gang_starts_when_the_gang_ends():
    sim = run_to(GANGS, 30)
    fc = fc_of(sim)
    a, b = fc.jobs["default/a"], fc.jobs["default/b"]
    # a's pods were bound at 1 s (the first cycle admits its PodGroup, the second binds)
    assert a.running and a.source == "annotation" and (a.start, a.finish) == (1.0, 101.0)
    assert not b.running and b.source == "annotation"
    # exact: the gang's pods end at 101 s, the cycle at that instant admits b's PodGroup (its
    # pods are created then) and the next one, a period later, binds them
    assert (b.start, b.start_low, b.start_high) == (102.0, 102.0, 102.0)
    assert b.finish == 152.0
    truth = {j["name"]: j for j in Simulation(prepare(load_text(GANGS))).run()["jobs"]}
    assert truth["b"]["startTime"] == b.start and truth["b"]["finishTime"] == b.finish


def test_the_forecast_does_not_change_the_snapshot():
    sim = run_to(GANGS, 30)
    before = {p.key: (p.status.phase, p.spec.node_name) for p in sim.store.list("Pod")}
    fc_of(sim)
    assert {p.key: (p.status.phase, p.spec.node_name) for p in sim.store.list("Pod")} == before
    assert sim.now == 30


class TrueDurationTripled(Simulation):
    """The simulator's truth differs from what the pods' annotations say (a job that overruns)."""

    def _duration_of(self, pod):
        return 3 * super()._duration_of(pod)


def test_no_oracle_the_true_duration_does_not_move_the_forecast():
    honest = fc_of(run_to(GANGS, 30))
    overrun = fc_of(run_to(GANGS, 30, TrueDurationTripled))
    assert overrun.jobs == honest.jobs  # only what is observable at 30 s counts
    assert overrun.jobs["default/b"].start == 102.0


def test_no_oracle_the_default_duration_is_not_read():
    text = node_group(count=1, cpu="4") + vcjob("a", 1, "3") + vcjob("b", 1, "3")
    short = fc_of(run_to(text, 30, default_duration=60))
    long = fc_of(run_to(text, 30, default_duration=6000))
    assert short.jobs == long.jobs
    a, b = short.jobs["default/a"], short.jobs["default/b"]
    assert a.source == "unknown" and a.finish is None and "no duration annotation" in (a.reason or "")
    assert b.start is None and "default/a" in (b.reason or "")


def test_no_oracle_future_arrivals_are_not_seen():
    text = GANGS + vcjob("later", 2, "3", "10s", submit="60s", priority="high") + PRIORITY
    fc = fc_of(run_to(text, 30))
    assert "default/later" not in fc.jobs
    assert fc.jobs["default/b"].start == 102.0


PRIORITY = "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"


def history_input() -> str:
    """Three unannotated jobs finished in queue default (40, 80, 120 s by the default duration of
    the run), then a job running and one waiting behind it."""
    docs = node_group(count=1, cpu="4")
    for i, (d, at) in enumerate([(40, 0), (80, 50), (120, 140)]):
        docs += vcjob(f"done{i}", 1, "3", f"{d}s", submit=f"{at}s")
    docs += vcjob("run", 1, "3", submit="300s") + vcjob("wait", 1, "3", submit="301s")
    return docs


def test_history_source_and_seeded_ranges():
    # the finished jobs' pods were annotated; the running and waiting ones are not
    sim = run_to(history_input(), 320, default_duration=90)
    hist = RunTimeHistory.from_objects({k: sim.store.list(k) for k in ("Job", "Pod")})
    assert sorted(hist.run_times("default")) == [40.0, 80.0, 120.0]
    fc = fc_of(sim, seed=1)
    run, wait = fc.jobs["default/run"], fc.jobs["default/wait"]
    assert run.source == wait.source == "history"
    # running since 301 s, 19 s so far: every past run time is longer; the median is 80 s
    assert run.start == 301.0 and run.finish == 381.0
    assert wait.start == 382.0 and wait.finish == 462.0  # admitted at 381 s, bound at 382 s
    assert run.finish_low == 341.0 and run.finish_high == 421.0
    assert wait.start_low is not None and wait.start_low <= wait.start <= (wait.start_high or 0)
    assert fc.runs == 9
    again = fc_of(sim, seed=1)
    assert again.jobs == fc.jobs  # deterministic for a seed


def test_history_longer_than_elapsed_only():
    sim = run_to(history_input(), 400, default_duration=1000)  # "run" has run 99 s
    run = fc_of(sim).jobs["default/run"]
    assert run.source == "history" and run.finish == 301.0 + 120.0  # only 120 s is longer than 99 s


def test_runtime_source_replaces_the_snapshot_history():
    sim = run_to(history_input(), 320, default_duration=90)
    mine = RunTimeHistory({"default": [1000.0]})
    fc = fc_of(sim, runtime_source=mine)
    assert fc.jobs["default/run"].finish == 1301.0 and fc.jobs["default/wait"].start == 1302.0
    assert fc.runs == 1  # one run time known: nothing to sample


def test_progress_source_for_an_elastic_job():
    from lavaflow.cli.main import _load

    sim_input, conf = _load([EXAMPLES / "elastic-pytorch.yaml"], None)
    sim = Simulation(sim_input, conf=conf, until=700)
    sim.run()
    fc = fc_of(sim)
    running = fc.jobs["default/resnet50-elastic"]
    assert running.running and running.source == "progress" and running.finish is not None
    assert "progress" in fc.details["default/resnet50-elastic"]
    waiting = fc.jobs["default/cifar10-elastic"]
    assert not waiting.running and waiting.start == running.finish  # it gets the GPUs then
    # its learned speed may be off: the sampled runs scale it (log-normal), and the range follows
    assert fc.runs == 9
    assert running.finish_low is not None and running.finish_high is not None
    assert running.finish_low < running.finish < running.finish_high
    assert waiting.start_low == running.finish_low and waiting.start_high == running.finish_high


@pytest.mark.parametrize(
    "example,at", [("spark-wordcount.yaml", 30), ("network-topology.yaml", 700), ("numa-aware.yaml", 100)]
)
def test_fully_annotated_examples_are_exact(example, at):
    from lavaflow.cli.main import _load

    sim_input, conf = _load([EXAMPLES / example], None)
    sim = Simulation(sim_input, conf=conf, until=at)
    sim.run()
    fc = fc_of(sim)
    sim_input, conf = _load([EXAMPLES / example], None)
    truth = {f"{j['namespace']}/{j['name']}": j for j in Simulation(sim_input, conf=conf).run()["jobs"]}
    pending = [k for k, j in fc.jobs.items() if not j.running]
    assert pending
    for key in pending:
        assert fc.jobs[key].source == "annotation"
        assert fc.jobs[key].start == truth[key]["startTime"], key


def test_history_of_the_same_profile_group_first():
    hist = RunTimeHistory()
    for t in (10.0, 20.0, 30.0):
        hist.add("q", t, "cifar10")
    hist.add("q", 5000.0, "imagenet")
    assert list(hist.run_times("q", "cifar10")) == [10.0, 20.0, 30.0]
    assert sorted(hist.run_times("q", "imagenet")) == [10.0, 20.0, 30.0, 5000.0]  # fewer than 3: the queue's
    assert sorted(hist.run_times("q")) == [10.0, 20.0, 30.0, 5000.0]
    assert sorted(hist.run_times("other")) == [10.0, 20.0, 30.0, 5000.0]  # a queue without history: all


def test_a_pending_job_of_a_profile_group_takes_its_groups_run_times():
    docs = node_group(count=1, cpu="4")
    at = 0
    for i, d in enumerate([10, 12, 14, 500]):
        docs += grouped(vcjob(f"done{i}", 1, "3", f"{d}s", submit=f"{at}s"), "small" if d < 100 else "big")
        at += d + 5
    docs += vcjob("run", 1, "3", "100s", submit=f"{at}s") + grouped(vcjob("wait", 1, "3", submit=f"{at}s"), "small")
    sim = run_to(docs, at + 10)
    fc = fc_of(sim)
    wait = fc.jobs["default/wait"]
    assert wait.source == "history" and "profile group small" in fc.details["default/wait"]
    assert (
        wait.finish is not None and wait.start is not None and wait.finish - wait.start == 12.0
    )  # median of 10, 12, 14


def grouped(doc: str, group: str) -> str:
    d = json.loads(doc.removeprefix("---\n"))
    d["metadata"].setdefault("annotations", {})["lavaflow.io/profile-group"] = group
    return "---\n" + json.dumps(d) + "\n"


def test_a_snapshot_as_objects_by_kind_or_a_list_gives_the_same_forecast():
    sim = run_to(GANGS, 30)
    by_store = fc_of(sim)
    kinds = {k: sim.store.list(k) for k in ("Node", "Queue", "PodGroup", "Pod", "Job")}
    assert forecast(kinds, sim.scheduler.conf, sim.now).jobs == by_store.jobs
    flat = [o for objs in kinds.values() for o in objs]
    assert forecast(flat, None, sim.now).jobs == by_store.jobs  # (the default configuration here)


def test_a_bound_pod_its_kubelet_has_not_started_yet_runs_from_now():
    import copy

    sim = run_to(GANGS, 30)
    kinds = {k: copy.deepcopy(sim.store.list(k)) for k in ("Node", "Queue", "PodGroup", "Pod", "Job")}
    for pod in kinds["Pod"]:
        if pod.spec.node_name:
            pod.status.phase, pod.status.start_time = "Pending", None
    fc = forecast(kinds, sim.scheduler.conf, sim.now)
    a, b = fc.jobs["default/a"], fc.jobs["default/b"]
    assert a.running and (a.start, a.finish) == (30.0, 130.0)
    assert b.start == 131.0
