"""The differential harness against Volcano itself (benchmarks/volcano_diff.py, issue 34).

The comparison and the scenario loading are tested here on made-up runs, always. The harness
itself plays a scenario under Volcano's vc-scheduler / vc-controller-manager and under lavaflow
on a real API server only when LAVAFLOW_TEST_KUBECONFIG names a kubeconfig of a disposable
server (the harness deletes every Node, Queue and HyperNode on it) and
LAVAFLOW_TEST_VOLCANO_BIN a directory holding the two Volcano binaries; skipped otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BENCHMARKS = str(ROOT / "benchmarks")
sys.path.insert(0, _BENCHMARKS)
import volcano_diff as vd  # noqa: E402

# (benchmarks/ has an invariants.py of its own: left on the path, it would shadow tests/invariants.py
# for the tests collected after this one)
while _BENCHMARKS in sys.path:
    sys.path.remove(_BENCHMARKS)

KUBECONFIG = os.environ.get("LAVAFLOW_TEST_KUBECONFIG")
VOLCANO_BIN = os.environ.get("LAVAFLOW_TEST_VOLCANO_BIN")
CLASSES = {"a-0": "a", "a-1": "a", "b-0": "b"}


def run_of(binds=(), evictions=(), jobs=None, pgs=None, conditions=None, retries=None, final=None):
    return {
        "binds": [{"t": t, "pod": p, "node": n, "gang": g, "task": task} for t, p, n, g, task in binds],
        "evictions": [{"t": t, "pod": p, "node": "", "gang": g, "task": task} for t, p, g, task in evictions],
        "pg_phases": pgs or {},
        "pg_conditions": conditions or {},
        "job_phases": jobs or {},
        "job_retries": retries or {},
        "pods_final": final or {},
    }


def test_same_runs_agree():
    r = run_of(
        binds=[(10, "ns/j-w-0", "a-0", "ns/j", "w"), (10, "ns/j-w-1", "a-1", "ns/j", "w")],
        jobs={"ns/j": [(0, "Pending"), (10, "Running"), (70, "Completed")]},
        pgs={"ns/j": [(0, "Pending"), (5, "Inqueue"), (10, "Running")]},
        final={"ns/j w": {"Succeeded": 2}},
    )
    assert vd.compare(r, json.loads(json.dumps(r)), 10, CLASSES) == []


def test_ties_between_equal_nodes_agree_but_other_kinds_of_node_do_not():
    a = run_of(binds=[(10, "ns/j-w-0", "a-0", "ns/j", "w"), (10, "ns/j-w-1", "a-0", "ns/j", "w")])
    same_kind = run_of(binds=[(11, "ns/j-w-0", "a-1", "ns/j", "w"), (11, "ns/j-w-1", "a-1", "ns/j", "w")])
    assert vd.compare(a, same_kind, 10, CLASSES) == []
    spread = run_of(binds=[(10, "ns/j-w-0", "a-0", "ns/j", "w"), (10, "ns/j-w-1", "a-1", "ns/j", "w")])
    other = run_of(binds=[(10, "ns/j-w-0", "b-0", "ns/j", "w"), (10, "ns/j-w-1", "b-0", "ns/j", "w")])
    assert any("bindings of ns/j, wave 1" in d for d in vd.compare(a, spread, 10, CLASSES))
    assert any("bindings of ns/j, wave 1" in d for d in vd.compare(a, other, 10, CLASSES))


def test_times_agree_within_two_periods_only():
    a = run_of(binds=[(10, "ns/p", "a-0", "ns/pod:p", "")], jobs={"ns/j": [(0, "Pending"), (10, "Running")]})
    near = run_of(binds=[(29, "ns/p", "a-0", "ns/pod:p", "")], jobs={"ns/j": [(0, "Pending"), (29, "Running")]})
    far = run_of(binds=[(31, "ns/p", "a-0", "ns/pod:p", "")], jobs={"ns/j": [(0, "Pending"), (31, "Running")]})
    assert vd.compare(a, near, 10, CLASSES) == []
    diffs = vd.compare(a, far, 10, CLASSES)
    assert any("bindings of ns/pod:p, wave 1: at 10 s" in d for d in diffs)
    assert any(d.startswith("Job ns/j phases:") and "Running (31)" in d for d in diffs)


def test_phase_orders_retries_evictions_and_outcomes_are_compared():
    a = run_of(
        jobs={"ns/j": [(0, "Pending"), (10, "Running"), (60, "Completed")]},
        retries={"ns/j": 0},
        evictions=[(30, "ns/v-0", "ns/v", "t"), (30, "ns/v-1", "ns/v", "t")],
        final={"ns/j t": {"Succeeded": 3}},
        conditions={"ns/j": [["Scheduled", "True", "tasks in gang are ready to be scheduled"]]},
    )
    b = run_of(
        jobs={"ns/j": [(0, "Pending"), (10, "Running"), (60, "Failed")]},
        retries={"ns/j": 1},
        evictions=[(30, "ns/v-0", "ns/v", "t")],
        final={"ns/j t": {"Succeeded": 2, "Failed": 1}},
        conditions={"ns/j": []},
    )
    diffs = vd.compare(a, b, 10, CLASSES, names=("volcano", "lavaflow"))
    assert (
        "Job ns/j phases: volcano Pending (0) → Running (10) → Completed (60); "
        "lavaflow Pending (0) → Running (10) → Failed (60)"
    ) in diffs
    assert "Job ns/j retryCount: volcano 0; lavaflow 1" in diffs
    assert any(d.startswith("evictions of ns/v, wave 1: volcano [[('t', 2)]]") for d in diffs)
    assert any(d.startswith("pods of ns/j t at the end:") for d in diffs)
    assert any(d.startswith("PodGroup ns/j conditions:") for d in diffs)


def test_a_phase_held_for_less_than_two_periods_may_be_missing_from_the_other_run():
    h = [(0, "Pending"), (10, "Running"), (60, "Completing"), (60.3, "Completed")]
    without = [(0, "Pending"), (12, "Running"), (61, "Completed")]
    assert vd.aligned(h, without, 20)
    # held for 30 s (more than two periods of 10 s): its absence is a difference
    long = [(0, "Pending"), (10, "Running"), (60, "Completing"), (90, "Completed")]
    assert not vd.aligned(long, without, 20)
    # the same phases, one of them too late
    assert not vd.aligned([(0, "Pending"), (10, "Running")], [(0, "Pending"), (31, "Running")], 20)
    # a PodGroup restarted before it showed Running in one run, after in the other
    volcano = [(0.5, "Pending"), (1.1, "Inqueue"), (22.0, "(deleted)"), (22.1, "Pending"), (23.4, "Inqueue"),
               (65.3, "Running"), (95.3, "(deleted)")]  # fmt: skip
    lavaflow = [(1.0, "Pending"), (10.0, "Inqueue"), (20.5, "Running"), (22.6, "(deleted)"), (23.1, "Pending"),
                (30.0, "Inqueue"), (60.3, "Running"), (101.6, "(deleted)")]  # fmt: skip
    assert vd.aligned(volcano, lavaflow, 20)


def test_a_short_interruption_and_the_return_to_the_phase_before_it_may_be_missing():
    # random seed 5: Volcano's PodGroup went Pending for a period while a failed node's pods were
    # made again, and Completed for a period before a deleted pod's replacement ran; lavaflow
    # bound the replacements in the cycle that saw the deletions and stayed Running
    volcano = [(11.2, "Pending"), (20.4, "Inqueue"), (40.8, "Running"), (71.6, "Pending"), (82.1, "Running"),
               (122.6, "Completed"), (132.7, "Running"), (169.2, "(deleted)")]  # fmt: skip
    lavaflow = [(11.2, "Pending"), (17.6, "Inqueue"), (28.2, "Running"), (164.0, "(deleted)")]
    assert vd.aligned(volcano, lavaflow, 20)
    assert vd.aligned(lavaflow, volcano, 20)
    # held for longer than two periods, the interruption is a difference
    long = [*volcano[:3], (71.6, "Pending"), (95.0, "Running"), (169.2, "(deleted)")]
    assert not vd.aligned(long, lavaflow, 20)
    # and a return to a phase other than the last one both showed is not one
    other = [*volcano[:3], (71.6, "Pending"), (80.0, "Completed"), (169.2, "(deleted)")]
    assert not vd.aligned(other, lavaflow, 20)


def test_podgroup_deletion_is_a_phase_of_its_own():
    jobs = {"ns/j": [(0, "Pending"), (10, "Running"), (60, "Completed")]}
    kept = run_of(jobs=jobs, pgs={"ns/j": [(0, "Pending"), (10, "Running")]})
    deleted = run_of(jobs=jobs, pgs={"ns/j": [(0, "Pending"), (10, "Running"), (61, "(deleted)")]})
    assert vd.compare(kept, deleted, 10, CLASSES, names=("volcano", "lavaflow")) == [
        "PodGroup ns/j phases: volcano Pending (0) → Running (10); lavaflow Pending (0) → Running (10) → (deleted) (61)"
    ]


def test_a_pod_deleted_as_its_duration_ends_counts_as_ended():
    rec = vd.Recorder(client=None, scale=1.0)
    rec.pods = {
        "ns/j-w-0": {"phase": "Running", "group": "", "task": "w", "uid": "u0", "deleted": True},
        "ns/j-w-1": {"phase": "Running", "group": "", "task": "w", "uid": "u1", "deleted": True},
    }
    rec.lives = {
        "u0": {"running_at": 10.0, "deleted_at": 69.0, "duration": 60.0, "code": 0},
        "u1": {"running_at": 10.0, "deleted_at": 40.0, "duration": 60.0, "code": 0},
    }
    assert rec.result(tie=2.0)["pods_final"] == {"ns/pod:j-w-0 w": {"Succeeded": 1}, "ns/pod:j-w-1 w": {"Deleted": 1}}


def test_scenarios_volcano_cannot_play_are_skipped_with_the_reason():
    with pytest.raises(vd.Skip, match="scheduler-plugins' PodGroup is not Volcano's API"):
        vd.load_scenario([str(ROOT / "examples" / "coscheduling-podgroup.yaml")])
    with pytest.raises(vd.Skip, match="elastic training job"):
        vd.load_scenario([str(ROOT / "examples" / "elastic-pytorch.yaml")])
    with pytest.raises(vd.Skip, match="no workload"):
        vd.load_scenario([str(ROOT / "examples" / "gpu-cluster-sia.yaml")])


def test_a_scenario_is_read_as_the_simulator_reads_it():
    sc = vd.load_scenario([str(ROOT / "examples" / "lifecycle-node-failure.yaml")])
    assert [n["metadata"]["name"] for n in sc.nodes] == ["rack-a-0", "rack-b-0"]
    assert sc.node_class == {"rack-a-0": "rack-a", "rack-b-0": "rack-b"}
    assert sc.faults == [(20.0, "rack-a-0", True), (50.0, "rack-a-0", False)]
    assert [q["metadata"]["name"] for q in sc.cluster if q["kind"] == "Queue"] == ["root", "default"]
    job = next(w.doc for w in sc.workload if w.doc["metadata"]["name"] == "train")
    assert job["spec"]["queue"] == "default"  # defaulted as Volcano's webhook does


def test_bad_input_is_refused_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec:\n  minAvailable: 3\n"
        "  tasks: [{name: t, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}]\n"
    )
    args = [str(bad), "--kubeconfig", str(bad), "--volcano-bin", str(tmp_path)]
    for b in ("vc-scheduler", "vc-controller-manager"):
        (tmp_path / b).write_text("#!/bin/sh\n")
        (tmp_path / b).chmod(0o755)
    assert asyncio.run(vd.main(args)) == 2
    err = capsys.readouterr().err
    assert f"error: {bad}: document 1: Job/j: spec.minAvailable: minAvailable (3) is greater than" in err
    assert "Traceback" not in err


def test_missing_kubeconfig_or_binaries_skip_with_the_reason(tmp_path, capsys):
    assert asyncio.run(vd.main([str(ROOT / "examples" / "mpi-hello.yaml"), "--kubeconfig", str(tmp_path / "no")])) == 2
    assert "skipped: no kubeconfig" in capsys.readouterr().err
    kc = tmp_path / "kc"
    kc.write_text("")
    assert (
        asyncio.run(
            vd.main(
                [str(ROOT / "examples" / "mpi-hello.yaml"), "--kubeconfig", str(kc), "--volcano-bin", str(tmp_path)]
            )
        )
        == 2
    )
    assert "vc-scheduler is missing or not executable" in capsys.readouterr().err
    for b in ("vc-scheduler", "vc-controller-manager"):
        (tmp_path / b).write_text("")
        (tmp_path / b).chmod(0o755)
    argv = [str(ROOT / "examples" / "mpi-hello.yaml"), "--kubeconfig", str(kc), "--volcano-bin", str(tmp_path)]
    assert asyncio.run(vd.main([*argv, "--kube-controller-manager", str(tmp_path / "kcm")])) == 2
    assert "kcm is missing or not executable" in capsys.readouterr().err


@pytest.mark.skipif(
    not (KUBECONFIG and VOLCANO_BIN),
    reason="set LAVAFLOW_TEST_KUBECONFIG (a disposable kube-apiserver with Volcano's CRDs) and "
    "LAVAFLOW_TEST_VOLCANO_BIN (a directory with vc-scheduler and vc-controller-manager) to run Volcano beside lavaflow",
)
def test_volcano_and_lavaflow_agree_on_an_example(tmp_path):
    out = tmp_path / "r.jsonl"
    code = asyncio.run(
        vd.main([str(ROOT / "examples" / "tensorflow-benchmark.yaml"), "--json", str(out), "--quiet", "6"])
    )
    r = json.loads(out.read_text().splitlines()[0])
    assert r["differences"] == [], r["differences"]
    assert code == 0
    for system in ("volcano", "lavaflow"):
        assert r["runs"][system]["binds"], f"{system} bound nothing"


def test_an_enqueue_refusal_explained_in_a_condition_is_the_one_deliberate_difference():
    scheduled = ["Scheduled", "True", "tasks in gang are ready to be scheduled"]
    waited = ["Unschedulable", "True", "NotEnoughResources"]
    volcano = run_of(conditions={"ns/j": [scheduled]})
    lavaflow = run_of(conditions={"ns/j": [scheduled, waited]})
    lavaflow["pg_condition_phases"] = {"ns/j": {"/".join(waited): "Pending", "/".join(scheduled): "Inqueue"}}
    (diff,) = vd.compare(volcano, lavaflow, 10, CLASSES)
    assert diff.startswith(vd.DELIBERATE)
    assert vd._verdict([diff]) == "agree (deliberate differences)"
    # the same condition written once the gang was admitted (Inqueue): allocate failed, a real difference
    lavaflow["pg_condition_phases"]["ns/j"]["/".join(waited)] = "Inqueue"
    (diff,) = vd.compare(volcano, lavaflow, 10, CLASSES)
    assert not diff.startswith(vd.DELIBERATE)
    assert vd._verdict([diff]) == "differ"


def test_each_step_is_held_to_two_periods_not_the_drift_of_a_whole_chain():
    # a driver, then its executors 30 s later; the second application's driver after both
    volcano = run_of(binds=[(10, "ns/d", "a-0", "ns/app", "d"), (40, "ns/e", "a-1", "ns/app", "e"),
                            (130, "ns/d2", "a-0", "ns/app2", "d")])  # fmt: skip
    drifted = run_of(binds=[(19, "ns/d", "a-0", "ns/app", "d"), (59, "ns/e", "a-1", "ns/app", "e"),
                            (149, "ns/d2", "a-0", "ns/app2", "d")])  # fmt: skip
    # 19 s late, then 40 s after the driver instead of 30: each step within two periods (20 s)
    assert vd.compare(volcano, drifted, 10, CLASSES) == []
    slow = run_of(binds=[(10, "ns/d", "a-0", "ns/app", "d"), (61, "ns/e", "a-1", "ns/app", "e"),
                         (130, "ns/d2", "a-0", "ns/app2", "d")])  # fmt: skip
    (diff,) = vd.compare(volcano, slow, 10, CLASSES)
    assert diff.startswith("bindings of ns/app, wave 2: at 40 s")
    assert vd.close(100, 125, (50, 60), 20) and not vd.close(100, 125, (50, 50), 20)


class _CrdServer:
    """Answers GETs of CRDs from a dict (absent: 404), as the harness's client would be answered."""

    def __init__(self, crds: dict[str, dict]) -> None:
        self.crds = crds

    async def request(self, method: str, path: str, **kw):
        from lavaflow.kube.client import ApiError

        name = path.rsplit("/", 1)[-1]
        if name not in self.crds:
            raise ApiError(404, {"reason": "NotFound"}, method, path)
        return self.crds[name]


def _crd(status: bool) -> dict:
    return {"spec": {"versions": [{"name": "v1beta1", "subresources": {"status": {}} if status else {}}]}}


def test_the_harness_refuses_a_server_without_volcanos_own_crds():
    """With lavaflow's PodGroup CRD (a status subresource) vc-scheduler's status writes are dropped,
    and without the CronJob and ColocationConfiguration CRDs vc-controller-manager never starts:
    both made every Volcano run of a comparison do nothing, so the harness says so instead."""
    volcano = {name: _crd(False) for name in ("podgroups.scheduling.volcano.sh", *vd.VOLCANO_ONLY_CRDS)}
    assert asyncio.run(vd.volcano_crds_problem(_CrdServer(volcano))) is None
    theirs = dict(volcano, **{"podgroups.scheduling.volcano.sh": _crd(True)})
    assert "status subresource" in asyncio.run(vd.volcano_crds_problem(_CrdServer(theirs)))
    partial = {k: v for k, v in volcano.items() if not k.startswith("cronjobs.")}
    assert asyncio.run(vd.volcano_crds_problem(_CrdServer(partial))).endswith("cronjobs.batch.volcano.sh missing")


def test_a_kubernetes_job_is_played_only_beside_kube_controller_manager(tmp_path):
    scenario = tmp_path / "kube-job.yaml"
    scenario.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\nstatus: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
        "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: k}\nspec:\n  parallelism: 2\n  completions: 2\n"
        "  template:\n    metadata: {annotations: {sim.lavaflow.io/duration: 10s}}\n"
        "    spec: {restartPolicy: Never, schedulerName: volcano, containers: [{name: c, image: x, "
        "resources: {requests: {cpu: '1'}}}]}\n"
    )
    with pytest.raises(vd.Skip, match="kube-controller-manager's job controller"):
        vd.load_scenario([str(scenario)])
    sc = vd.load_scenario([str(scenario)], kube_jobs=True)
    assert [w.doc["kind"] for w in sc.workload] == ["Job"]
    cmd = vd.kcm_cmd("/bin/kcm", "/k")
    assert "--controllers=job-controller,garbage-collector-controller" in cmd


def test_the_closest_pair_of_runs_decides_when_lavaflow_draws_its_ties_again():
    # Volcano put the pod on a node of kind a both times; lavaflow's first draw took kind b, its
    # second kind a: one of lavaflow's runs did what one of Volcano's did.
    vc, lf_b, lf_a = (
        {**run_of(binds=[(10.0, "p", node, "ns/j", "w")]), "timed_out": False} for node in ("a-0", "b-0", "a-1")
    )
    runs = {"volcano": vc, "lavaflow": lf_b}
    assert vd.verdict(runs, [vc], 10.0, CLASSES)
    assert vd.verdict(runs, [vc], 10.0, CLASSES, [lf_a]) == []


def test_each_item_agrees_when_some_pair_of_runs_agrees_on_it():
    # Two gangs placed by independent ties: lavaflow's first run placed j like Volcano's first and
    # k like Volcano's second; no single pair agrees on both, and yet each placement is one that
    # Volcano's tie-breaks gave. A gang no pair agrees on stays a difference.
    def run(j, k, m="a-0"):
        binds = [(10.0, "p", j, "ns/j", "w"), (10.0, "q", k, "ns/k", "w"), (10.0, "r", m, "ns/m", "w")]
        return {**run_of(binds=binds), "timed_out": False}

    v1, v2 = run("a-0", "b-0"), run("b-0", "a-0")
    lf = run("a-1", "a-1")
    assert vd.verdict({"volcano": v1, "lavaflow": lf}, [v2], 10.0, CLASSES) == []
    odd = run("a-1", "a-1", "b-0")
    left = vd.verdict({"volcano": v1, "lavaflow": odd}, [v2], 10.0, CLASSES)
    assert len(left) == 1 and left[0].startswith("bindings of ns/m, wave 1")


def test_the_same_bindings_cut_into_waves_differently_agree():
    # random seed 22: six pods, then two more when the first ones ended, 20.7 s later under
    # Volcano (a second wave) and 12.4 s later under lavaflow (inside the first)
    vc = run_of(binds=[(38.7, f"p{i}", "a-0", "ns/j", "w") for i in range(6)] + [(59.4, "p6", "a-0", "ns/j", "w")])
    lf = run_of(binds=[(39.8, f"p{i}", "a-1", "ns/j", "w") for i in range(6)] + [(52.2, "p6", "a-1", "ns/j", "w")])
    assert vd.compare(vc, lf, 10, CLASSES) == []
    # not when the late binding is more than two periods apart
    late = run_of(binds=[(39.8, f"p{i}", "a-1", "ns/j", "w") for i in range(6)] + [(90.0, "p6", "a-1", "ns/j", "w")])
    assert any(d.startswith("bindings of ns/j") for d in vd.compare(vc, late, 10, CLASSES))
    # nor on another kind of node
    other = run_of(binds=[(39.8, f"p{i}", "b-0", "ns/j", "w") for i in range(6)] + [(52.2, "p6", "b-0", "ns/j", "w")])
    assert vd.compare(vc, other, 10, CLASSES)


def test_a_node_declared_without_pod_slots_gets_the_kubelets_110(tmp_path):
    # (the simulator's nodes have 110 pod slots unless told otherwise; a fake Node without them
    # would hold no pod at all on the API server)
    f = tmp_path / "n.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: w}\nstatus: {allocatable: {cpu: '2', memory: 4Gi}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulerName: volcano, containers: "
        "[{name: c, image: x, resources: {requests: {cpu: '1'}}}]}\n"
    )
    (node,) = vd.load_scenario([str(f)]).nodes
    assert node["status"]["allocatable"] == {"cpu": "2", "memory": "4Gi", "pods": "110"}


def test_runs_that_both_evicted_compare_their_waves_of_evictions():
    """Evictions as the recorder stored them before they carried their node (the --json files of
    earlier runs): two runs that each evicted one pod of a gang in one wave are compared by task,
    not refused with a KeyError (random scenario 56's kind of run, replayed beside Volcano)."""
    a = run_of(evictions=[(91, "ns/w4-t2-2", "ns/w4", "t2")])
    b = run_of(evictions=[(92, "ns/w4-t0-2", "ns/w4", "t0")])
    for r in (a, b):
        for e in r["evictions"]:
            del e["node"]
    assert vd.compare(a, a, 10.0, {}) == []
    assert vd.compare(a, b, 10.0, {}) == ["evictions of ns/w4, wave 1: volcano [[('t2', 1)]]; lavaflow [[('t0', 1)]]"]


def test_the_same_bindings_cut_into_as_many_waves_differently_agree():
    """Random seed 74: w0's later pods one by one, at 80, 100.5 and 111 s under Volcano (waves
    [80], [100.5, 111]) and at 89, 99 and 109.5 s under lavaflow (waves [89, 99], [109.5]); each binding
    within two periods of the other's, only cut differently, into as many waves."""
    first = [(49.0, f"p{i}", "a-0", "ns/w0", t) for i, t in enumerate(("t0", "t1", "t2"))]
    vc = run_of(
        binds=[
            *first,
            (80.0, "q1", "a-0", "ns/w0", "t1"),
            (100.5, "q2", "a-0", "ns/w0", "t2"),
            (111.0, "q3", "a-0", "ns/w0", "t1"),
        ]
    )
    lf = run_of(
        binds=[
            *first,
            (89.0, "q1", "a-0", "ns/w0", "t1"),
            (99.0, "q2", "a-0", "ns/w0", "t2"),
            (109.5, "q3", "a-0", "ns/w0", "t1"),
        ]
    )
    assert vd.compare(vc, lf, 10, CLASSES) == []
