"""Volcano's job plugins: what a Job's ``spec.plugins`` adds to its pods and around them.

Each plugin may create objects when the job is added (``on_job_add``), change a
pod before it is created (``on_pod_create``), follow a scale change
(``on_job_update``), follow the job's pods as they come, run and go (``on_pods``,
for plugins with ``follows_pods``) and clean up (``on_job_delete``). Arguments are
Volcano's (``--master=``, ``--port=``, ...).

For an elastic training job (``elastic/spec.py``: GPU workers, ``minAvailable`` below
its pods, a speed model), whose workers the scheduler adds, removes and moves while it
runs, two plugins make the training processes follow: ``mpi`` keeps Horovod's host
discovery script true (ConfigMap ``<job>-config`` at ``/etc/mpi``, as the MPI operator
does for elastic Horovod), and ``pytorch`` gives torchrun a rendezvous instead of a
fixed world size (docs/elastic-training.md).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ...api.core import (
    ConfigMap,
    ConfigMapVolumeSource,
    Container,
    ContainerPort,
    EnvVar,
    KeyToPath,
    Pod,
    Secret,
    SecretVolumeSource,
    Service,
    Volume,
    VolumeMount,
)
from ...api.selectors import pod_requests
from ...api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, TASK_INDEX_KEY, TASK_SPEC_KEY, Job, TaskSpec
from ...elastic import spec as elastic_spec
from .util import owner_ref

if TYPE_CHECKING:  # pragma: no cover
    from ...store.base import Store

log = logging.getLogger("lavaflow.controllers")


def _args(raw: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in raw or []:
        a = a.strip()
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            out[key] = value if value else "true"
    return out


def _env_name(task: str) -> str:
    return task.upper().replace("-", "_")


def task_hosts(job: Job, task: TaskSpec) -> list[str]:
    """``<job>-<task>-<i>.<job>``: the pods' DNS names under the job's headless Service."""
    return [f"{job.name}-{task.name}-{i}.{job.name}" for i in range(task.replicas)]


def _owner(job: Job) -> list[dict[str, Any]]:
    return [owner_ref(job)]


def _set_env(pod: Pod, env: dict[str, str], keep_own: bool = False) -> None:
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


def _owned_by(obj: Any, job: Job) -> bool:
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


def _gpus(task: TaskSpec) -> int:
    """Whole GPUs one pod of ``task`` requests."""
    return int(sum(v for k, v in pod_requests(task.template.spec).items() if elastic_spec.is_gpu(k)))


class JobPlugin:
    name: ClassVar[str] = ""
    # Whether on_pods is called: as the job's pods are created, change phase and are deleted.
    follows_pods: ClassVar[bool] = False

    def __init__(self, args: list[str]) -> None:
        self.args = _args(args)

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


class EnvPlugin(JobPlugin):
    name = "env"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        _set_env(pod, {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)})


def _bool_arg(args: dict[str, str], name: str, default: bool) -> bool:
    """A boolean flag as Go's flag package reads it (``--x``, ``--x=false``, ``--x=0``, ...); a
    value it cannot read leaves the default (Volcano logs the parse error and goes on)."""
    value = args.get(name)
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return default


def _mount_everywhere(pod: Pod, volume: Volume, mount: VolumeMount) -> None:
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


SVC_SUFFIX = "-svc"
SVC_MOUNT_PATH = "/etc/volcano"


class SvcPlugin(JobPlugin):
    """Headless Service ``<job>``; ConfigMap ``<job>-svc`` mounted at ``/etc/volcano`` in every
    container, with each task's hosts (``<task>.host``, one a line; ``VC_<TASK>_HOSTS``,
    comma-separated; ``VC_<TASK>_NUM``); the same ``VC_*`` variables in every container (not with
    ``--inject-hosts-env=false``); each pod's hostname and subdomain. ``<task>`` is the task's name
    with ``-`` as ``_`` (upper case in ``VC_*``), as in Volcano."""

    name = "svc"

    def _hosts_data(self, job: Job) -> dict[str, str]:
        data = {}
        for t in job.spec.tasks:
            hosts = task_hosts(job, t)
            data[f"{t.name.replace('-', '_')}.host"] = "\n".join(hosts)
            data[f"VC_{_env_name(t.name)}_HOSTS"] = ",".join(hosts)
            data[f"VC_{_env_name(t.name)}_NUM"] = str(len(hosts))
        return data

    def on_job_add(self, job: Job, store: Store) -> None:
        svc = Service.model_validate(
            {
                "metadata": {"name": job.name, "namespace": job.namespace, "ownerReferences": _owner(job)},
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace},
                    "publishNotReadyAddresses": _bool_arg(self.args, "publish-not-ready-addresses", False),
                },
            }
        )
        if store.get("Service", svc.key) is None:
            store.create(svc)
        if store.get("ConfigMap", f"{job.namespace}/{job.name}{SVC_SUFFIX}") is None:
            store.create(
                ConfigMap.model_validate(
                    {
                        "metadata": {
                            "name": f"{job.name}{SVC_SUFFIX}",
                            "namespace": job.namespace,
                            "ownerReferences": _owner(job),
                        },
                        "data": self._hosts_data(job),
                    }
                )
            )
        else:  # (Volcano creates or updates it: one left by an older controller gets today's keys)
            self.on_job_update(job, store)
        job.status.controlled_resources["plugin-svc"] = "svc"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        pod.spec.hostname = pod.name
        pod.spec.subdomain = job.name
        if _bool_arg(self.args, "inject-hosts-env", True):
            env = {}
            for t in job.spec.tasks:
                env[f"VC_{_env_name(t.name)}_HOSTS"] = ",".join(task_hosts(job, t))
                env[f"VC_{_env_name(t.name)}_NUM"] = str(t.replicas)
            _set_env(pod, env)
        name = f"{job.name}{SVC_SUFFIX}"
        _mount_everywhere(
            pod,
            Volume(name=name, config_map=ConfigMapVolumeSource(name=name)),
            VolumeMount(name=name, mount_path=SVC_MOUNT_PATH),
        )

    def on_job_update(self, job: Job, store: Store) -> None:
        cm = store.get("ConfigMap", f"{job.namespace}/{job.name}{SVC_SUFFIX}")
        if cm is not None:
            data = self._hosts_data(job)
            if cm.data != data:
                cm.data = data
                store.update(cm)

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Service", f"{job.namespace}/{job.name}")
        store.delete("ConfigMap", f"{job.namespace}/{job.name}{SVC_SUFFIX}")


SSH_SUFFIX = "-ssh"
SSH_KEYS = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
SSH_ROOT_PATH = "/root/.ssh"  # where the keys go unless --ssh-key-file-path says otherwise
SSH_DIR = ".ssh"  # the keys' directory inside the volume, mounted as the mount's subPath
SSH_ROOT_MODE = 0o600  # the files' mode at /root/.ssh (ssh refuses a private key others can read)
SSH_USER_MODE = 0o644  # elsewhere: readable by a user who is not root (the files belong to root)


def _raw_flag(raw: list[str], name: str) -> str:
    """The value of ``--name=VALUE`` exactly as given (a key's final newline kept); the last wins."""
    value = ""
    for a in raw or []:
        key, sep, rest = a.partition("=")
        if sep and key.strip() in (f"--{name}", f"-{name}"):
            value = rest
    return value


class SSHPlugin(JobPlugin):
    """Secret ``<job>-ssh`` with a key pair (generated per job, or the one given by
    ``--ssh-private-key`` / ``--ssh-public-key``), ``authorized_keys`` and an ssh ``config`` naming
    every pod, mounted in every container at ``/root/.ssh`` (mode 0600) or at
    ``--ssh-key-file-path`` (mode 0644), as Volcano does."""

    name = "ssh"

    def __init__(self, args: list[str]) -> None:
        super().__init__(args)
        self.raw = list(args or [])

    def _port(self) -> int:
        raw = self.args.get("ssh-port", "22")
        try:
            port = int(raw)
        except ValueError:
            return 22  # (Volcano: the flag's parse error is logged, the default kept)
        if not 0 < port <= 65535:
            log.warning("ssh plugin: invalid ssh port %s, falling back to port 22", raw)
            return 22
        return port

    def _path(self) -> str:
        path = self.args.get("ssh-key-file-path", "")
        return SSH_ROOT_PATH if path in ("", "true") else path

    def on_job_add(self, job: Job, store: Store) -> None:
        key = f"{job.namespace}/{job.name}{SSH_SUFFIX}"
        if store.get("Secret", key) is not None:
            return
        private_key = _raw_flag(self.raw, "ssh-private-key")
        if private_key:
            priv_pem, pub = private_key.encode(), _raw_flag(self.raw, "ssh-public-key").encode()
        else:
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa

            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            priv_pem = private.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
            pub = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            pub += b"\n"  # (an authorized_keys line)
        port = self._port()
        config = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        for t in job.spec.tasks:
            for i in range(t.replicas):
                host = f"{job.name}-{t.name}-{i}"
                config += f"Host {host}\n  HostName {host}.{job.name}\n  Port {port}\n"
        data = {"id_rsa": priv_pem, "id_rsa.pub": pub, "authorized_keys": pub, "config": config.encode()}
        store.create(
            Secret.model_validate(
                {
                    "metadata": {
                        "name": f"{job.name}{SSH_SUFFIX}",
                        "namespace": job.namespace,
                        "ownerReferences": _owner(job),
                    },
                    "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
                }
            )
        )
        job.status.controlled_resources["plugin-ssh"] = "ssh"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        name = f"{job.name}{SSH_SUFFIX}"
        path = self._path()
        volume = Volume(
            name=name,
            secret=SecretVolumeSource(
                secret_name=name,
                items=[KeyToPath(key=k, path=f"{SSH_DIR}/{k}") for k in SSH_KEYS],
                default_mode=SSH_ROOT_MODE if path == SSH_ROOT_PATH else SSH_USER_MODE,
            ),
        )
        _mount_everywhere(pod, volume, VolumeMount(name=name, mount_path=path, sub_path=SSH_DIR))

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Secret", f"{job.namespace}/{job.name}{SSH_SUFFIX}")


# torchrun's options as environment variables (torch.distributed.argparse_util: PET_<option>),
# for an elastic job's pods: a rendezvous between a fewest and a most nodes, no fixed world.
PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_RDZV_BACKEND = "PET_RDZV_BACKEND"
PET_RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
PET_RDZV_ID = "PET_RDZV_ID"
PET_RDZV_CONF = "PET_RDZV_CONF"
PET_MAX_RESTARTS = "PET_MAX_RESTARTS"
# Every scale-in fails the workers that stay (their collective loses a peer): torchrun restarts
# them in a smaller group, and counts that against --max-restarts.
DEFAULT_MAX_RESTARTS = "100"


class PyTorchPlugin(JobPlugin):
    """MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK for torch.distributed (master rank 0, workers 1..).

    An elastic training job gets torchrun's rendezvous instead (``PET_*``, which torchrun reads
    as its options): ``--nnodes=MIN:MAX``, the c10d backend, an endpoint on the first pod of the
    master task (else of the worker task) under the job's headless Service, the job's uid as the
    rendezvous id; the pod at the endpoint hosts the rendezvous store (``is_host``). No world
    size, no rank: torchrun assigns them each time the group forms. A variable the container
    sets itself keeps its value."""

    name = "pytorch"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        port = self.args.get("port", "23456")
        if task.name not in (master, worker):
            return
        if elastic_range(job) is not None:
            env = self._rendezvous(job, task, index, master, worker, port)
            _set_env(pod, env, keep_own=True)
            if env[PET_RDZV_CONF] == "is_host=true":
                # (the pod's annotations are its own copy: _new_pod makes them per pod)
                pod.metadata.annotations[elastic_spec.RENDEZVOUS_HOST] = "true"
            return
        tasks = {t.name: t for t in job.spec.tasks}
        world = sum(tasks[n].replicas for n in (master, worker) if n in tasks)
        master_task = tasks.get(master)
        addr = task_hosts(job, master_task)[0] if master_task is not None and master_task.replicas else ""
        rank = index if task.name == master else index + (master_task.replicas if master_task is not None else 0)
        _set_env(pod, {"MASTER_ADDR": addr, "MASTER_PORT": port, "WORLD_SIZE": str(world), "RANK": str(rank)})

    @staticmethod
    def _rendezvous(job: Job, task: TaskSpec, index: int, master: str, worker: str, port: str) -> dict[str, str]:
        nodes = [t for t in job.spec.tasks if t.name in (master, worker)]
        most = sum(t.replicas for t in nodes)
        others = sum(t.replicas for t in job.spec.tasks) - most
        fewest = min(most, max(1, job.spec.min_available - others))
        host_task = next((t for t in nodes if t.name == master and t.replicas), None) or next(
            (t for t in nodes if t.name == worker and t.replicas), task
        )
        env = {
            PET_NNODES: f"{fewest}:{most}",
            PET_RDZV_BACKEND: "c10d",
            PET_RDZV_ENDPOINT: f"{task_hosts(job, host_task)[0]}:{port}",
            PET_RDZV_ID: job.metadata.uid or job.name,
            # The pod at the endpoint hosts the store: torchrun would otherwise tell by resolving
            # the endpoint's name, which the job's Service publishes only once the pod is ready.
            PET_RDZV_CONF: f"is_host={'true' if task is host_task and index == 0 else 'false'}",
            PET_MAX_RESTARTS: DEFAULT_MAX_RESTARTS,
        }
        gpus = _gpus(task)
        if gpus > 0:
            env[PET_NPROC_PER_NODE] = str(gpus)
        return env


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
            _set_env(pod, {"MPI_HOST": ",".join(hosts)})
        if task.name in (master, worker) and elastic_range(job) is not None:
            _mount_discovery(job, pod)

    def on_job_add(self, job: Job, store: Store) -> None:
        if elastic_range(job) is None:
            return
        cm = store.get("ConfigMap", discovery_key(job))
        if cm is not None and not _owned_by(cm, job):
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
                        "ownerReferences": _owner(job),
                    },
                    "data": {DISCOVER_HOSTS: script},
                }
            )
            try:
                store.create(made)
            except KeyError:  # (AlreadyExists: made meanwhile; its event brings it, the next sync compares)
                pass
            return
        if cm.data.get(DISCOVER_HOSTS) == script or not _owned_by(cm, job):
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
    return max(1, _gpus(task))


def _running_hosts(job: Job, worker: str, pods: Mapping[str, Pod], slots: int) -> list[tuple[str, int]]:
    """(host, slots) of the worker pods that run now, by task index: not those being deleted or
    resized out (the scheduler marks a worker it removes before evicting it)."""
    running = []
    for pod in pods.values():
        meta = pod.metadata
        if (
            pod.status.phase == "Running"
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


class TensorFlowPlugin(JobPlugin):
    """TF_CONFIG with the cluster spec (ps, worker, chief, evaluator) and the pod's own task."""

    name = "tensorflow"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        port = self.args.get("port", "2222")
        roles = {
            self.args.get("ps", "ps"): "ps",
            self.args.get("worker", "worker"): "worker",
            self.args.get("chief", "chief"): "chief",
            self.args.get("evaluator", "evaluator"): "evaluator",
        }
        if task.name not in roles:
            return
        cluster: dict[str, list[str]] = {}
        for t in job.spec.tasks:
            if t.name in roles and roles[t.name] != "evaluator":
                cluster[roles[t.name]] = [f"{h}:{port}" for h in task_hosts(job, t)]
        tf_config = {"cluster": cluster, "task": {"type": roles[task.name], "index": index}}
        _set_env(pod, {"TF_CONFIG": json.dumps(tf_config, separators=(",", ":"), sort_keys=True)})


class RayPlugin(JobPlugin):
    """Ray: the head container runs ``ray start --head`` with its GCS, dashboard and client ports
    open, worker containers join it at ``<head pod>.<job>:<port>``, and a Service
    ``<job>-head-svc`` selects the head pod (arguments --head, --headContainer, --worker,
    --workerContainer, --port, --dashboardPort, --clientPort, as Volcano's)."""

    name = "ray"

    def _ports(self) -> list[tuple[str, int]]:
        return [
            ("gcs", int(self.args.get("port", "6379"))),
            ("dashboard", int(self.args.get("dashboardPort", "8265"))),
            ("client-server", int(self.args.get("clientPort", "10001"))),
        ]

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        head = self.args.get("head", "head")
        head_task = next((t for t in job.spec.tasks if t.name == head), None)
        if head_task is None:
            return
        port = int(self.args.get("port", "6379"))
        containers = []
        for c in pod.spec.containers:
            if task.name == head and c.name == self.args.get("headContainer", "head"):
                have = {p.container_port for p in c.ports}
                ports = list(c.ports) + [
                    ContainerPort(name=n, container_port=v) for n, v in self._ports() if v not in have
                ]
                _, dash, client = (v for _, v in self._ports())
                cmd = [
                    "sh",
                    "-c",
                    f"ray start --head --block --dashboard-host=0.0.0.0 --port={port} "
                    f"--dashboard-port={dash} --ray-client-server-port={client}",
                ]
                c = c.model_copy(update={"ports": ports, "command": cmd})
            elif task.name == self.args.get("worker", "worker") and c.name == self.args.get(
                "workerContainer", "worker"
            ):
                host = head_task.template.spec.hostname or f"{job.name}-{head}-0"
                sub = head_task.template.spec.subdomain or job.name
                c = c.model_copy(update={"command": ["sh", "-c", f"ray start --block --address={host}.{sub}:{port}"]})
            containers.append(c)
        pod.spec.containers = containers

    def on_job_add(self, job: Job, store: Store) -> None:
        key = f"{job.namespace}/{job.name}-head-svc"
        if store.get("Service", key) is None:
            store.create(
                Service.model_validate(
                    {
                        "metadata": {
                            "name": f"{job.name}-head-svc",
                            "namespace": job.namespace,
                            "ownerReferences": _owner(job),
                        },
                        "spec": {
                            "selector": {
                                JOB_NAME_KEY: job.name,
                                JOB_NAMESPACE_KEY: job.namespace,
                                TASK_SPEC_KEY: self.args.get("head", "head"),
                            },
                            "ports": [
                                {"name": n, "port": v, "targetPort": n, "protocol": "TCP"} for n, v in self._ports()
                            ],
                        },
                    }
                )
            )
        job.status.controlled_resources["plugin-ray"] = "ray"

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Service", f"{job.namespace}/{job.name}-head-svc")


class HCCLRankPlugin(JobPlugin):
    """Ascend HCCL: annotation ``hccl/rankIndex`` on each pod — its RANK variable if it has one,
    else its index among master pods, or the master replicas plus its index for workers."""

    name = "hcclrank"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        ann = pod.metadata.annotations
        if ann.get(HCCL_RANK_KEY):
            return
        rank = next((e.value for c in pod.spec.containers for e in c.env if e.name == "RANK" and e.value), None)
        if rank is None:
            master, worker = self.args.get("master", "master"), self.args.get("worker", "worker")
            if task.name == master:
                rank = str(index)
            elif task.name == worker:
                replicas = sum(t.replicas for t in job.spec.tasks if t.name == master)
                rank = str(replicas + index)
            else:
                return
        pod.metadata.annotations = {**ann, HCCL_RANK_KEY: rank}


HCCL_RANK_KEY = "hccl/rankIndex"

PLUGINS: dict[str, type[JobPlugin]] = {
    p.name: p
    for p in (EnvPlugin, SvcPlugin, SSHPlugin, PyTorchPlugin, MPIPlugin, TensorFlowPlugin, RayPlugin, HCCLRankPlugin)
}


def pods_changed(job: Job, pods: Mapping[str, Pod], store: Store) -> None:
    """Hand the job's pods to those of its plugins that follow them (after a pod event)."""
    for name, args in job.spec.plugins.items():
        cls = PLUGINS.get(name)
        if cls is not None and cls.follows_pods:
            cls(args).on_pods(job, pods, store)


def job_gone(store: Store, namespace: str, name: str) -> None:
    """A deleted job's plugin objects that are not removed by name with it (see JobController)."""
    for cls in PLUGINS.values():
        cls.on_job_gone(store, namespace, name)


def plugins_for(job: Job) -> list[JobPlugin]:
    """The job's plugins in a stable order (svc before the ones that use its host names)."""
    order = ["svc", "ssh", "env", "pytorch", "mpi", "tensorflow", "ray", "hcclrank"]
    names = sorted(job.spec.plugins, key=lambda n: order.index(n) if n in order else len(order))
    return [PLUGINS[n](job.spec.plugins[n]) for n in names if n in PLUGINS]
