"""A replay in which nothing can progress any more ends, reporting its waiting jobs (and Sia
replays Pollux-trace jobs whose minimum lies off its menu of configurations).

An elastic policy that re-optimises every round asks for its next round in every session; when it
left every waiting job waiting on an idle cluster, those rounds were all that was left to happen,
and a replay without ``--until`` ran them for ever (Sia on Pollux workload 7: more than 15 minutes
of CPU). Such cycles now count towards the stall limit as cycles with nothing pending do."""

from __future__ import annotations

from lavaflow.scheduler.elastic.state import elastic_option
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.sim import engine
from lavaflow.sim.inputs import prepare
from lavaflow.sim.replay import gpu_cluster, trace_inputs

DAY = 86400.0


def _simulate(tmp_path, rows: list[str], policy: str, until: float, **params: object) -> tuple[engine.Simulation, dict]:
    trace = tmp_path / "w.csv"
    trace.write_text("\n".join(["name,time,application,num_replicas,batch_size", *rows]) + "\n")
    conf = load_scheduler_conf()
    opt = elastic_option(conf)
    assert opt is not None
    opt.arguments.update({"elastic.policy": policy, **{f"elastic.policy.{k}": v for k, v in params.items()}})
    sim = engine.Simulation(
        prepare(trace_inputs([trace], cluster=gpu_cluster(nodes=2, gpus_per_node=4))), conf=conf, until=until
    )
    return sim, sim.run()


def test_rounds_that_start_nothing_on_an_idle_cluster_end_as_a_stall(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "MAX_IDLE_CYCLES", 50)
    # lambda_n 0.5: no configuration is worth running (a 1-GPU one is worth 1), so Sia never
    # starts the job, round after round
    sim, res = _simulate(tmp_path, ["cifar10-0,0,cifar10,2,256"], "Sia", until=DAY, lambda_n=0.5)
    assert sim.stall_time is not None and sim.stall_time < DAY / 4  # ~51 one-minute rounds
    assert res["stalled"] is True
    (stuck,) = res["stuck"]
    assert stuck["name"].startswith("cifar10-0")
    assert "the elastic policy Sia has not started it" in stuck["reason"]


def test_jobs_still_training_are_not_a_stall(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "MAX_IDLE_CYCLES", 5)
    sim, _ = _simulate(tmp_path, ["cifar10-0,0,cifar10,2,256"], "Sia", until=DAY)
    assert sim.training.result("Sia", 0.0).summary()["completed"] == 1


def test_sia_starts_a_pollux_trace_job_whose_minimum_is_off_its_menu(tmp_path):
    # 6 GPUs asked: minimum 3, and 3 at most before the job has been measured; Sia's menu on
    # 4-GPU nodes is 1, 2, 4, 8 (it used to leave the job waiting for ever)
    sim, _ = _simulate(tmp_path, ["cifar10-0,0,cifar10,6,2048"], "Sia", until=DAY)
    assert sim.training.result("Sia", 0.0).summary()["completed"] == 1
