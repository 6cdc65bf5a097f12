"""Fuzzed Job lifecycles (issue 3): random Job specs, faults and Commands through the simulator.

Hypothesis generates Jobs (tasks, replicas, minAvailable, policies with random
events/actions/exit codes/timeouts, maxRetry, minSuccess, plugins), pods' exit
codes and durations, template ``delete-at`` evictions, node failures and
recoveries, and Commands. Properties: loading raises nothing but InputError
(with a non-empty problem list); an accepted input simulates without raising;
every job ends in a final phase or is listed in ``stuck`` with a reason; the
phase history is well-formed; a finished job leaves no live pod behind.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.api.loader import InputError, load_text
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

PHASES = {
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
}
FINAL = ("Completed", "Failed", "Terminated", "Aborted")
EVENTS = ["PodPending", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated", "*"]
ACTIONS = ["AbortJob", "RestartJob", "RestartTask", "RestartPod", "TerminateJob", "CompleteJob"]
BAD_EVENTS = ["OutOfSync", "Bogus"]
BAD_ACTIONS = ["SyncJob", "ResumeJob", "Bogus"]
PLUGINS = ["env", "svc", "ssh", "pytorch", "mpi", "tensorflow"]
TASK_NAMES = ["master", "worker", "ps", "chief", "t-a"]
UNTIL = 400

seconds = st.integers(min_value=0, max_value=120)
durations = st.one_of(st.integers(min_value=0, max_value=60).map(lambda s: f"{s}s"), st.just("inf"))


def noisy(draw, ok: bool, good, bad):
    """Mostly ``good``; when the scenario may be invalid, sometimes ``bad``."""
    return draw(good) if ok or draw(st.integers(0, 3)) else draw(bad)


@st.composite
def policies(draw, ok: bool, max_size=3):
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        pol: dict = {"action": noisy(draw, ok, st.sampled_from(ACTIONS), st.sampled_from(BAD_ACTIONS))}
        kind = noisy(draw, ok, st.sampled_from(["event", "events", "exitCode"]), st.just("none"))
        if kind == "event":
            pol["event"] = noisy(draw, ok, st.sampled_from(EVENTS), st.sampled_from(BAD_EVENTS))
        elif kind == "events":
            pol["events"] = draw(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=3, unique=True))
        elif kind == "exitCode":
            pol["exitCode"] = noisy(draw, ok, st.integers(1, 5), st.integers(-1, 0))
        if draw(st.booleans()):
            pol["timeout"] = noisy(
                draw, ok, st.sampled_from(["5s", "30s", "1m"]), st.sampled_from(["0s", "bogus", "-3s"])
            )
        out.append(pol)
    return out


@st.composite
def tasks(draw, ok: bool):
    names = draw(st.lists(st.sampled_from(TASK_NAMES), min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        ann = {"sim.lavaflow.io/duration": draw(durations)}
        if draw(st.booleans()):
            ann["sim.lavaflow.io/exit-code"] = str(draw(st.sampled_from([0, 1, 3, 137])))
        if draw(st.integers(0, 3)) == 0:
            ann["sim.lavaflow.io/delete-at"] = f"{draw(seconds)}s"
        replicas = draw(st.integers(0, 4))
        task: dict = {
            "name": name,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": ann},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": draw(st.sampled_from(["500m", "1", "2", "5"]))}},
                        }
                    ],
                },
            },
        }
        if draw(st.booleans()):
            task["minAvailable"] = noisy(draw, ok, st.integers(0, replicas), st.integers(replicas + 1, 6))
        if draw(st.booleans()):
            task["maxRetry"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            task["policies"] = draw(policies(ok, max_size=2))
        out.append(task)
    return out


@st.composite
def jobs(draw, name: str, ok: bool):
    spec: dict = {"schedulerName": "volcano", "tasks": draw(tasks(ok))}
    total = sum(t["replicas"] for t in spec["tasks"])
    if draw(st.booleans()):
        spec["minAvailable"] = noisy(draw, ok, st.integers(0, total), st.integers(total + 1, total + 3))
    if draw(st.booleans()):
        spec["maxRetry"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        spec["minSuccess"] = noisy(draw, ok, st.integers(1, max(total, 1)), st.integers(-1, total + 2))
    if draw(st.booleans()):
        spec["policies"] = draw(policies(ok))
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(PLUGINS), max_size=3, unique=True))
        spec["plugins"] = {p: [] for p in chosen}
    if draw(st.integers(0, 4)) == 0:
        spec["ttlSecondsAfterFinished"] = draw(st.integers(0, 60))
    meta: dict = {"name": name, "annotations": {}}
    if draw(st.booleans()):
        meta["annotations"]["sim.lavaflow.io/submit-at"] = f"{draw(st.integers(0, 30))}s"
    docs = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": spec}]
    if draw(st.integers(0, 3)) == 0:
        # A later version of the job: a scale (or a forbidden change, refused at load).
        upd = json.loads(json.dumps(docs[0]))
        upd["metadata"]["annotations"]["sim.lavaflow.io/submit-at"] = f"{draw(st.integers(31, 90))}s"
        for t in upd["spec"]["tasks"]:
            t["replicas"] = draw(st.integers(0, 4))
            if ok and t.get("minAvailable", 0) > t["replicas"]:
                t["minAvailable"] = t["replicas"]
        upd["spec"]["minAvailable"] = draw(st.integers(0, sum(t["replicas"] for t in upd["spec"]["tasks"])))
        if not ok and draw(st.booleans()):
            upd["spec"]["maxRetry"] = 9  # forbidden
        docs.append(upd)
    return docs


@st.composite
def scenarios(draw):
    ok = draw(st.integers(0, 4)) > 0  # most scenarios are valid; the rest may carry mistakes
    docs: list[dict] = []
    for i in range(draw(st.integers(1, 3))):
        ann = {}
        if draw(st.booleans()):
            ann["sim.lavaflow.io/fail-at"] = f"{draw(seconds)}s"
            if draw(st.booleans()):
                ann["sim.lavaflow.io/recover-at"] = f"{draw(seconds)}s"
        docs.append(
            {
                "apiVersion": "sim.lavaflow.io/v1alpha1",
                "kind": "NodeGroup",
                "metadata": {"name": f"g{i}", "annotations": ann},
                "spec": {
                    "count": draw(st.integers(1, 2)),
                    "capacity": {"cpu": draw(st.sampled_from(["2", "4"])), "memory": "8Gi", "pods": "110"},
                },
            }
        )
    names = [f"j{i}" for i in range(draw(st.integers(1, 3)))]
    for n in names:
        docs.extend(draw(jobs(n, ok)))
    for i in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["Job", "Job", "Queue"]))
        if kind == "Job":
            target = noisy(draw, ok, st.sampled_from(names), st.just("ghost"))
            action = noisy(
                draw,
                ok,
                st.sampled_from(["AbortJob", "ResumeJob", "RestartJob", "TerminateJob", "CompleteJob"]),
                st.just("OpenQueue"),
            )
        else:
            target = noisy(draw, ok, st.just("default"), st.just("ghost"))
            action = noisy(draw, ok, st.sampled_from(["OpenQueue", "CloseQueue"]), st.just("AbortJob"))
        docs.append(
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"name": f"c{i}", "annotations": {"sim.lavaflow.io/submit-at": f"{draw(seconds)}s"}},
                "action": action,
                "target": {"kind": kind, "name": target},
            }
        )
    return "".join("---\n" + json.dumps(d) + "\n" for d in docs)


def check(text: str) -> None:
    try:
        sim_input = prepare(load_text(text))
    except InputError as exc:
        assert exc.problems and all(isinstance(p, str) and p.strip() for p in exc.problems), exc.problems
        return
    sim = Simulation(sim_input, until=UNTIL)
    r = sim.run()
    assert r["endTime"] <= UNTIL
    stuck = {(s["namespace"], s["name"]): s["reason"] for s in r["stuck"]}
    for j in r["jobs"]:
        if j["kind"] != "Job":
            continue
        if j.get("deleteTime") is not None:
            # Deleted during the run (delete-at or TTL): reported, finished or "Deleted", never stuck.
            assert j["phase"] in FINAL or j["phase"] == "Deleted", j
            assert (j["namespace"], j["name"]) not in stuck
            continue
        if j["phase"] not in FINAL:
            assert stuck.get((j["namespace"], j["name"])), (j["name"], j["phase"], r["stuck"])
        hist = j["phaseHistory"]
        assert hist and hist[0]["phase"] == "Pending", hist
        assert all(h["phase"] in PHASES for h in hist), hist
        assert all(a["time"] <= b["time"] for a, b in zip(hist, hist[1:])), hist
        assert all(a["phase"] != b["phase"] for a, b in zip(hist, hist[1:])), hist
        assert hist[-1]["phase"] == j["phase"]
        job = sim.store.get("Job", f"{j['namespace']}/{j['name']}")
        assert j["retryCount"] <= max(job.spec.max_retry, 0) + sum(1 for h in hist if h["phase"] == "Aborted"), j
        if j["phase"] in ("Completed", "Failed", "Terminated", "Aborted"):
            alive = [
                p.name
                for p in sim.store.list("Pod")
                if p.metadata.labels.get("volcano.sh/job-name") == j["name"]
                and p.status.phase in ("Pending", "Running")
            ]
            assert alive == [], (j["name"], j["phase"], alive)
    for s in r["stuck"]:
        assert s["reason"].strip()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_fuzzed_lifecycles_never_crash(text):
    check(text)


def test_check_accepts_a_plain_job():
    # Sanity: the property's own machinery on a known-good input.
    check(
        "".join(
            "---\n" + json.dumps(d) + "\n"
            for d in (
                {
                    "apiVersion": "sim.lavaflow.io/v1alpha1",
                    "kind": "NodeGroup",
                    "metadata": {"name": "n"},
                    "spec": {"count": 1, "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
                },
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "metadata": {"name": "j"},
                    "spec": {
                        "tasks": [
                            {
                                "name": "t",
                                "replicas": 1,
                                "template": {
                                    "metadata": {"annotations": {"sim.lavaflow.io/duration": "5s"}},
                                    "spec": {"containers": [{"name": "c"}]},
                                },
                            }
                        ]
                    },
                },
            )
        )
    )
