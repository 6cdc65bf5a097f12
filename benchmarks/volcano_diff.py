"""Differential harness: one scenario played under Volcano and under lavaflow on a real API server (issue 34).

The scenario is the YAML ``lavaflow simulate`` takes. It is checked as the simulator checks it
(a bad file: its problems named, exit code 2), then played twice on the same kube-apiserver,
one system after the other, never two at once:

* ``volcano``: Volcano's ``vc-controller-manager`` and ``vc-scheduler`` (``--volcano-bin DIR``
  holds both), given the scenario's volcano-scheduler.conf (its ConfigMap), or Volcano's shipped
  one when it has none;
* ``lavaflow``: ``lavaflow controller`` and ``lavaflow scheduler --node-choice volcano`` with the
  same file.

Both runs get the same objects at the same (scaled) times: Nodes (NodeGroups expanded; fake, no
kubelet), then the cluster-scoped objects (Queues — ``root`` and ``default`` as Volcano creates
them unless the scenario gives them —, PriorityClasses, HyperNodes, Numatopologies), then the
processes are started and waited for (their health endpoints), then the workload at its
``sim.lavaflow.io/submit-at``. Volcano's admission webhook does not run here: every Job,
PodGroup and Queue is defaulted and checked by lavaflow's admission code (which follows Volcano's
webhook) before it is created, identically for both runs. A fake kubelet
(:class:`lavaflow.testing.FakeKubelet`) runs each bound pod for its ``sim.lavaflow.io/duration``
and ends it with its ``sim.lavaflow.io/exit-code``, and node faults (``fail-at`` /
``recover-at``) mark the node NotReady and delete its pods, as the node lifecycle controller
would with no toleration time. Scenario time runs ``--time-scale`` times wall time (0.1: a 60 s
pod runs 6 s; ``auto`` fits the scenario's horizon in ``--target`` seconds) for both systems
alike; the scheduling period is ``--period`` wall seconds.

What is recorded, in scenario seconds from the first create: each binding (pod, node, gang,
task), each PodGroup phase and condition, each Job phase and retry count, each eviction
(a pod with the ``DisruptionTarget`` condition, which both Volcano's evictor and the Eviction API
set) and the final state of every Job, PodGroup and pod. What is compared (``compare``):

* per gang, its bindings in waves (bindings less than two periods apart): how many pods of each
  task, and on nodes of which kind — nodes with the same allocatable, labels (but the hostname)
  and taints are interchangeable, so any tie-break between them agrees —, each wave within two
  scheduling periods of the other run's (``close``: absolutely, or since the gang's previous
  wave);
* per PodGroup its phases in order (``aligned``: each within two periods; a phase held for less
  than two periods may be missing from the other run) and the set of conditions (type, status,
  reason) it ever had;
* per Job its phases in order (likewise) and its final retry count;
* evictions: victims counted by gang and task, in waves, each within two periods;
* final outcomes: per gang and task how many pods ended in each phase (a pod deleted as its
  duration ran out counts as ended).

Volcano breaks ties at random: while lavaflow differs, Volcano is played again (``--volcano-runs``)
and the closest Volcano run is the one compared. lavaflow's one documented deliberate difference
(an enqueue refusal explained in an Unschedulable condition) is marked, not counted.

A run ends when all objects are created, every fault played, no pod with a finite duration is
running and nothing has changed for ``--quiet`` wall seconds, or at ``--timeout``.

    python benchmarks/volcano_diff.py --kubeconfig K --volcano-bin DIR examples/mpi-hello.yaml ...

Exit status: 0 all agree, 1 some disagreement, 2 bad input or missing kubeconfig/binaries
(skipped, with the reason). Scenarios using what this harness cannot play on a bare API server
(Deployments and other kube-controller-manager workloads, lavaflow-only kinds) are reported as
skipped with the reason; with ``--kube-controller-manager BINARY`` its job controller and garbage
collector run beside each system, and scenarios with Kubernetes' batch/v1 Jobs are played too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kube_throughput import connect  # noqa: E402
from kube_volcano import Proc, controller_cmd, scheduler_cmd  # noqa: E402

from lavaflow.api import sim_annotations as ann  # noqa: E402
from lavaflow.api.kinds import kind_info, kind_of_manifest  # noqa: E402
from lavaflow.api.loader import InputError  # noqa: E402
from lavaflow.kube.client import ApiError, KubeClient  # noqa: E402
from lavaflow.testing import FakeKubelet, fake_node  # noqa: E402
from lavaflow.testing.fake_kubelet import force_delete, list_watch  # noqa: E402

SYSTEMS = ("volcano", "lavaflow")
TERMINAL_JOB = {"Completed", "Failed", "Terminated", "Aborted"}
# documents by apiVersion/kind prefix that are not Volcano's to play
NOT_VOLCANO = {
    "scheduling.x-k8s.io/": "scheduler-plugins' PodGroup is not Volcano's API (Volcano ignores it)",
    "scheduling.k8s.io/v1alpha": "the Kubernetes Workload API is not Volcano's (Volcano ignores it)",
    "kubeflow.org/": "Voda's MPIJob becomes one of lavaflow's elastic jobs, which Volcano does not have",
    "apps/": "needs kube-controller-manager's controllers, which are not run here",
    "batch/v1/Job": "needs kube-controller-manager's job controller, which is not run here",
    "v1/PersistentVolume": "volumes need kube-controller-manager's binder, which is not run here",
}
CLUSTER_KINDS = ("Queue", "PriorityClass", "HyperNode", "Numatopology", "Namespace")
# namespaced kinds wiped between runs (controllers' and plugins' objects included)
WIPED = [
    ("batch.volcano.sh/v1alpha1", "jobs"),
    ("batch/v1", "jobs"),
    ("flow.volcano.sh/v1alpha1", "jobflows"),
    ("flow.volcano.sh/v1alpha1", "jobtemplates"),
    ("bus.volcano.sh/v1alpha1", "commands"),
    ("scheduling.volcano.sh/v1beta1", "podgroups"),
    ("v1", "pods"),
    ("v1", "configmaps"),
    ("v1", "secrets"),
    ("v1", "services"),
    ("networking.k8s.io/v1", "networkpolicies"),
    ("v1", "resourcequotas"),
    ("v1", "events"),
]
WIPED_CLUSTER = [
    ("scheduling.volcano.sh/v1beta1", "queues"),
    ("topology.volcano.sh/v1alpha1", "hypernodes"),
    ("nodeinfo.volcano.sh/v1alpha1", "numatopologies"),
    ("v1", "nodes"),
]
# Volcano's scheduler makes these at start when absent; both runs get them made beforehand
DEFAULT_QUEUES = {
    "root": {"weight": 1, "reclaimable": False},
    "default": {"weight": 1, "reclaimable": True, "parent": "root"},
}


class Skip(Exception):
    """The scenario cannot be played here (the reason is the message)."""


@dataclass
class Timed:
    at: float  # scenario seconds
    doc: dict[str, Any]
    delete_at: float | None = None


@dataclass
class Scenario:
    name: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    node_class: dict[str, str] = field(default_factory=dict)
    cluster: list[dict[str, Any]] = field(default_factory=list)
    workload: list[Timed] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    faults: list[tuple[float, str, bool]] = field(default_factory=list)  # (at, node, failed)
    conf: str = ""
    namespaces: set[str] = field(default_factory=lambda: {"default"})
    priority_classes: list[str] = field(default_factory=list)
    scale: float = 0.1  # wall seconds per scenario second (time_scale)


# --------------------------------------------------------------------------- the scenario


def _quantity(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _node_doc(node: Any, raw_capacity: dict[str, Any] | None) -> dict[str, Any]:
    """A fake Node for a simulated node: its labels (with the kubelet's), taints, allocatable."""
    cap = {k: _quantity(v) for k, v in (raw_capacity or node.status.allocatable).items()}
    doc = fake_node(node.name, cap.get("cpu", "1"), cap.get("memory", "1Gi"), cap.get("pods", "110"))
    doc["metadata"]["labels"] = dict(node.metadata.labels)
    cap.setdefault("pods", "110")
    doc["status"]["capacity"] = doc["status"]["allocatable"] = cap
    doc["spec"]["taints"] = [t.model_dump(by_alias=True, exclude_none=True) for t in node.spec.taints]
    if node.spec.unschedulable:
        doc["spec"]["unschedulable"] = True
    return doc


def _node_signature(doc: dict[str, Any]) -> str:
    labels = {
        k: v
        for k, v in doc["metadata"]["labels"].items()
        if k not in ("kubernetes.io/hostname", "beta.kubernetes.io/hostname")
    }
    return json.dumps([sorted(labels.items()), sorted(doc["status"]["allocatable"].items()), doc["spec"]["taints"]])


def _admit(doc: dict[str, Any], kind: str, queues: dict[str, Any], where: str) -> dict[str, Any]:
    """The object as Volcano's admission webhook would let it in (lavaflow's reading of it)."""
    import base64

    from lavaflow.kube.webhook import apply_json_patch, review

    ns = (doc.get("metadata") or {}).get("namespace") or "default"
    req = {"uid": "d", "operation": "CREATE", "object": doc, "namespace": ns}
    resp = review(req, kind, True, queues=queues)
    if resp.get("patch"):
        doc = apply_json_patch(doc, json.loads(base64.b64decode(resp["patch"])))
    check = review({**req, "object": doc}, kind, False, queues=queues)
    for r in (resp, check):
        if not r.get("allowed", True):
            raise InputError([f"{where}: refused by admission: {(r.get('status') or {}).get('message', r)}"])
    return doc


def load_scenario(paths: list[str], kube_jobs: bool = False) -> Scenario:
    """Check ``paths`` as ``lavaflow simulate`` does, and turn them into what each run creates;
    ``kube_jobs``: Kubernetes' own batch/v1 Jobs can be played (kube-controller-manager's job
    controller runs beside each system)."""
    from lavaflow.api.loader import Problems, _expand_lists, load_files, parse_documents
    from lavaflow.api.volcano import Queue
    from lavaflow.scheduler.framework.conf import VOLCANO_SHIPPED_CONF
    from lavaflow.sim.inputs import prepare

    sim = prepare(load_files(paths, False, []))
    if not any(type(it.obj).__name__ not in ("Node", "Queue", "Numatopology", "HyperNode") for it in sim.items):
        raise Skip("no workload: a cluster alone (for traces)")
    for it in sim.items:
        if any(k.startswith("lavaflow.io/") for k in getattr(it.obj.metadata, "annotations", None) or {}):
            raise Skip(
                f"{type(it.obj).__name__} {it.obj.name} is an elastic training job, run by lavaflow's elastic "
                "action and its work model, which Volcano does not have"
            )
    raw: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for p in paths:
        probs = Problems()
        for src, doc in _expand_lists(parse_documents(Path(p).read_text(), p, probs)):
            raw.setdefault((src.file, src.document), []).append(doc)
    sc = Scenario(name=" ".join(Path(p).name for p in paths))
    sc.conf = sim.conf_text if sim.conf_text is not None else VOLCANO_SHIPPED_CONF
    if sim.stream is not None:
        raise Skip("a workload trace: its jobs are lavaflow's elastic jobs")
    queues = {it.obj.name: it.obj for it in sim.items if type(it.obj).__name__ == "Queue"}
    for q, spec in DEFAULT_QUEUES.items():
        if q not in queues:
            queues[q] = Queue.model_validate({"metadata": {"name": q}, "spec": spec})
    for it in sim.items:
        obj, kind = it.obj, type(it.obj).__name__
        docs = raw.get((it.source.file, it.source.document), [])
        from_group = any(d.get("kind") == "NodeGroup" for d in docs)
        if kind == "Node":
            group = next((d for d in docs if d.get("kind") == "NodeGroup"), None)
            doc = _node_doc(obj, (group or {}).get("spec", {}).get("capacity") if group else None)
            if group is None:
                plain = next(d for d in docs if (d.get("metadata") or {}).get("name") == obj.name)
                doc["status"]["allocatable"] = {
                    k: str(v)
                    for k, v in ((plain.get("status") or {}).get("allocatable")
                                 or (plain.get("status") or {}).get("capacity") or {}).items()
                } or doc["status"]["allocatable"]  # fmt: skip
                # a kubelet always reports its pod slots (110 by default), as the simulator assumes
                doc["status"]["allocatable"].setdefault("pods", "110")
                doc["status"]["capacity"] = doc["status"]["allocatable"]
            sc.nodes.append(doc)
            sc.node_class[obj.name] = group["metadata"]["name"] if group else _node_signature(doc)
            annotations = obj.metadata.annotations or {}
            for key, failed in ((ann.FAIL_AT, True), (ann.RECOVER_AT, False)):
                if key in annotations:
                    sc.faults.append((ann.parse_duration(annotations[key]), obj.name, failed))
            continue
        if kind == "Numatopology" and from_group:
            from lavaflow.kube import codec

            sc.cluster.append(codec.encode(obj, kind_info("Numatopology")))
            continue
        doc = copy.deepcopy(next(d for d in docs if (d.get("metadata") or {}).get("name") == obj.name))
        api = f"{doc.get('apiVersion', '')}/{doc.get('kind')}"
        for prefix, why in NOT_VOLCANO.items():
            if api.startswith(prefix) and not (kube_jobs and prefix == "batch/v1/Job"):
                raise Skip(f"{doc.get('kind')} {obj.name}: {why}")
        if doc.get("kind") == "ConfigMap" and "volcano-scheduler.conf" in (doc.get("data") or {}):
            continue
        if doc.get("kind") == "PriorityClass":
            doc["apiVersion"] = "scheduling.k8s.io/v1"
            sc.priority_classes.append(obj.name)
        where = f"{it.source}: {doc.get('kind')}/{obj.name}"
        if doc.get("kind") in ("Job", "PodGroup", "Queue") and "volcano.sh" in doc.get("apiVersion", ""):
            doc = _admit(doc, doc["kind"], queues, where)
        res = kind_of_manifest(doc)
        if not res.namespaced or doc.get("kind") in CLUSTER_KINDS:
            sc.cluster.append(doc)
            continue
        meta = doc.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        sc.namespaces.add(meta["namespace"])
        annotations = meta.get("annotations") or {}
        if ann.SPAWNED_BY in annotations:
            sc.held.append(doc)
            continue
        sc.workload.append(Timed(it.submit_at, doc, it.delete_at))
    names = {(d.get("metadata") or {}).get("name") for d in sc.cluster if d.get("kind") == "Queue"}
    sc.cluster[:0] = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q}, "spec": dict(spec)}
        for q, spec in DEFAULT_QUEUES.items()
        if q not in names
    ]
    sc.faults.sort()
    sc.workload.sort(key=lambda t: t.at)
    return sc


# --------------------------------------------------------------------------- one run


class Recorder:
    """Watches pods, PodGroups and Jobs of the whole server and keeps what changed, and when."""

    def __init__(self, client: KubeClient, scale: float, default_duration: float = 60.0) -> None:
        self.client, self.scale, self.default_duration = client, scale, default_duration
        self.lives: dict[str, dict[str, Any]] = {}  # uid -> running_at, deleted_at, duration, exit code
        self.t0 = time.monotonic()
        self.last_change = self.t0
        self.binds: list[dict[str, Any]] = []
        self.evictions: list[dict[str, Any]] = []
        self.pg_phases: dict[str, list[tuple[float, str]]] = {}
        self.pg_conditions: dict[str, set[tuple[str, str, str]]] = {}
        self.pg_condition_phase: dict[str, dict[str, str]] = {}  # gang -> condition -> phase when first seen
        self.job_phases: dict[str, list[tuple[float, str]]] = {}
        self.job_retries: dict[str, int] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # name -> last seen (per name: the newest incarnation)
        self.pg_owner: dict[str, str] = {}  # PodGroup name -> gang
        self._bound: set[str] = set()
        self._evicted: set[str] = set()
        self._tasks: list[asyncio.Task] = []

    def now(self) -> float:
        return round((time.monotonic() - self.t0) / self.scale, 3)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for path, fn in (
            ("/api/v1/pods", self._pod),
            ("/apis/scheduling.volcano.sh/v1beta1/podgroups", self._pg),
            ("/apis/batch.volcano.sh/v1alpha1/jobs", self._job),
        ):
            self._tasks.append(loop.create_task(list_watch(self.client, path, fn)))

    async def stop(self) -> None:
        from lavaflow.kube.tasks import cancel_and_wait

        await cancel_and_wait(self._tasks)

    def gang_of_group(self, group: str) -> str:
        return self.pg_owner.get(group, group)

    def _pod(self, etype: str, pod: dict[str, Any]) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        name = f"{meta['namespace']}/{meta['name']}"
        uid = meta.get("uid", "")
        annotations = meta.get("annotations") or {}
        group = annotations.get("scheduling.k8s.io/group-name", "")
        task = annotations.get("volcano.sh/task-spec", "")
        life = self.lives.setdefault(uid, {"name": name})
        if status.get("phase") == "Running":
            life.setdefault("running_at", self.now())
        if etype == "DELETED" or meta.get("deletionTimestamp"):
            life.setdefault("deleted_at", self.now())
        raw = annotations.get(ann.DURATION)
        life["duration"] = ann.parse_duration(raw, allow_inf=True) if raw is not None else self.default_duration
        life["code"] = int(annotations.get(ann.EXIT_CODE, "0"))
        before = self.pods.get(name)
        if before is None or etype == "DELETED" or (before["phase"], before["uid"]) != (status.get("phase"), uid):
            self.last_change = time.monotonic()
        if etype != "DELETED":
            self.pods[name] = {"phase": status.get("phase", "Pending"), "group": group, "task": task, "uid": uid}
        else:
            self.pods.setdefault(name, {"phase": "Pending", "group": group, "task": task, "uid": uid})["deleted"] = True
        node = spec.get("nodeName")
        if node and uid not in self._bound:
            self._bound.add(uid)
            self.last_change = time.monotonic()
            self.binds.append({"t": self.now(), "pod": name, "node": node, "group": group, "task": task})
        disrupted = any(
            c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if disrupted and uid not in self._evicted:
            self._evicted.add(uid)
            self.evictions.append({"t": self.now(), "pod": name, "node": node or "", "group": group, "task": task})

    def _pg(self, etype: str, pg: dict[str, Any]) -> None:
        meta = pg["metadata"]
        name = meta["name"]
        owners = meta.get("ownerReferences") or []
        owner = next((o for o in owners if o.get("kind") in ("Job", "Pod")), None)
        gang = f"{meta['namespace']}/{owner['name'] if owner and owner['kind'] == 'Job' else ''}"
        if owner is not None and owner["kind"] == "Pod":
            gang = f"{meta['namespace']}/pod:{owner['name']}"
        elif owner is None:
            gang = f"{meta['namespace']}/{name}"
        self.pg_owner[name] = gang
        if etype == "DELETED":
            self.last_change = time.monotonic()
            self.pg_phases.setdefault(gang, []).append((self.now(), "(deleted)"))
            return
        status = pg.get("status") or {}
        phases = self.pg_phases.setdefault(gang, [])
        phase = status.get("phase") or "Pending"
        if not phases or phases[-1][1] != phase:
            phases.append((self.now(), phase))
            self.last_change = time.monotonic()
        conds = self.pg_conditions.setdefault(gang, set())
        for c in status.get("conditions") or []:
            cond = (c.get("type", ""), c.get("status", ""), c.get("reason", ""))
            if cond not in conds:
                conds.add(cond)
                self.pg_condition_phase.setdefault(gang, {})["/".join(cond)] = phase
                self.last_change = time.monotonic()

    def _job(self, etype: str, job: dict[str, Any]) -> None:
        if etype == "DELETED":
            return
        meta, status = job["metadata"], job.get("status") or {}
        name = f"{meta['namespace']}/{meta['name']}"
        phase = (status.get("state") or {}).get("phase") or ""
        phases = self.job_phases.setdefault(name, [])
        retries = int(status.get("retryCount") or 0)
        if (phase and (not phases or phases[-1][1] != phase)) or self.job_retries.get(name) != retries:
            self.last_change = time.monotonic()
        if phase and (not phases or phases[-1][1] != phase):
            phases.append((self.now(), phase))
        self.job_retries[name] = retries

    def result(self, tie: float = 0.0) -> dict[str, Any]:
        """What the run did, with gangs named by their Job (or bare pod) rather than PodGroup.

        A pod deleted while it ran, within ``tie`` seconds of when its duration would have ended
        it, counts as ended that way: pods due to end together end one by one on the server, in an
        order nothing fixes, and whether a Job's controller saw one of them still running when it
        ended the Job is a tie-break, not a behaviour."""

        def gang(group: str, pod: str) -> str:
            ns = pod.split("/", 1)[0]
            return self.gang_of_group(group) if group else f"{ns}/pod:{pod.split('/', 1)[1]}"

        binds = [{**b, "gang": gang(b["group"], b["pod"])} for b in self.binds]
        evictions = [{**e, "gang": gang(e["group"], e["pod"])} for e in self.evictions]
        pods_final: dict[str, Counter] = {}
        for name, p in self.pods.items():
            key = f"{gang(p['group'], name)} {p['task']}".strip()
            phase = "Deleted" if p.get("deleted") and p["phase"] in ("Pending", "Running") else p["phase"]
            life = self.lives.get(p.get("uid", ""), {})
            if phase == "Deleted" and "running_at" in life and "deleted_at" in life:
                if abs(life["running_at"] + life["duration"] - life["deleted_at"]) <= tie:
                    phase = "Succeeded" if life["code"] == 0 else "Failed"
            pods_final.setdefault(key, Counter())[phase] += 1
        return {
            "binds": binds,
            "evictions": evictions,
            "pg_phases": self.pg_phases,
            "pg_conditions": {k: sorted(v) for k, v in self.pg_conditions.items()},
            "pg_condition_phases": self.pg_condition_phase,
            "job_phases": self.job_phases,
            "job_retries": self.job_retries,
            "pods_final": {k: dict(sorted(v.items())) for k, v in sorted(pods_final.items())},
        }


async def _request(client: KubeClient, method: str, path: str, **kw: Any) -> Any:
    for attempt in range(5):
        try:
            return await client.request(method, path, **kw)
        except ApiError as exc:
            if exc.already_exists or exc.not_found:
                return None
            if exc.status in (409, 429, 500, 503, 504) and attempt < 4:
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            raise


def _collection(api: str, plural: str, ns: str | None) -> str:
    base = "/api/v1" if api == "v1" else f"/apis/{api}"
    return f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"


async def wipe(client: KubeClient, namespaces: set[str], priority_classes: list[str]) -> None:
    """Delete everything a run may have made (no garbage collector or namespace controller runs)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for _ in range(20):
        left = 0
        for ns in sorted(namespaces):
            for api, plural in WIPED:
                path = _collection(api, plural, ns)
                with contextlib.suppress(ApiError):
                    await client.request("DELETE", path, body=body)
                with contextlib.suppress(ApiError):
                    items = (await client.request("GET", path)).get("items", [])
                    if plural == "configmaps":
                        items = [i for i in items if i["metadata"]["name"] != "kube-root-ca.crt"]
                    left += len(items)
                    for i in items:  # finalizers keep some: lift them
                        if i["metadata"].get("finalizers"):
                            with contextlib.suppress(ApiError):
                                await client.request(
                                    "PATCH",
                                    f"{path}/{i['metadata']['name']}",
                                    body={"metadata": {"finalizers": None}},
                                    content_type="application/merge-patch+json",
                                )
        for api, plural in WIPED_CLUSTER:
            path = _collection(api, plural, None)
            with contextlib.suppress(ApiError):
                await client.request("DELETE", path, body=body)
            with contextlib.suppress(ApiError):
                left += len((await client.request("GET", path)).get("items", []))
        for pc in priority_classes:
            with contextlib.suppress(ApiError):
                await client.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc}")
        if not left:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("the server still holds objects of an earlier run after 20 attempts to delete them")


async def create(client: KubeClient, doc: dict[str, Any]) -> dict[str, Any] | None:
    res = kind_of_manifest(doc)
    ns = (doc.get("metadata") or {}).get("namespace") if res.namespaced else None
    return await _request(client, "POST", res.path(ns), body=doc)


async def set_up(client: KubeClient, sc: Scenario) -> None:
    """Nodes, namespaces and the cluster-scoped objects, before any process starts."""
    for ns in sorted(sc.namespaces - {"default"}):
        await create(client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for doc in sc.nodes:
        await create(client, copy.deepcopy(doc))
        # TaintNodesByCondition taints new nodes not-ready; the node lifecycle controller (not run)
        # would lift it from a Ready node: put back the scenario's own taints
        await _request(
            client,
            "PATCH",
            f"/api/v1/nodes/{doc['metadata']['name']}",
            body={"spec": {"taints": doc["spec"]["taints"] or None}},
            content_type="application/merge-patch+json",
        )
    for doc in sc.cluster:
        await create(client, copy.deepcopy(doc))


async def quota_status(client: KubeClient, doc: dict[str, Any]) -> None:
    """A ResourceQuota's status as kube-controller-manager's quota controller (not run) first writes it."""
    meta = doc["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/resourcequotas/{meta['name']}/status"
    hard = (doc.get("spec") or {}).get("hard") or {}
    body = {"status": {"hard": hard, "used": {k: "0" for k in hard}}}
    await _request(client, "PATCH", path, body=body, content_type="application/merge-patch+json")


async def node_fault(client: KubeClient, node: str, failed: bool) -> None:
    """NotReady with the unreachable taints and its pods deleted, or Ready again."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cond = {
        "type": "Ready",
        "status": "False" if failed else "True",
        "reason": "SimulatedFailure" if failed else "SimulatedRecovery",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    await _request(
        client,
        "PATCH",
        f"/api/v1/nodes/{node}/status",
        body={"status": {"conditions": [cond]}},
        content_type="application/strategic-merge-patch+json",
    )
    cur = await _request(client, "GET", f"/api/v1/nodes/{node}")
    taints = [
        t for t in ((cur or {}).get("spec") or {}).get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")
    ]
    if failed:
        taints += [{"key": "node.kubernetes.io/unreachable", "effect": e} for e in ("NoSchedule", "NoExecute")]
    await _request(
        client,
        "PATCH",
        f"/api/v1/nodes/{node}",
        body={"spec": {"taints": taints or None}},
        content_type="application/merge-patch+json",
    )
    if failed:
        pods = await _request(client, "GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"})
        for p in (pods or {}).get("items", []):
            if (p.get("status") or {}).get("phase") in ("Pending", "Running"):
                await force_delete(client, p["metadata"]["namespace"], p["metadata"]["name"])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 - a local health endpoint
            return bool(resp.status == 200)
    except Exception:  # noqa: BLE001 - not up yet
        return False


HEALTH = {
    "volcano": ["http://127.0.0.1:11251/healthz", "http://127.0.0.1:11252/healthz"],
    "lavaflow": ["http://127.0.0.1:18080/readyz", "http://127.0.0.1:18081/readyz"],
}


KCM_HEALTH = "https://127.0.0.1:10357/healthz"


def kcm_cmd(binary: str, kubeconfig: str) -> list[str]:
    """kube-controller-manager with only what batch/v1 Jobs need: the job controller, and the
    garbage collector that deletes a Job's pods with it."""
    return [
        binary, f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=10357",
        "--bind-address=127.0.0.1", "--controllers=job-controller,garbage-collector-controller",
        "--kube-api-qps=2000", "--kube-api-burst=2000", "-v=1",
    ]  # fmt: skip


def _kcm_healthy() -> bool:
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(KCM_HEALTH, timeout=1, context=ctx) as resp:  # noqa: S310 - local
            return bool(resp.status == 200)
    except Exception:  # noqa: BLE001 - not up yet
        return False


async def start_system(system: str, args: argparse.Namespace, conf: Path, logdir: Path, seed: int = 0) -> list[Proc]:
    opts = argparse.Namespace(
        vc_scheduler=str(Path(args.volcano_bin) / "vc-scheduler"),
        vc_controller_manager=str(Path(args.volcano_bin) / "vc-controller-manager"),
        qps=args.qps,
        vc_verbosity=args.vc_verbosity,
        scheduler_conf=str(conf),
        schedule_period=f"{args.period}s",
        lavaflow_controller_arg=[],
    )
    which = "volcano" if system == "volcano" else "lavaflow-volcano"
    health = ["--enable-healthz=true"] if system == "volcano" else []
    seeded = ["--node-choice-seed", str(seed)] if seed and system == "lavaflow" else []
    procs = [
        Proc(f"{system}-controller", controller_cmd(opts, "volcano" if system == "volcano" else "lavaflow", args.kc) + health, logdir),
        Proc(f"{system}-scheduler", scheduler_cmd(opts, which, args.kc) + health + seeded, logdir),
    ]  # fmt: skip
    if args.kube_controller_manager:
        procs.append(Proc("kube-controller-manager", kcm_cmd(args.kube_controller_manager, args.kc), logdir))
    deadline = time.monotonic() + 60
    while not all(_healthy(u) for u in HEALTH[system]) or (args.kube_controller_manager and not _kcm_healthy()):
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            for p in procs:
                p.stop()
            raise RuntimeError(f"{system} not healthy after 60 s; see {[str(p.log) for p in procs]}")
        await asyncio.sleep(0.2)
    await asyncio.sleep(2 * args.period)  # a first cycle over the synced caches
    return procs


async def play(
    client: KubeClient, sc: Scenario, system: str, args: argparse.Namespace, tmp: Path, seed: int = 0
) -> dict[str, Any]:
    await wipe(client, sc.namespaces, sc.priority_classes)
    await set_up(client, sc)
    for doc in sc.cluster:
        if doc.get("kind") == "ResourceQuota":
            await quota_status(client, doc)
    # (a directory of its own: vc-scheduler watches the configuration's directory and reloads on
    # every change in it, and the processes' logs written beside it kept it reloading)
    (tmp / "conf").mkdir(exist_ok=True)
    conf = tmp / "conf" / "volcano-scheduler.conf"
    conf.write_text(sc.conf)
    scale = sc.scale
    procs = await start_system(system, args, conf, tmp, seed)
    rec = Recorder(client, scale, args.default_duration)
    kubelet = FakeKubelet(client, time_scale=scale, default_duration=args.default_duration, held=sc.held)
    pending: set[asyncio.Task] = set()
    try:
        rec.start()
        kubelet.start()
        rec.t0 = time.monotonic()

        async def at(t: float, coro) -> None:
            await asyncio.sleep(max(0.0, rec.t0 + t * scale - time.monotonic()))
            await coro

        loop = asyncio.get_running_loop()
        for w in sc.workload:
            pending.add(loop.create_task(at(w.at, create(client, copy.deepcopy(w.doc)))))
            if w.delete_at is not None:
                res = kind_of_manifest(w.doc)
                path = res.path(w.doc["metadata"]["namespace"], w.doc["metadata"]["name"])
                pending.add(loop.create_task(at(w.delete_at, _request(client, "DELETE", path))))
        for t, node, failed in sc.faults:
            pending.add(loop.create_task(at(t, node_fault(client, node, failed))))
        deadline = rec.t0 + args.timeout
        while time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            for p in procs:
                p.check()
            if any(not t.done() for t in pending):
                continue
            running = sum(1 for p in rec.pods.values() if p["phase"] == "Running" and not p.get("deleted"))
            finite = running - _unending(rec, sc, args)
            if finite <= 0 and time.monotonic() - rec.last_change > args.quiet:
                break
        timed_out = time.monotonic() >= deadline
        for t in pending:
            t.cancel()
        for t in pending:
            with contextlib.suppress(BaseException):
                await t
        out = rec.result(tie=2 * args.period / scale)
        out["timed_out"] = timed_out
        out["wall_s"] = round(time.monotonic() - rec.t0, 1)
    finally:
        await kubelet.stop()
        await rec.stop()
        for p in reversed(procs):
            p.stop()
    out["logs"] = [str(p.log) for p in procs]
    await wipe(client, sc.namespaces, sc.priority_classes)
    return out


def _unending(rec: Recorder, sc: Scenario, args: argparse.Namespace) -> int:
    """Running pods that never end by themselves (duration inf)."""
    forever = _forever_pods(sc)
    n = 0
    for name, p in rec.pods.items():
        if p["phase"] == "Running" and not p.get("deleted"):
            base = name.split("/", 1)[1]
            if base in forever or any(base.startswith(f"{j}-") for j in forever):
                n += 1
            elif math.isinf(args.default_duration) and base not in _timed_pods(sc):
                n += 1
    return n


def horizon(sc: Scenario, default_duration: float) -> float:
    """An upper bound on when the scenario ends if nothing runs side by side: the last arrival or
    fault plus every workload object's longest pod, one after the other."""
    last = max([w.at for w in sc.workload] + [t for t, _, _ in sc.faults] + [0.0])
    total = 0.0
    for w in sc.workload + [Timed(0, h) for h in sc.held]:
        ds = [
            ann.parse_duration(d, allow_inf=True) if d is not None else default_duration for d in _pod_durations(w.doc)
        ]
        finite = [d for d in ds if math.isfinite(d)]
        total += max(finite, default=0.0)
    return last + total


def time_scale(sc: Scenario, args: argparse.Namespace) -> float:
    """``--time-scale``, or with ``auto`` the largest scale up to 0.1 that plays the scenario's
    horizon in ``--target`` wall seconds (hours-long jobs run at 1/100 or less)."""
    if args.time_scale != "auto":
        return float(args.time_scale)
    return min(0.1, args.target / max(horizon(sc, args.default_duration), 1.0))


def _pod_durations(doc: dict[str, Any]) -> list[str | None]:
    if doc.get("kind") == "Pod":
        return [((doc.get("metadata") or {}).get("annotations") or {}).get(ann.DURATION)]
    tasks = (doc.get("spec") or {}).get("tasks") or []
    return [
        (((t.get("template") or {}).get("metadata") or {}).get("annotations") or {}).get(ann.DURATION) for t in tasks
    ]


def _forever_pods(sc: Scenario) -> set[str]:
    out = set()
    for w in sc.workload + [Timed(0, h) for h in sc.held]:
        for d in _pod_durations(w.doc):
            if d is not None and math.isinf(ann.parse_duration(d, allow_inf=True)):
                out.add(w.doc["metadata"]["name"])
    return out


def _timed_pods(sc: Scenario) -> set[str]:
    return {
        w.doc["metadata"]["name"]
        for w in sc.workload + [Timed(0, h) for h in sc.held]
        if any(d is not None for d in _pod_durations(w.doc))
    }


# --------------------------------------------------------------------------- the comparison


def waves(events: list[dict[str, Any]], width: float) -> dict[str, list[dict[str, Any]]]:
    """Per gang, its events grouped into waves: each starts with an event more than ``width``
    after the previous wave's start."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(events, key=lambda e: e["t"]):
        ws = out.setdefault(e["gang"], [])
        if not ws or e["t"] - ws[-1]["t"] > width:
            ws.append({"t": e["t"], "events": []})
        ws[-1]["events"].append(e)
    return out


def _shape(wave: dict[str, Any], node_class: dict[str, str]) -> list[Any]:
    """A wave's bindings as any tie-break between equal nodes gives them: per task the count, and
    per node kind the sorted pods-per-node counts."""
    tasks = Counter(e["task"] for e in wave["events"])
    per_node = Counter(e.get("node", "") for e in wave["events"])  # (evictions stored before 2026-11-29 have none)
    kinds: dict[str, list[int]] = {}
    for node, n in per_node.items():
        kinds.setdefault(node_class.get(node, node), []).append(n)
    return [sorted(tasks.items()), sorted((k, sorted(v)) for k, v in kinds.items())]


def _same_events(
    xa: list[dict[str, Any]], xb: list[dict[str, Any]], node_class: dict[str, str], tol: float, tasks_only: bool
) -> bool:
    """Whether two runs' waves of one gang hold the same events, each within ``tol`` of the
    other's (as ``close``: absolutely, or since the event before it), only cut differently: a
    wave is what comes within ``tol`` of its first event, so a pod bound 0.7 s later in one run
    can open a second wave there and fall inside the first in the other."""
    ea = sorted((e for w in xa for e in w["events"]), key=lambda e: e["t"])
    eb = sorted((e for w in xb for e in w["events"]), key=lambda e: e["t"])
    if len(ea) != len(eb):
        return False
    sa, sb = _shape({"events": ea}, node_class), _shape({"events": eb}, node_class)
    if (sa[:1] if tasks_only else sa) != (sb[:1] if tasks_only else sb):
        return False
    return all(
        close(a["t"], b["t"], (ea[k - 1]["t"], eb[k - 1]["t"]) if k else None, tol)
        for k, (a, b) in enumerate(zip(ea, eb, strict=True))
    )


def close(ta: float, tb: float, prev: tuple[float, float] | None, tol: float) -> bool:
    """Whether two runs' times of one step agree: within ``tol`` of each other, or — after an
    earlier step of the same history at ``prev`` (one time per run) — taking within ``tol`` of the
    same time since it. Each step waits up to a period for the next scheduling cycle in either
    run, so a chain of steps (a driver, its executors, the next application) drifts by up to a
    period a step: each step is held to two periods, not the drift of the whole chain."""
    if abs(ta - tb) <= tol:
        return True
    return prev is not None and abs((ta - prev[0]) - (tb - prev[1])) <= tol


def aligned(a: list[tuple[float, str]], b: list[tuple[float, str]], tol: float) -> bool:
    """Whether two phase histories ((time, phase), in order) agree: the same phases in the same
    order, each step's time agreeing by ``close``, except that a phase one run held for less than
    ``tol`` (until its next phase) may be missing from the other — below the comparison's time
    resolution (a PodGroup Running for a second before a node failure restarts its Job, a Job
    Completing for a few milliseconds) —, and with it the return to the phase before it (a
    PodGroup Running, Pending for a period while a failed node's pods are made again, Running
    again: where a scheduling cycle fell between the deletions and the new bindings)."""

    def short(h: list[tuple[float, str]], i: int) -> bool:
        return i + 1 < len(h) and h[i + 1][0] - h[i][0] < tol

    seen: dict[tuple[int, int, int, int], bool] = {}

    def fit(i: int, j: int, li: int, lj: int) -> bool:
        """a[i:] against b[j:], the last matched pair being (li, lj) (-1: none yet)."""
        key = (i, j, li, lj)
        if key in seen:
            return seen[key]
        prev = (a[li][0], b[lj][0]) if li >= 0 else None
        if i == len(a) and j == len(b):
            ok = True
        else:
            ok = (
                (i < len(a) and j < len(b) and a[i][1] == b[j][1] and close(a[i][0], b[j][0], prev, tol)
                 and fit(i + 1, j + 1, i, j))
                or (i < len(a) and short(a, i) and fit(i + 1, j, li, lj))
                or (j < len(b) and short(b, j) and fit(i, j + 1, li, lj))
                # back to the phase last matched, after short ones the other run did not show
                or (i < len(a) and li >= 0 and li < i - 1 and a[i][1] == a[li][1] and fit(i + 1, j, li, lj))
                or (j < len(b) and lj >= 0 and lj < j - 1 and b[j][1] == b[lj][1] and fit(i, j + 1, li, lj))
            )  # fmt: skip
        seen[key] = ok
        return ok

    return fit(0, 0, -1, -1)


def _history(h: list[tuple[float, str]]) -> str:
    return " → ".join(f"{p} ({t:g})" for t, p in h) or "(none)"


DELIBERATE = "(deliberate, docs/volcano-examples.md) "


def _explains_enqueue(a: dict[str, Any], b: dict[str, Any], gang: str) -> bool:
    """Whether the only difference in ``gang``'s conditions is an Unschedulable condition the
    second run (lavaflow) wrote while the PodGroup was still Pending, where the first (Volcano)
    wrote none: lavaflow explains a refused enqueue in the PodGroup's conditions, Volcano in an
    Event only (documented as deliberate)."""
    ca = {tuple(c) for c in a["pg_conditions"].get(gang, [])}
    cb = {tuple(c) for c in b["pg_conditions"].get(gang, [])}
    extra = cb - ca
    seen = (b.get("pg_condition_phases") or {}).get(gang, {})
    return (
        bool(extra)
        and ca <= cb
        and not any(c[0] == "Unschedulable" for c in ca)
        and all(c[0] == "Unschedulable" and seen.get("/".join(c)) == "Pending" for c in extra)
    )


def compare(
    a: dict[str, Any],
    b: dict[str, Any],
    period: float,
    node_class: dict[str, str],
    names: tuple[str, str] = SYSTEMS,
) -> list[str]:
    """The disagreements between two runs' results (``Recorder.result``); ``period`` is the
    scheduling period in scenario seconds: each step's time agrees within two of them (``close``),
    and a gang's bindings (or evictions) less than two apart form one wave."""
    tol = 2 * period + 1e-6
    out: list[str] = []
    for what, key in (("bindings", "binds"), ("evictions", "evictions")):
        wa, wb = waves(a[key], tol), waves(b[key], tol)
        for gang in sorted(set(wa) | set(wb)):
            xa, xb = wa.get(gang, []), wb.get(gang, [])
            if xa != xb and _same_events(xa, xb, node_class, tol, key == "evictions"):
                continue  # the same bindings at the same times, cut into waves differently (into as many, too)
            if len(xa) != len(xb):
                ta = ", ".join(f"{len(w['events'])} at {w['t']:g} s" for w in xa) or "none"
                tb = ", ".join(f"{len(w['events'])} at {w['t']:g} s" for w in xb) or "none"
                out.append(f"{what} of {gang}: {names[0]} {ta}; {names[1]} {tb}")
                continue
            for i, (va, vb) in enumerate(zip(xa, xb, strict=True)):
                sa, sb = _shape(va, node_class), _shape(vb, node_class)
                if key == "evictions":
                    sa, sb = sa[:1], sb[:1]  # which nodes the victims were on follows from the bindings
                if sa != sb:
                    out.append(f"{what} of {gang}, wave {i + 1}: {names[0]} {sa}; {names[1]} {sb}")
                prev = (xa[i - 1]["t"], xb[i - 1]["t"]) if i else None
                if not close(va["t"], vb["t"], prev, tol):
                    out.append(
                        f"{what} of {gang}, wave {i + 1}: at {va['t']:g} s under {names[0]}, {vb['t']:g} s under "
                        f"{names[1]} (more than {tol:g} s apart)"
                    )
    for what, key in (("Job", "job_phases"), ("PodGroup", "pg_phases")):
        for name in sorted(set(a[key]) | set(b[key])):
            ha = [(float(t), p) for t, p in a[key].get(name, [])]
            hb = [(float(t), p) for t, p in b[key].get(name, [])]
            if not aligned(ha, hb, tol):
                out.append(f"{what} {name} phases: {names[0]} {_history(ha)}; {names[1]} {_history(hb)}")
    for name in sorted(set(a["pg_conditions"]) | set(b["pg_conditions"])):
        ca, cb = a["pg_conditions"].get(name, []), b["pg_conditions"].get(name, [])
        if [list(c) for c in ca] != [list(c) for c in cb]:
            note = DELIBERATE if _explains_enqueue(a, b, name) else ""
            out.append(f"{note}PodGroup {name} conditions: {names[0]} {ca}; {names[1]} {cb}")
    for name in sorted(set(a["job_retries"]) | set(b["job_retries"])):
        ra, rb = a["job_retries"].get(name), b["job_retries"].get(name)
        if ra != rb:
            out.append(f"Job {name} retryCount: {names[0]} {ra}; {names[1]} {rb}")
    for key in sorted(set(a["pods_final"]) | set(b["pods_final"])):
        fa, fb = a["pods_final"].get(key), b["pods_final"].get(key)
        if fa != fb:
            out.append(f"pods of {key} at the end: {names[0]} {fa}; {names[1]} {fb}")
    return out


# --------------------------------------------------------------------------- the command


def missing(args: argparse.Namespace) -> str | None:
    if not args.kubeconfig or not Path(args.kubeconfig).exists():
        return "no kubeconfig (--kubeconfig, $LAVAFLOW_TEST_KUBECONFIG or $KUBECONFIG)"
    if not args.volcano_bin:
        return "no Volcano binaries (--volcano-bin DIR or $LAVAFLOW_TEST_VOLCANO_BIN)"
    for b in ("vc-scheduler", "vc-controller-manager"):
        if not os.access(Path(args.volcano_bin) / b, os.X_OK):
            return f"{Path(args.volcano_bin) / b} is missing or not executable"
    if args.kube_controller_manager and not os.access(args.kube_controller_manager, os.X_OK):
        return f"--kube-controller-manager {args.kube_controller_manager} is missing or not executable"
    return None


# CRDs vc-controller-manager (main) lists before it starts any controller: without them it waits for ever
VOLCANO_ONLY_CRDS = ("cronjobs.batch.volcano.sh", "colocationconfigurations.config.volcano.sh")


async def volcano_crds_problem(client: KubeClient) -> str | None:
    """Why the server's CRDs are not Volcano's as it ships them, or None. Volcano's PodGroup CRD
    has no status subresource and vc-scheduler writes a PodGroup's status with whole-object
    updates, which a CRD with the subresource (lavaflow's) silently drops: Volcano's gangs would
    then never leave Pending and every comparison would be against a Volcano that cannot work."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    absent = []
    for name in ("podgroups.scheduling.volcano.sh", *VOLCANO_ONLY_CRDS):
        try:
            crd = await client.request("GET", f"{base}/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            absent.append(name)
            continue
        if name.startswith("podgroups.") and any(
            (v.get("subresources") or {}).get("status") is not None for v in crd["spec"]["versions"]
        ):
            return (
                "the server's PodGroup CRD has a status subresource (lavaflow's, not Volcano's): "
                "vc-scheduler's PodGroup status writes would be dropped"
            )
    if absent:
        return f"Volcano's CRDs are not installed: {', '.join(absent)} missing"
    return None


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="*", help="scenario files (each played on its own; join files with '+')")
    ap.add_argument(
        "--random",
        metavar="SEEDS",
        help="also the random scenarios of tests/invariants.py (issue 15) of these seeds: 0-29 or 3,7,11",
    )
    ap.add_argument("--random-dir", help="write the random scenarios here (default: a temporary directory)")
    ap.add_argument("--kubeconfig", default=os.environ.get("LAVAFLOW_TEST_KUBECONFIG") or os.environ.get("KUBECONFIG"))
    ap.add_argument("--volcano-bin", default=os.environ.get("LAVAFLOW_TEST_VOLCANO_BIN"), help="dir of vc-* binaries")
    ap.add_argument(
        "--kube-controller-manager",
        default=os.environ.get("LAVAFLOW_TEST_KUBE_CONTROLLER_MANAGER"),
        help="a kube-controller-manager binary: its job controller (and garbage collector) run beside each "
        "system, so that scenarios with Kubernetes' batch/v1 Jobs are played (skipped without it)",
    )
    ap.add_argument("--time-scale", default="auto", help="wall seconds per scenario second, or auto (see --target)")
    ap.add_argument(
        "--target", type=float, default=90.0, help="with --time-scale auto: wall seconds a scenario's horizon takes"
    )
    ap.add_argument("--period", type=float, default=1.0, help="scheduling period of both schedulers (wall s)")
    ap.add_argument("--quiet", type=float, default=8.0, help="wall seconds without change that end a run")
    ap.add_argument("--timeout", type=float, default=300.0, help="wall seconds a run may take at most")
    ap.add_argument("--default-duration", type=float, default=60.0, help="run time of pods without a duration")
    ap.add_argument("--order", default="volcano,lavaflow")
    ap.add_argument(
        "--volcano-runs",
        type=int,
        default=3,
        help="play the scenario under Volcano up to this many times while lavaflow differs from every run "
        "(Volcano breaks ties at random: lavaflow agrees when it did what one of them did)",
    )
    ap.add_argument(
        "--lavaflow-runs",
        type=int,
        default=2,
        help="likewise under lavaflow, each run with another --node-choice-seed (its draws of the same ties)",
    )
    ap.add_argument("--qps", type=float, default=2000.0)
    ap.add_argument("--vc-verbosity", type=int, default=3)
    ap.add_argument("--json", help="append each scenario's runs and verdict (one JSON object a line)")
    ap.add_argument("--logs", help="keep the processes' logs in this directory")
    ap.add_argument(
        "--recompare",
        metavar="JSONL",
        help="compare again the runs a --json file holds (no server needed; the scenario files are read again)",
    )
    return ap


def verdict(
    runs: dict[str, Any],
    extra: list[dict[str, Any]],
    period: float,
    node_class: dict[str, str],
    lavaflow_extra: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The differences between lavaflow's runs and Volcano's. Volcano breaks ties at random
    (between nodes of equal score, and between a Job's pods of equal index by their random UIDs);
    with Volcano's node choice lavaflow breaks the same ties the same way, so each run of either
    is one draw of what those tie-breaks allow, and the comparison is between the sets of draws:
    each item compared (a gang's wave of bindings or evictions, a PodGroup's or Job's phases,
    conditions, retries, outcomes) agrees when some pair of a lavaflow run and a Volcano run
    agrees on it. What is left is what every pair differs in, as the closest pair shows it.
    ``extra`` are Volcano's other runs of the scenario, ``lavaflow_extra`` lavaflow's (with other
    seeds)."""
    pairs: list[list[str]] = []
    for lf in [runs["lavaflow"], *(lavaflow_extra or [])]:
        for vc in [runs["volcano"], *extra]:
            diffs = compare(vc, lf, period, node_class)
            diffs += [f"timed out: {s}" for s, r in (("volcano", vc), ("lavaflow", lf)) if r["timed_out"]]
            pairs.append(diffs)
    common = set.intersection(*({_item(d) for d in diffs} for diffs in pairs))
    best = min(pairs, key=lambda d: (_open(d), len(d)))
    return [d for d in best if _item(d) in common]


def _item(diff: str) -> str:
    """What a difference is about (the text before its first ': '): a gang's wave of bindings,
    a PodGroup's phases, ..."""
    return diff.removeprefix(DELIBERATE).split(": ", 1)[0]


def _open(diffs: list[str]) -> int:
    """How many of ``diffs`` are not documented as deliberate."""
    return sum(1 for d in diffs if not d.startswith(DELIBERATE))


def _verdict(diffs: list[str]) -> str:
    return "differ" if _open(diffs) else "agree" if not diffs else "agree (deliberate differences)"


async def run_one(client: KubeClient, files: list[str], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    name = " + ".join(files)
    try:
        sc = load_scenario(files, kube_jobs=bool(args.kube_controller_manager))
    except Skip as exc:
        return {"scenario": name, "verdict": "skipped", "reason": str(exc)}
    sc.scale = time_scale(sc, args)
    runs: dict[str, Any] = {}
    for system in args.order.split(","):
        print(f"  {name}: {system} (time scale {sc.scale:g}) ...", flush=True)
        runs[system] = await play(client, sc, system, args, tmp)
    period = args.period / sc.scale
    extra: list[dict[str, Any]] = []
    again: list[dict[str, Any]] = []
    diffs = verdict(runs, extra, period, sc.node_class)
    # while they differ, draw again, one system after the other, up to each one's number of runs
    while _open(diffs) and (1 + len(extra) < args.volcano_runs or 1 + len(again) < args.lavaflow_runs):
        system = "volcano" if len(extra) <= len(again) and 1 + len(extra) < args.volcano_runs else "lavaflow"
        if 1 + len(again) >= args.lavaflow_runs:
            system = "volcano"
        print(f"  {name}: {system} again ({len(diffs)} differences) ...", flush=True)
        if system == "volcano":
            extra.append(await play(client, sc, "volcano", args, tmp))
        else:
            again.append(await play(client, sc, "lavaflow", args, tmp, seed=1 + len(again)))
        diffs = verdict(runs, extra, period, sc.node_class, again)
    return {
        "scenario": name,
        "verdict": _verdict(diffs),
        "differences": diffs,
        "runs": runs,
        "volcano_again": extra,
        "lavaflow_again": again,
        "time_scale": sc.scale,
        "period_s": args.period,
        "node_class": sc.node_class,
    }


def random_scenarios(seeds: str, where: Path) -> list[str]:
    """The random scenarios of tests/invariants.py for ``seeds`` ("0-29", "3,7"), as files."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import invariants  # the project's scenario generator (tests/invariants.py)

    chosen: list[int] = []
    for part in seeds.split(","):
        lo, _, hi = part.partition("-")
        chosen += list(range(int(lo), int(hi or lo) + 1))
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for seed in chosen:
        f = where / f"random-{seed}.yaml"
        f.write_text(invariants.generate(seed).text)
        files.append(str(f))
    return files


def recompare(path: str) -> list[dict[str, Any]]:
    """The verdicts of the runs a ``--json`` file holds, by this comparison."""
    out = []
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        if r["verdict"] != "skipped":
            node_class = r.get("node_class") or load_scenario(r["scenario"].split(" + "), kube_jobs=True).node_class
            diffs = verdict(
                r["runs"],
                r.get("volcano_again", []),
                r["period_s"] / r["time_scale"],
                node_class,
                r.get("lavaflow_again"),
            )
            r = {**r, "verdict": _verdict(diffs), "differences": diffs}
        out.append(r)
    return out


def report(results: list[dict[str, Any]]) -> int:
    for r in results:
        print(f"{r['scenario']}: {r['verdict']}{' — ' + r['reason'] if r.get('reason') else ''}", flush=True)
        for line in r.get("differences", []):
            print(f"    {line}", flush=True)
    print("\n| scenario | verdict | differences |\n|---|---|---:|")
    for r in results:
        print(f"| {r['scenario']} | {r['verdict']} | {len(r.get('differences', []))} |")
    return 0 if all(r["verdict"] != "differ" for r in results) else 1


async def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.recompare:
        return report(recompare(args.recompare))
    why = missing(args)
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 2
    args.kc = str(Path(args.kubeconfig).resolve())
    scenarios = [s.split("+") for s in args.scenario]
    if args.random:
        scenarios += [[f] for f in random_scenarios(args.random, Path(args.random_dir or tempfile.mkdtemp()))]
    for files in scenarios:  # all checked before anything is played
        for f in files:
            if not Path(f).is_file():
                print(f"error: {f}: no such file", file=sys.stderr)
                return 2
        try:
            load_scenario(files, kube_jobs=bool(args.kube_controller_manager))
        except Skip:
            pass
        except InputError as exc:
            for p in exc.problems:
                print(f"error: {p}", file=sys.stderr)
            return 2
    client, version = await connect(args.kc)
    problem = await volcano_crds_problem(client)
    if problem:
        await client.close()
        print(
            f"error: {problem}; install Volcano's own CRDs first, e.g. `kubectl apply --server-side "
            "--force-conflicts -f VOLCANO/installer/helm/chart/volcano/crd/bases/`",
            file=sys.stderr,
        )
        return 2
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="lavaflow-diff-") as d:
            tmp = Path(args.logs) if args.logs else Path(d)
            tmp.mkdir(parents=True, exist_ok=True)
            for files in scenarios:
                r = await run_one(client, files, args, tmp)
                r["server"] = version.get("gitVersion")
                results.append(r)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(r) + "\n")
                print(f"  {r['scenario']}: {r['verdict']}", flush=True)
    finally:
        await client.close()
    return report(results)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
