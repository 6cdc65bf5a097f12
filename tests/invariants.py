"""Random scenarios and the invariants every simulation must keep (issue 15).

Shared by tests/sim/test_invariants.py (a few hundred scenarios in ``make test``) and
benchmarks/invariants.py (10,000 and more). A scenario is drawn from a seed with
``random.Random`` so a failure is reproduced by its seed alone:

- clusters of 1-4 nodes, some tainted or labelled, some failing and recovering;
- priority classes, flat or hierarchical queues (weights, capabilities, reclaimable);
- a scheduler configuration: Volcano's default, with preempt/reclaim under proportion,
  capacity (optionally hierarchical) or hierarchical drf;
- mixed workloads: Volcano Jobs (per-task minimums, priorities, tolerations), PodGroups
  with pods, bare pods, Deployments and batch Jobs ganged by group-min-member, some
  deleted by ``delete-at``. Every duration is finite.

``check`` simulates a scenario (with ``until`` far beyond any finite schedule, so a run that
reaches it never ended) and returns the violated invariants, one line each:

- liveness: the run ends on its own; no pod is evicted more than a bounded number of
  times for the same preemptor (or reclaiming queue);
- no node above its allocatable at any instant;
- no gang started below its minimum;
- no queue above its capability at any instant (and its ancestors', with the capacity
  plugin's hierarchy);
- every job ends (a final phase, Deleted or Lost) or is listed stuck with a reason;
- determinism: the same input and seed give the same JSON.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from conftest import resources
from lavaflow.api.loader import load_text
from lavaflow.api.selectors import pod_requests
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare

ENDED = ("Completed", "Failed", "Terminated", "Aborted", "Deleted", "Lost")
PRIORITIES = {"low": 10, "mid": 100, "high": 1000}
EPS = 1e-6
#: Evictions of one pod (by name) for one preemptor allowed beyond one per node failure.
EVICTION_BOUND = 3

CONFS = {
    "default": None,
    "preempt-proportion": ("enqueue, allocate, backfill, reclaim, preempt", "proportion", {}, False),
    "preempt-capacity": ("enqueue, allocate, backfill, reclaim, preempt", "capacity", {}, False),
    "capacity-hierarchy": ("enqueue, allocate, backfill, reclaim", "capacity", {"enableHierarchy": True}, True),
    "drf-hierarchy": ("enqueue, allocate, backfill, reclaim, preempt", None, {}, True),
}


def _doc(obj: dict) -> str:
    return "---\n" + json.dumps(obj) + "\n"


def _conf(name: str) -> str:
    spec = CONFS[name]
    if spec is None:
        return ""
    actions, queue_plugin, args, hierarchical = spec
    lines = [
        f'actions: "{actions}"',
        "tiers:",
        "- plugins:",
        "  - name: priority",
        "  - name: gang",
        "  - name: conformance",
        "- plugins:",
        "  - name: overcommit",
        "    arguments: {overcommit-factor: 10}",
    ]
    if queue_plugin is None:  # hierarchical drf
        lines += ["  - name: drf", "    enableHierarchy: true", "  - name: predicates", "  - name: nodeorder"]
    else:
        lines += ["  - name: drf", "  - name: predicates", f"  - name: {queue_plugin}"]
        for k, v in args.items():
            lines.append(f"    {k}: {json.dumps(v)}")
        lines.append("  - name: nodeorder")
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": "\n".join(lines) + "\n"},
        }
    )


@dataclass
class Scenario:
    seed: int
    text: str
    conf: str
    queues: dict[str, dict] = field(default_factory=dict)  # name -> {"parent", "capability": {res: float}}
    faults: int = 0
    workloads: dict[str, int] = field(default_factory=dict)  # queue -> workloads submitted to it


def _req(rng: random.Random, gpu_nodes: bool) -> dict[str, str]:
    req = {"cpu": rng.choice(["250m", "500m", "1", "1500m", "2", "3"])}
    if rng.random() < 0.5:
        req["memory"] = rng.choice(["256Mi", "1Gi", "2Gi", "4Gi"])
    if gpu_nodes and rng.random() < 0.25:
        req["nvidia.com/gpu"] = str(rng.choice([1, 1, 2]))
    return req


def _template(
    rng: random.Random, req: dict, prio: str | None, tolerate: bool, deletable: bool, extra_ann: dict | None = None
) -> dict:
    ann = {"sim.lavaflow.io/duration": f"{rng.randint(1, 90)}s", **(extra_ann or {})}
    if rng.random() < 0.1:
        ann["sim.lavaflow.io/exit-code"] = "1"
    if deletable and rng.random() < 0.08:
        at = int(ann.get("sim.lavaflow.io/submit-at", "0"))
        ann["sim.lavaflow.io/delete-at"] = f"{at + rng.randint(5, 120)}s"
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": resources(req)}],
    }
    if prio:
        spec["priorityClassName"] = prio
    if tolerate:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    return {"metadata": {"annotations": ann}, "spec": spec}


def generate(seed: int) -> Scenario:
    rng = random.Random(seed)
    conf = rng.choice(list(CONFS))
    hierarchical = CONFS[conf] is not None and CONFS[conf][3]
    text = _conf(conf)
    gpu_nodes = rng.random() < 0.4
    faults = 0
    node_count = rng.randint(1, 4)
    for i in range(node_count):
        cap = {"cpu": str(rng.choice([2, 4, 8])), "memory": rng.choice(["4Gi", "8Gi", "16Gi"]), "pods": "110"}
        if gpu_nodes and rng.random() < 0.7:
            cap["nvidia.com/gpu"] = str(rng.choice([1, 2, 4]))
        ann: dict[str, str] = {}
        if rng.random() < 0.15:
            at = rng.randint(5, 100)
            ann["sim.lavaflow.io/fail-at"] = f"{at}s"
            faults += 1
            if rng.random() < 0.7:
                ann["sim.lavaflow.io/recover-at"] = f"{at + rng.randint(5, 60)}s"
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"n{i}",
                "labels": {"kubernetes.io/hostname": f"n{i}", "zone": rng.choice("ab")},
                "annotations": ann,
            },
            "spec": {},
            "status": {"allocatable": cap, "capacity": cap},
        }
        if i > 0 and rng.random() < 0.2:
            node["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        text += _doc(node)
    for name, value in PRIORITIES.items():
        text += _doc(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
    queues: dict[str, dict] = {}
    names = [f"q{i}" for i in range(rng.randint(1, 3))]
    for qname in names:
        parent = None
        if hierarchical and qname != "q0" and rng.random() < 0.6:
            parent = "q0"
        cap: dict[str, str] = {}
        if rng.random() < 0.35 and parent is None:
            cap["cpu"] = str(rng.randint(2, 8))
        if rng.random() < 0.15 and parent is None:
            cap["memory"] = rng.choice(["2Gi", "8Gi"])
        spec: dict[str, Any] = {"weight": rng.randint(1, 4)}
        if cap:
            spec["capability"] = cap
        if parent:
            spec["parent"] = parent
        if rng.random() < 0.15:
            spec["reclaimable"] = False
        queues[qname] = {"parent": parent, "capability": cap}
        text += _doc(
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": qname}, "spec": spec}
        )
    # Leaf queues take the work (Volcano refuses jobs in a queue that has children).
    parents = {q["parent"] for q in queues.values() if q["parent"]}
    leaves = [q for q in names if q not in parents] or ["default"]
    per_queue: dict[str, int] = {}

    for j in range(rng.randint(1, 7)):
        kind = rng.choices(["vcjob", "podgroup", "pods", "deployment", "batchjob"], [5, 2, 1, 1, 1])[0]
        queue = rng.choice(leaves)
        per_queue[queue] = per_queue.get(queue, 0) + 1
        prio = rng.choice([None, "low", "mid", "high"])
        at = str(rng.randint(0, 60))
        tolerate = rng.random() < 0.3
        name = f"w{j}"
        if kind == "vcjob":
            tasks = []
            for t in range(rng.randint(1, 3)):
                replicas = rng.randint(1, 4)
                task: dict[str, Any] = {
                    "name": f"t{t}",
                    "replicas": replicas,
                    "template": _template(rng, _req(rng, gpu_nodes), prio, tolerate, True),
                }
                if rng.random() < 0.3:
                    task["minAvailable"] = rng.randint(0, replicas)
                tasks.append(task)
            total = sum(t["replicas"] for t in tasks)
            spec = {"schedulerName": "volcano", "queue": queue, "minAvailable": rng.randint(1, total), "tasks": tasks}
            if prio:
                spec["priorityClassName"] = prio
            meta: dict[str, Any] = {"name": name, "annotations": {"sim.lavaflow.io/submit-at": at}}
            if rng.random() < 0.05:
                meta["annotations"]["sim.lavaflow.io/delete-at"] = str(int(at) + rng.randint(1, 100))
            text += _doc({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": spec})
        elif kind == "podgroup":
            n = rng.randint(1, 4)
            pg_spec: dict[str, Any] = {"minMember": rng.randint(1, n), "queue": queue}
            if prio:
                pg_spec["priorityClassName"] = prio
            text += _doc(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": name, "annotations": {"sim.lavaflow.io/submit-at": at}},
                    "spec": pg_spec,
                }
            )
            req = _req(rng, gpu_nodes)
            for i in range(n):
                tmpl = _template(
                    rng,
                    req,
                    prio,
                    tolerate,
                    True,
                    {"scheduling.k8s.io/group-name": name, "sim.lavaflow.io/submit-at": at},
                )
                text += _doc(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"{name}-{i}", **tmpl["metadata"]},
                        "spec": {**tmpl["spec"], "schedulerName": "volcano"},
                    }
                )
        elif kind == "pods":
            tmpl = _template(
                rng,
                _req(rng, gpu_nodes),
                prio,
                tolerate,
                True,
                {"sim.lavaflow.io/submit-at": at, "scheduling.volcano.sh/queue-name": queue},
            )
            text += _doc(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, **tmpl["metadata"]},
                    "spec": {**tmpl["spec"], "schedulerName": "volcano"},
                }
            )
        else:
            n = rng.randint(1, 4)
            tmpl = _template(rng, _req(rng, gpu_nodes), prio, tolerate, False)
            tmpl["spec"]["schedulerName"] = "volcano"
            # the gang size on the owner, the queue on the pods: where Volcano's podgroup
            # controller reads each
            tmpl["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = queue
            meta = {
                "name": name,
                "annotations": {
                    "sim.lavaflow.io/submit-at": at,
                    "scheduling.volcano.sh/group-min-member": str(rng.randint(1, n)),
                },
            }
            if rng.random() < 0.15:
                meta["annotations"]["sim.lavaflow.io/delete-at"] = str(int(at) + rng.randint(1, 100))
            if kind == "deployment":
                doc = {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": meta,
                    "spec": {
                        "replicas": n,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {**tmpl, "metadata": {**tmpl["metadata"], "labels": {"app": name}}},
                    },
                }
            else:
                tmpl["spec"]["restartPolicy"] = "Never"
                doc = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": meta,
                    "spec": {"parallelism": n, "completions": n, "template": tmpl},
                }
            text += _doc(doc)
    q_caps = {q: {"parent": v["parent"], "capability": v["capability"]} for q, v in queues.items()}
    return Scenario(seed=seed, text=text, conf=conf, queues=q_caps, faults=faults, workloads=per_queue)


# ------------------------------------------------------------------ checking
class _Recorder:
    """Watches the store: every pod's requests, group, node and running interval; evictions."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.pods: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}  # PodGroup key -> {"min", "queue"}
        self.evictions: dict[tuple[str, str], int] = {}
        sim.store.watch("Pod", self._pod)
        sim.store.watch("PodGroup", self._pg)

    def _pg(self, event: str, pg, old) -> None:
        self.groups[pg.key] = {"min": pg.spec.min_member, "queue": pg.spec.queue or "default"}

    def _pod(self, event: str, pod, old) -> None:
        uid = pod.metadata.uid
        rec = self.pods.get(uid)
        now = self.sim.now
        if rec is None:
            rec = self.pods[uid] = {
                "name": pod.key,
                "req": pod_requests(pod.spec),
                "start": None,
                "end": None,
                "node": None,
                "group": None,
                "succeeded": False,
            }
        group = pod.metadata.annotations.get("scheduling.k8s.io/group-name")
        if group:
            rec["group"] = f"{pod.namespace}/{group}"
        if pod.spec.node_name and rec["start"] is None and pod.status.phase == "Running":
            rec["start"], rec["node"] = now, pod.spec.node_name
        if event == "DELETED" or pod.status.phase in ("Succeeded", "Failed"):
            if rec["end"] is None and rec["start"] is not None:
                rec["end"] = now
            rec["succeeded"] = pod.status.phase == "Succeeded"
        if event == "DELETED" and pod.status.reason == "Evicted" and pod.status.message:
            k = (pod.key, pod.status.message)
            self.evictions[k] = self.evictions.get(k, 0) + 1


def _bound(sc: Scenario) -> float:
    """A time no finite schedule of the scenario reaches: every pod one after another, plus arrivals and faults."""
    return 5000.0


def _overlaps(intervals: list[tuple[float, float, dict[str, float]]], cap: dict[str, float], what: str) -> list[str]:
    out = []
    points = sorted({s for s, _, _ in intervals})
    for t in points:
        live = [rq for s, e, rq in intervals if s <= t < e]
        for res, limit in cap.items():
            used = sum(rq.get(res, 0.0) for rq in live)
            if used > limit + EPS:
                out.append(f"{what}: {res} {used:g} > {limit:g} at t={t:g}")
                break
        if out:
            break
    return out


def run(sc: Scenario, until: float | None = None) -> tuple[dict, _Recorder]:
    sim = Simulation(
        prepare(load_text(sc.text)),
        scheduler="lavaflow",
        seed=sc.seed % 4,
        until=until if until is not None else _bound(sc),
    )
    rec = _Recorder(sim)
    return sim.run(), rec


def check(sc: Scenario, determinism: bool = True) -> list[str]:
    from lavaflow.api.quantity import parse_quantity

    r, rec = run(sc)
    problems: list[str] = []
    bound = _bound(sc)
    if r["endTime"] >= bound:
        problems.append(f"liveness: the run reached t={bound:g} without ending")
    # The bound holds per preemptor job: a preemption names its preemptor's pod, a reclaim only the
    # reclaiming queue (whose every job has its own bound).
    limit = EVICTION_BOUND + sc.faults
    for (pod, why), n in sorted(rec.evictions.items()):
        jobs = sc.workloads.get(why.rsplit(" ", 1)[-1], 1) if why.startswith("reclaimed by queue ") else 1
        if n > limit * max(jobs, 1):
            problems.append(f"liveness: {pod} evicted {n} times ({why})")
    end = r["endTime"]
    ivals = [
        (p["start"], p["end"] if p["end"] is not None else end + 1, p)
        for p in rec.pods.values()
        if p["start"] is not None
    ]
    # Nodes never above allocatable.
    for node in rec.sim.store.list("Node"):
        cap = {k: float(v) for k, v in node.allocatable.items() if k != "pods"}
        mine = [(s, e, p["req"]) for s, e, p in ivals if p["node"] == node.name]
        problems += _overlaps(mine, cap, f"node {node.name} over allocatable")
    # Gangs never start below their minimum: whenever a pod of a group starts, the group's
    # pods that have started and not been lost (running, or succeeded) reach minMember.
    for gkey, g in rec.groups.items():
        mine = [(s, e, p) for s, e, p in ivals if p["group"] == gkey]
        for t in sorted({s for s, _, _ in mine}):
            ready = sum(1 for s, e, p in mine if s <= t and (e > t or p["succeeded"]))
            if ready < g["min"]:
                problems.append(f"gang {gkey} started below its minimum: {ready} < {g['min']} at t={t:g}")
                break
    # Queues never above their capability (ancestors' too with the capacity plugin's hierarchy).
    # (Hierarchical drf alone, without proportion or capacity, enforces no capability, as in Volcano.)
    hierarchy = sc.conf == "capacity-hierarchy"
    for qname, q in sc.queues.items():
        if not q["capability"] or sc.conf == "drf-hierarchy":
            continue
        members = {qname}
        if hierarchy:
            members |= {c for c, v in sc.queues.items() if v["parent"] == qname}
        cap = {k: float(parse_quantity(v)) for k, v in q["capability"].items()}
        mine = [
            (s, e, p["req"])
            for s, e, p in ivals
            if p["group"] and rec.groups.get(p["group"], {}).get("queue") in members
        ]
        problems += _overlaps(mine, cap, f"queue {qname} over capability")
    # Every job ends or is stuck with a reason.
    stuck = {(s["namespace"], s["name"]): s["reason"] for s in r["stuck"]}
    for j in r["jobs"]:
        k = (j["namespace"], j["name"])
        if j["phase"] in ENDED:
            if k in stuck:
                problems.append(f"job {k[1]} is {j['phase']} but listed stuck")
        elif not stuck.get(k):
            problems.append(f"job {k[1]} is {j['phase']} without a stuck reason")
    if r["summary"]["completed"] != sum(1 for j in r["jobs"] if j["phase"] == "Completed"):
        problems.append("summary.completed differs from the Completed jobs")
    if determinism:
        again, _ = run(sc)
        if json.dumps(again, sort_keys=True, default=str) != json.dumps(r, sort_keys=True, default=str):
            problems.append("determinism: the same input and seed gave different results")
    return problems
