"""What the controller does to a job: SyncJob (each phase's own steps are in ``state/``),
killing pods, setting a new job up, cleaning up after a deleted one and applying a user's
update; the names of the objects the job plugins make, for reports."""

from __future__ import annotations

from collections.abc import Callable

from ...api import admission
from ...api.core import Pod
from ...api.volcano import Job, JobPhase, PodGroup, PodGroupPhase
from .plugins import job_gone, plugins_for
from .plugins.mpi import discovery_config_maps
from .podgroup import PodGroupMixin
from .state import OTHER, STATES
from .util import FINISHED, podgroup_name

_NOT_ADMITTED = ("", PodGroupPhase.PENDING.value)  # (plain strs, read per sync: see util.ALIVE)


class ActionsMixin(PodGroupMixin):
    def _kill(
        self, job: Job, pods: dict[str, Pod], keep_finished: bool, only: Callable[[Pod], bool] | None = None
    ) -> int:
        """Delete pods (all, or those ``only`` accepts); finished pods are kept when asked."""
        if keep_finished and only is None and pods is self.pods_by_job.get(job.key):
            tally = self.tallies[job.key]
            if len(pods) == tally.phase(*FINISHED):
                return 0
        n = 0
        for name in sorted(pods):
            p = pods[name]
            if only is not None and not only(p):
                continue
            if keep_finished and p.status.phase in FINISHED:
                continue
            self.killing.add(p.metadata.uid)
            self.store.delete("Pod", p.key)
            n += 1
        return n

    def _sync(self, job: Job, pods: dict[str, Pod]) -> None:
        """Volcano's SyncJob: the phase's own step before the PodGroup and the pods are seen to
        (which may end the sync, or move the job to another phase), then the PodGroup, the pods
        once it is admitted, and the step of the phase the job is in then."""
        phase = job.status.state.phase
        counts = self._counts(job, pods)
        state = STATES.get(phase, OTHER)
        if state.before_pods is not None:
            went_on = state.before_pods(self, job, pods, counts)
            if went_on is None:
                return
            state = STATES[went_on]
        pg = self._ensure_podgroup(job)
        self._sync_elastic_annotations(job, pg)
        if pg.status.phase not in _NOT_ADMITTED:
            self._create_pods(job, pods)
            counts = self._counts(job, pods)
        if state.after_pods is not None:
            state.after_pods(self, job, pods, counts)

    def _initiate(self, job: Job) -> None:
        self._set_phase(job, JobPhase.PENDING)
        job.status.min_available = job.spec.min_available
        for plugin in plugins_for(job):
            plugin.on_job_add(job, self.store)
        self._ensure_podgroup(job)

    def _cleanup(self, key: str, pods: dict[str, Pod]) -> None:
        for p in list(pods.values()):
            self.killing.add(p.metadata.uid)
            self.store.delete("Pod", p.key)
        for pg_key in list(self.podgroups_of.get(key, ())):
            self.store.delete("PodGroup", pg_key)
        ns, _, name = key.partition("/")
        for kind, suffix in (("Service", ""), ("ConfigMap", "-svc"), ("Secret", "-ssh")):
            self.store.delete(kind, f"{ns}/{name}{suffix}")
        job_gone(self.store, ns, name)
        self._cancel(key)
        self.requests.pop(key, None)
        # Forget the job: nothing kept per job outlives it.
        if not self.pods_by_job.get(key):
            self.pods_by_job.pop(key, None)
            self.tallies.pop(key, None)
        self.task_restarts.pop(key, None)
        self._templates.pop(key, None)
        self._name_sets.pop(key, None)
        self._elastic_seen.pop(key, None)

    def apply_update(self, new: Job) -> list[admission.Problem]:
        """A user's change to a job: only replicas, minAvailable and priorityClassName may change."""
        old = self.store.get("Job", new.key)
        if old is None:
            return [admission.Problem("metadata.name", f"job {new.key} does not exist")]
        problems = admission.validate_job_update(old, new)
        if problems:
            return problems
        old.spec = new.spec
        if old.spec.min_available != old.status.min_available:
            old.status.min_available = old.spec.min_available
        pg = self.store.get("PodGroup", f"{old.namespace}/{podgroup_name(old)}")
        if pg is not None:
            spec = self._pg_spec(old)
            pg.spec.min_member = spec["minMember"]
            pg.spec.min_task_member = spec["minTaskMember"]
            pg.spec.priority_class_name = spec["priorityClassName"]
            pg.spec.min_resources = PodGroup.model_validate(
                {"spec": {"minResources": spec["minResources"]}}
            ).spec.min_resources
            self.store.update(pg)
        for plugin in plugins_for(old):
            plugin.on_job_update(old, self.store)
        self.store.update(old)
        return []


def generated_objects(job: Job) -> dict[str, list[str]]:
    """The objects the job's plugins create beside its pods (names, by kind), for reports."""
    plugins = job.spec.plugins
    return {
        "services": [job.name] if "svc" in plugins else [],
        "configMaps": ([f"{job.name}-svc"] if "svc" in plugins else []) + discovery_config_maps(job),
        "secrets": [f"{job.name}-ssh"] if "ssh" in plugins else [],
    }
