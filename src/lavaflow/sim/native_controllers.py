"""What the simulator stands in for: kube-controller-manager's workload controllers.

Deployments, ReplicaSets, StatefulSets and batch/v1 Jobs in the input create
their pods (replicas; a Job's parallelism, completions and backoffLimit) with an
owner reference, so the PodGroup controller can gang them by the owner's
group-min-member annotation.

A pod of a Deployment, ReplicaSet or StatefulSet that is evicted (reclaim,
preemption, a failed node) or deleted while it has not finished is replaced,
under the same name, as their controllers do; such pods run until deleted
unless they carry a duration (services do not finish on their own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..api.core import Pod, PodPhase
from ..api.meta import set_fields
from ..api.native_workloads import JobCondition
from ..controllers.base import Clock, Controller
from ..store.base import Forbidden, Handler

if TYPE_CHECKING:  # pragma: no cover
    from ..api.native_workloads import BatchJob, Deployment, ReplicaSet, StatefulSet
    from ..store.base import Store

KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "BatchJob")
# Owners whose lost pods are replaced; their pods run until deleted by default.
REPLACING = ("Deployment", "ReplicaSet", "StatefulSet")
# Pod phases as plain strs (read for every pod event; see scheduler.model.NOT_ADMITTED):
# a pod deleted while alive ("": no status yet) is lost; one in _DONE finished.
_ALIVE = (PodPhase.PENDING.value, PodPhase.RUNNING.value, "")
_DONE = (PodPhase.SUCCEEDED.value, PodPhase.FAILED.value)
_SUCCEEDED = PodPhase.SUCCEEDED.value


@dataclass
class _BatchState:
    active: set[str] = field(default_factory=set)  # its pods not yet finished
    succeeded: int = 0
    failed: int = 0  # failed or lost
    next: int = 0  # the index in the next pod's name
    done: tuple[str, str, str] | None = None  # (Complete | Failed, reason, message)


class WorkloadController(Controller):
    def __init__(self, store: Store, clock: Clock) -> None:
        super().__init__(store, clock)
        self.created: dict[str, set[str]] = {}
        self.names: dict[str, dict[int, str]] = {}  # owner key -> slot -> its pod's name, when not <owner>-<slot>
        self.forbidden: dict[str, set[str]] = {}  # namespace -> owners a pod create was refused for
        self.batch: dict[str, _BatchState] = {}  # batch/v1 Job key -> what its controller tracks
        for kind in KINDS:
            store.watch(kind, cast(Handler, lambda ev, obj, old, kind=kind: self._on_owner(kind, ev, obj)))
        store.watch("Pod", self._on_pod)

    def retry_forbidden(self, namespace: str) -> None:
        for key in self.forbidden.pop(namespace, set()):
            self.mark(key)

    def _on_pod(self, event: str, pod: Pod, old: Pod | None) -> None:
        for ref in pod.metadata.owner_references:
            if ref.controller and ref.kind == "Job" and ref.api_version.startswith("batch/"):
                self._on_batch_pod(event, pod, f"BatchJob:{pod.namespace}/{ref.name}")
                return
        if event != "DELETED" or pod.status.phase not in _ALIVE:
            return
        for ref in pod.metadata.owner_references:
            if ref.controller and ref.kind in REPLACING:
                key = f"{ref.kind}:{pod.namespace}/{ref.name}"
                owner = self.store.get(ref.kind, f"{pod.namespace}/{ref.name}")
                created = self.created.get(key)
                if owner is not None and owner.metadata.uid == ref.uid and created is not None and pod.name in created:
                    created.discard(pod.name)  # the owner is short of a pod: recreate it
                    self.mark(key)

    def _on_owner(self, kind: str, event: str, obj: Any) -> None:
        key = f"{kind}:{obj.key}"
        if event == "DELETED":
            for name in sorted(self.created.pop(key, set())):
                self.store.delete("Pod", f"{obj.namespace}/{name}")
            return
        self.mark(key)

    def _on_batch_pod(self, event: str, pod: Pod, key: str) -> None:
        st = self.batch.get(key)
        if st is None or pod.name not in st.active:
            return
        if event == "DELETED" or pod.status.phase in _DONE:
            # A pod that finished, or one lost before it did (deleted, evicted, its node gone), which
            # the Job controller counts as failed and replaces.
            st.active.discard(pod.name)
            if event != "DELETED" and pod.status.phase == _SUCCEEDED:
                st.succeeded += 1
            else:
                st.failed += 1
            self.mark(key)

    def sync(self, key: str) -> None:
        kind, _, okey = key.partition(":")
        owner = self.store.get(kind, okey)
        if owner is None:
            return
        if kind == "BatchJob":
            self._sync_batch(key, owner)
            return
        count = owner.spec.replicas
        created = self.created.setdefault(key, set())
        api_kind = kind
        names = self.names.setdefault(key, {})
        for i in range(max(count, 0)):
            name = names.get(i, f"{owner.name}-{i}")
            if name in created:
                continue
            generate = None
            if self.store.get("Pod", f"{owner.namespace}/{name}") is not None:
                if kind == "StatefulSet":
                    continue  # its pods' names are fixed: the slot waits (kube's controller retries)
                # Kubernetes names these pods from a generateName (<owner>-<random>), so two owners'
                # pods never meet; the short names here can (Deployment x and batch Job x): this
                # slot's pod is named by the store's generateName instead.
                name, generate = "", f"{owner.name}-"
            pod = self._new_pod(owner, api_kind, name, generate)
            try:
                self.store.create(pod)
            except Forbidden:  # past a ResourceQuota: tried again when usage goes down
                self.forbidden.setdefault(owner.namespace, set()).add(key)
                break
            names[i] = pod.metadata.name
            created.add(pod.metadata.name)

    def _new_pod(
        self, owner: Deployment | ReplicaSet | StatefulSet | BatchJob, api_kind: str, name: str, generate: str | None
    ) -> Pod:
        tmpl = owner.spec.template
        annotations = dict(tmpl.metadata.annotations)
        return Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "generateName": generate,
                    "namespace": owner.namespace,
                    "labels": dict(tmpl.metadata.labels),
                    "annotations": annotations,
                    "ownerReferences": [
                        {
                            "apiVersion": owner.api_version,
                            "kind": api_kind,
                            "name": owner.name,
                            "uid": owner.metadata.uid,
                            "controller": True,
                        }
                    ],
                }
            }
        ).model_copy(update={"spec": tmpl.spec.model_copy()})

    def _sync_batch(self, key: str, job: BatchJob) -> None:
        """Kubernetes' Job controller (NonIndexed): up to ``parallelism`` pods at a time until
        ``completions`` succeeded (unset: until one succeeded and none is active); each failed or
        lost pod is replaced, and more than ``backoffLimit`` failures fail the Job, deleting the
        pods still active. The Complete / Failed condition and the counts go to the Job's status."""
        st = self.batch.setdefault(key, _BatchState())
        spec = job.spec
        if st.done is None:
            if st.failed > spec.backoff_limit:
                st.done = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
                for name in sorted(st.active):
                    self.store.delete("Pod", f"{job.namespace}/{name}")
                st.failed += len(st.active)
                st.active.clear()
            elif (spec.completions is not None and st.succeeded >= spec.completions) or (
                spec.completions is None and st.succeeded > 0 and not st.active
            ):
                st.done = ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            else:
                want = max(spec.parallelism, 0)
                if spec.completions is not None:
                    want = min(want, spec.completions - st.succeeded)
                elif st.succeeded > 0:
                    want = 0  # a work queue: once one pod succeeded, no new pods
                while len(st.active) < want:
                    name = f"{job.name}-{st.next}"
                    generate = None
                    if self.store.get("Pod", f"{job.namespace}/{name}") is not None:
                        name, generate = "", f"{job.name}-"  # (as for the other workloads above)
                    pod = self._new_pod(job, "Job", name, generate)
                    try:
                        self.store.create(pod)
                    except Forbidden:  # past a ResourceQuota: tried again when usage goes down
                        self.forbidden.setdefault(job.namespace, set()).add(key)
                        break
                    st.next += 1
                    st.active.add(pod.metadata.name)
                    self.created.setdefault(key, set()).add(pod.metadata.name)
        status = job.status
        now = self.clock()
        values = {
            "active": len(st.active),
            "succeeded": st.succeeded,
            "failed": st.failed,
            "start_time": status.start_time if status.start_time is not None else now,
        }
        if st.done is not None and not status.conditions:
            kind, reason, message = st.done
            values["conditions"] = [
                JobCondition(type=kind, status="True", reason=reason, message=message, last_transition_time=now)
            ]
            if kind == "Complete":
                values["completion_time"] = now
        if any(getattr(status, k) != v for k, v in values.items()):
            set_fields(status, values)
            self.store.update(job)
