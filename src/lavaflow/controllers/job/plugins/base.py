"""What the job plugins share: the plugin interface (JobPlugin), their arguments, the
tasks' host names, environment variables and volume mounts added to a pod, owner references."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ....api.core import Container, EnvVar, Pod, Volume, VolumeMount
from ....api.selectors import pod_requests
from ....api.volcano import Job, TaskSpec
from ....elastic import spec as elastic_spec
from ..util import owner_ref

if TYPE_CHECKING:  # pragma: no cover
    from ....store.base import Store


def parse_args(raw: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in raw or []:
        a = a.strip()
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            out[key] = value if value else "true"
    return out


def env_name(task: str) -> str:
    return task.upper().replace("-", "_")


def task_hosts(job: Job, task: TaskSpec) -> list[str]:
    """``<job>-<task>-<i>.<job>``: the pods' DNS names under the job's headless Service."""
    return [f"{job.name}-{task.name}-{i}.{job.name}" for i in range(task.replicas)]


def owner_refs(job: Job) -> list[dict[str, Any]]:
    return [owner_ref(job)]


def set_env(pod: Pod, env: dict[str, str], keep_own: bool = False) -> None:
    """Add (or replace) variables in every container and init container of the pod.

    ``keep_own``: a variable the container already sets keeps its value (the user's choice)."""

    def merge(c: Container) -> Container:
        if keep_own:
            own = {e.name for e in c.env}
            add = {k: v for k, v in env.items() if k not in own}
            return c.model_copy(update={"env": c.env + [EnvVar(name=k, value=v) for k, v in add.items()]})
        kept = [e for e in c.env if e.name not in env]
        return c.model_copy(update={"env": kept + [EnvVar(name=k, value=v) for k, v in env.items()]})

    pod.spec.containers = [merge(c) for c in pod.spec.containers]
    pod.spec.init_containers = [merge(c) for c in pod.spec.init_containers]


def owned_by(obj: Any, job: Job) -> bool:
    """Whether ``obj`` is the job's (its controller reference names the job)."""
    for ref in obj.metadata.owner_references:
        if ref.kind == "Job" and ref.name == job.name and (not job.metadata.uid or ref.uid == job.metadata.uid):
            return True
    return False


def elastic_range(job: Job) -> tuple[int, int] | None:
    """(fewest, most) workers of an elastic training job -- one the elastic scheduler resizes
    while it runs (elastic/spec.py: GPU workers, minAvailable below its pods, a speed model) --
    else None."""
    if not elastic_spec.has_speed_model(job.metadata.annotations):
        return None
    shape = elastic_spec.job_shape(job)
    return None if shape is None else (shape[0], shape[1])


def task_gpus(task: TaskSpec) -> int:
    """Whole GPUs one pod of ``task`` requests."""
    return int(sum(v for k, v in pod_requests(task.template.spec).items() if elastic_spec.is_gpu(k)))


class JobPlugin:
    name: ClassVar[str] = ""
    # Whether on_pods is called: as the job's pods are created, change phase and are deleted.
    follows_pods: ClassVar[bool] = False

    def __init__(self, args: list[str]) -> None:
        self.args = parse_args(args)

    def on_job_add(self, job: Job, store: Store) -> None:
        pass

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        pass

    def on_job_update(self, job: Job, store: Store) -> None:
        pass

    def on_pods(self, job: Job, pods: Mapping[str, Pod], store: Store) -> None:
        """The job's pods (by name, as the job controller holds them) after a change of one."""

    def on_job_delete(self, job: Job, store: Store) -> None:
        pass

    @classmethod
    def on_job_gone(cls, store: Store, namespace: str, name: str) -> None:
        """The job is deleted (and no longer readable): remove what this plugin keeps for it."""


def bool_arg(args: dict[str, str], name: str, default: bool) -> bool:
    """A boolean flag as Go's flag package reads it (``--x``, ``--x=false``, ``--x=0``, ...); a
    value it cannot read leaves the default (Volcano logs the parse error and goes on)."""
    value = args.get(name)
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return default


def mount_everywhere(pod: Pod, volume: Volume, mount: VolumeMount) -> None:
    """Add ``volume`` to the pod and ``mount`` to each of its containers and init containers, as
    Volcano's svc and ssh plugins do. Where Volcano would make a pod the API server refuses, the
    template's own wins: a pod that already has a volume of that name gets nothing, a container
    that already mounts something at that path keeps its own mount."""
    spec = pod.spec
    if any(v.name == volume.name for v in spec.volumes):
        return
    # Replaced, never changed in place: the pod shares its lists with the task's template.
    spec.volumes = [*spec.volumes, volume]

    def mounted(c: Container) -> Container:
        if any(m.mount_path == mount.mount_path for m in c.volume_mounts or ()):
            return c
        return c.model_copy(update={"volume_mounts": [*(c.volume_mounts or ()), mount]})

    spec.containers = [mounted(c) for c in spec.containers]
    spec.init_containers = [mounted(c) for c in spec.init_containers]
