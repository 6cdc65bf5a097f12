"""Quiet sessions (issue 31, speed): a cycle over a cluster no event has changed since the last
session, which decided nothing, is answered without a session (Scheduler.run_once). The output
must be the very one a session per cycle gives: the elastic accounting, the Tiresias queues, the
wakes and the decision history of the --explain output included."""

from __future__ import annotations

from typing import Any

import pytest

from lavaflow import jsonout
from lavaflow.elastic.data_paths import PACKAGE_DATA
from lavaflow.sim import engine
from lavaflow.sim.replay import replay, trace_inputs
from lavaflow.sim.traces import default_cluster


@pytest.mark.parametrize(("policy", "adaptive"), [("ElasticTiresias", False), ("Goodput", True)])
def test_quiet_sessions_give_the_output_of_a_session_per_cycle(tmp_path, monkeypatch, policy, adaptive):
    rows = (PACKAGE_DATA / "pollux" / "workloads" / "workload-1.csv").read_text().splitlines()[:41]
    trace = tmp_path / "w.csv"
    trace.write_text("\n".join(rows) + "\n")
    loaded = trace_inputs([trace], cluster=[default_cluster()], adaptive=adaptive)
    run = engine.Simulation.run
    outputs: dict[bool, str] = {}
    skipped: dict[bool, int] = {}

    for quiet in (False, True):

        def recorded(self: engine.Simulation, *args: Any, quiet: bool = quiet) -> dict[str, Any]:
            self.scheduler.quiet_sessions = quiet
            out = run(self, *args)
            outputs[quiet] = jsonout.dumps(out)
            skipped[quiet] = self.scheduler.quiet_skipped
            return out

        monkeypatch.setattr(engine.Simulation, "run", recorded)
        replay(loaded, policy)
    assert skipped[False] == 0 and skipped[True] > 0
    assert outputs[True] == outputs[False]
