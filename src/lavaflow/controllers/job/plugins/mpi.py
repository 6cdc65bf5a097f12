"""mpi: MPI_HOST on the master's pods, and Horovod's host discovery kept for an elastic job."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ....api.core import ConfigMap, ConfigMapVolumeSource, KeyToPath, Pod, PodPhase, Volume, VolumeMount
from ....api.volcano import JOB_NAME_KEY, TASK_INDEX_KEY, TASK_SPEC_KEY, Job, TaskSpec
from ....elastic import spec as elastic_spec
from .base import JobPlugin, elastic_range, owned_by, owner_refs, set_env, task_gpus, task_hosts

if TYPE_CHECKING:  # pragma: no cover
    from ....store.base import Store

log = logging.getLogger("lavaflow.controllers")


# Horovod elastic's host discovery, kept as the MPI operator keeps it (its v1 controller for
# elastic Horovod): ConfigMap <job>-config holding discover_hosts.sh, mounted read-and-execute
# at /etc/mpi, printing "<host>:<slots>" for every worker that runs now.
MPI_CONFIG_SUFFIX = "-config"
MPI_CONFIG_PATH = "/etc/mpi"
MPI_CONFIG_VOLUME = "mpi-job-config"
DISCOVER_HOSTS = "discover_hosts.sh"
DISCOVER_HOSTS_MODE = 0o555
# Slots (processes) per worker host; default: the worker's GPUs (at least 1). An MPIJob's
# spec.slotsPerWorker becomes this annotation (api/mpijob.py).
SLOTS_PER_WORKER = elastic_spec.PREFIX + "slots-per-worker"


def discover_hosts_script(hosts: list[tuple[str, int]]) -> str:
    """The discovery script for (host, slots) pairs: a line ``host:slots`` each, in order."""
    return "#!/bin/sh\n" + "".join(f"echo {host}:{slots}\n" for host, slots in hosts)


class MPIPlugin(JobPlugin):
    """MPI_HOST (the workers' host names) on the master's pods.

    An elastic training job also gets Horovod's host discovery: ConfigMap ``<job>-config``
    whose ``discover_hosts.sh`` prints ``<pod>.<job>:<slots>`` for each worker pod running now
    (not one being removed), lowest index first, kept true as workers start, stop, are resized
    out or move; mounted at ``/etc/mpi`` (mode 0555) in the master's and the workers' pods, so
    ``horovodrun --host-discovery-script /etc/mpi/discover_hosts.sh`` follows every resize."""

    name = "mpi"
    follows_pods = True

    def _roles(self) -> tuple[str, str]:
        return self.args.get("master", "master"), self.args.get("worker", "worker")

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        master, worker = self._roles()
        if task.name == master:
            workers = next((t for t in job.spec.tasks if t.name == worker), None)
            hosts = task_hosts(job, workers) if workers is not None else []
            set_env(pod, {"MPI_HOST": ",".join(hosts)})
        if task.name in (master, worker) and elastic_range(job) is not None:
            _mount_discovery(job, pod)

    def on_job_add(self, job: Job, store: Store) -> None:
        if elastic_range(job) is None:
            return
        cm = store.get("ConfigMap", discovery_key(job))
        if cm is not None and not owned_by(cm, job):
            log.warning(
                "job %s: ConfigMap %s belongs to another object; Horovod's host discovery is not kept",
                job.key,
                cm.key,
            )
            return
        self.on_pods(job, {}, store)

    def on_pods(self, job: Job, pods: Mapping[str, Pod], store: Store) -> None:
        if elastic_range(job) is None:
            return
        _, worker = self._roles()
        task = next((t for t in job.spec.tasks if t.name == worker), None)
        if task is None:
            return
        script = discover_hosts_script(_running_hosts(job, worker, pods, _slots(job, task)))
        key = discovery_key(job)
        cm = store.get("ConfigMap", key)
        if cm is None:
            made = ConfigMap.model_validate(
                {
                    "metadata": {
                        "name": f"{job.name}{MPI_CONFIG_SUFFIX}",
                        "namespace": job.namespace,
                        "labels": {JOB_NAME_KEY: job.name},
                        "ownerReferences": owner_refs(job),
                    },
                    "data": {DISCOVER_HOSTS: script},
                }
            )
            try:
                store.create(made)
            except KeyError:  # (AlreadyExists: made meanwhile; its event brings it, the next sync compares)
                pass
            return
        if cm.data.get(DISCOVER_HOSTS) == script or not owned_by(cm, job):
            return  # nothing changed (no write), or another object's ConfigMap (left alone)
        cm.data = {**cm.data, DISCOVER_HOSTS: script}
        store.update(cm)

    def on_job_delete(self, job: Job, store: Store) -> None:
        self.on_job_gone(store, job.namespace, job.name)

    @classmethod
    def on_job_gone(cls, store: Store, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}{MPI_CONFIG_SUFFIX}"
        cm = store.get("ConfigMap", key)
        if cm is not None and any(
            r.kind == "Job" and r.name == name and r.api_version.startswith("batch.volcano.sh")
            for r in cm.metadata.owner_references
        ):
            store.delete("ConfigMap", key)


def discovery_key(job: Job) -> str:
    return f"{job.namespace}/{job.name}{MPI_CONFIG_SUFFIX}"


def discovery_config_maps(job: Job) -> list[str]:
    """The host-discovery ConfigMap the mpi plugin keeps for ``job`` (its name), if any."""
    return [f"{job.name}{MPI_CONFIG_SUFFIX}"] if "mpi" in job.spec.plugins and elastic_range(job) is not None else []


def _slots(job: Job, task: TaskSpec) -> int:
    raw = job.metadata.annotations.get(SLOTS_PER_WORKER, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, task_gpus(task))


def _running_hosts(job: Job, worker: str, pods: Mapping[str, Pod], slots: int) -> list[tuple[str, int]]:
    """(host, slots) of the worker pods that run now, by task index: not those being deleted or
    resized out (the scheduler marks a worker it removes before evicting it)."""
    running = []
    for pod in pods.values():
        meta = pod.metadata
        if (
            str(pod.status.phase) == PodPhase.RUNNING  # (str: the model types it as a Literal)
            and meta.deletion_timestamp is None
            and meta.labels.get(TASK_SPEC_KEY) == worker
            and elastic_spec.RESIZED_OUT not in meta.annotations
        ):
            index = meta.labels.get(TASK_INDEX_KEY, "")
            running.append((int(index) if index.isdigit() else -1, meta.name))
    return [(f"{name}.{job.name}", slots) for _, name in sorted(running)]


def _mount_discovery(job: Job, pod: Pod) -> None:
    """Mount the job's discovery ConfigMap at /etc/mpi in the pod's containers (not where the
    template already mounts something there); the script's mode is set per item, 0555."""
    spec = pod.spec
    if any(v.name == MPI_CONFIG_VOLUME for v in spec.volumes):
        return
    volume = Volume(
        name=MPI_CONFIG_VOLUME,
        config_map=ConfigMapVolumeSource(
            name=f"{job.name}{MPI_CONFIG_SUFFIX}",
            items=[KeyToPath(key=DISCOVER_HOSTS, path=DISCOVER_HOSTS, mode=DISCOVER_HOSTS_MODE)],
        ),
    )
    # Replaced, never changed in place: the pod shares its lists with the task's template.
    spec.volumes = [*spec.volumes, volume]
    mount = VolumeMount(name=MPI_CONFIG_VOLUME, mount_path=MPI_CONFIG_PATH, read_only=True)
    spec.containers = [
        c
        if any(m.mount_path == MPI_CONFIG_PATH for m in c.volume_mounts or ())
        else c.model_copy(update={"volume_mounts": [*(c.volume_mounts or ()), mount]})
        for c in spec.containers
    ]
