"""Volcano's job plugins: what a Job's ``spec.plugins`` adds to its pods and around them.

Each plugin may create objects when the job is added (``on_job_add``), change a
pod before it is created (``on_pod_create``), follow a scale change
(``on_job_update``) and clean up (``on_job_delete``). Arguments are Volcano's
(``--master=``, ``--port=``, ...).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, ClassVar

from ..api.core import ConfigMap, Container, ContainerPort, EnvVar, Pod, Secret, Service
from ..api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, TASK_SPEC_KEY, Job, TaskSpec

if TYPE_CHECKING:  # pragma: no cover
    from ..store.base import Store


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
    return [
        {
            "apiVersion": job.api_version,
            "kind": "Job",
            "name": job.name,
            "uid": job.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _set_env(pod: Pod, env: dict[str, str]) -> None:
    """Add (or replace) variables in every container and init container of the pod."""

    def merge(c: Container) -> Container:
        kept = [e for e in c.env if e.name not in env]
        return c.model_copy(update={"env": kept + [EnvVar(name=k, value=v) for k, v in env.items()]})

    pod.spec.containers = [merge(c) for c in pod.spec.containers]
    pod.spec.init_containers = [merge(c) for c in pod.spec.init_containers]


class JobPlugin:
    name: ClassVar[str] = ""

    def __init__(self, args: list[str]) -> None:
        self.args = _args(args)

    def on_job_add(self, job: Job, store: Store) -> None:
        pass

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        pass

    def on_job_update(self, job: Job, store: Store) -> None:
        pass

    def on_job_delete(self, job: Job, store: Store) -> None:
        pass


class EnvPlugin(JobPlugin):
    name = "env"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        _set_env(pod, {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)})


class SvcPlugin(JobPlugin):
    """Headless Service ``<job>``, ConfigMap ``<job>-svc`` with ``<task>.host`` lists, host env vars."""

    name = "svc"

    def _hosts_data(self, job: Job) -> dict[str, str]:
        return {f"{t.name}.host": "\n".join(task_hosts(job, t)) for t in job.spec.tasks}

    def on_job_add(self, job: Job, store: Store) -> None:
        svc = Service.model_validate(
            {
                "metadata": {"name": job.name, "namespace": job.namespace, "ownerReferences": _owner(job)},
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace},
                    "publishNotReadyAddresses": self.args.get("publish-not-ready-addresses", "false") == "true",
                },
            }
        )
        if store.get("Service", svc.key) is None:
            store.create(svc)
        cm_key = f"{job.namespace}/{job.name}-svc"
        if store.get("ConfigMap", cm_key) is None:
            store.create(
                ConfigMap.model_validate(
                    {
                        "metadata": {
                            "name": f"{job.name}-svc",
                            "namespace": job.namespace,
                            "ownerReferences": _owner(job),
                        },
                        "data": self._hosts_data(job),
                    }
                )
            )
        job.status.controlled_resources["plugin-svc"] = "svc"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        pod.spec.hostname = pod.name
        pod.spec.subdomain = job.name
        env = {}
        for t in job.spec.tasks:
            env[f"VC_{_env_name(t.name)}_HOSTS"] = ",".join(task_hosts(job, t))
            env[f"VC_{_env_name(t.name)}_NUM"] = str(t.replicas)
        _set_env(pod, env)

    def on_job_update(self, job: Job, store: Store) -> None:
        cm = store.get("ConfigMap", f"{job.namespace}/{job.name}-svc")
        if cm is not None:
            data = self._hosts_data(job)
            if cm.data != data:
                cm.data = data
                store.update(cm)

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Service", f"{job.namespace}/{job.name}")
        store.delete("ConfigMap", f"{job.namespace}/{job.name}-svc")


class SSHPlugin(JobPlugin):
    """Secret ``<job>-ssh`` with a freshly generated key pair, authorized_keys and an ssh config."""

    name = "ssh"

    def on_job_add(self, job: Job, store: Store) -> None:
        key = f"{job.namespace}/{job.name}-ssh"
        if store.get("Secret", key) is not None:
            return
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        priv_pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        pub = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        config = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        for t in job.spec.tasks:
            for i in range(t.replicas):
                host = f"{job.name}-{t.name}-{i}"
                config += f"Host {host}\n  HostName {host}.{job.name}\n"
        data = {"id_rsa": priv_pem, "id_rsa.pub": pub, "authorized_keys": pub, "config": config.encode()}
        store.create(
            Secret.model_validate(
                {
                    "metadata": {"name": f"{job.name}-ssh", "namespace": job.namespace, "ownerReferences": _owner(job)},
                    "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
                }
            )
        )
        job.status.controlled_resources["plugin-ssh"] = "ssh"

    def on_job_delete(self, job: Job, store: Store) -> None:
        store.delete("Secret", f"{job.namespace}/{job.name}-ssh")


class PyTorchPlugin(JobPlugin):
    """MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK for torch.distributed (master rank 0, workers 1..)."""

    name = "pytorch"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        port = self.args.get("port", "23456")
        if task.name not in (master, worker):
            return
        tasks = {t.name: t for t in job.spec.tasks}
        world = sum(tasks[n].replicas for n in (master, worker) if n in tasks)
        master_task = tasks.get(master)
        addr = task_hosts(job, master_task)[0] if master_task is not None and master_task.replicas else ""
        rank = index if task.name == master else index + (master_task.replicas if master_task is not None else 0)
        _set_env(pod, {"MASTER_ADDR": addr, "MASTER_PORT": port, "WORLD_SIZE": str(world), "RANK": str(rank)})


class MPIPlugin(JobPlugin):
    """MPI_HOST (the workers' host names) on the master's pods."""

    name = "mpi"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        if task.name != master:
            return
        workers = next((t for t in job.spec.tasks if t.name == worker), None)
        hosts = task_hosts(job, workers) if workers is not None else []
        _set_env(pod, {"MPI_HOST": ",".join(hosts)})


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


def plugins_for(job: Job) -> list[JobPlugin]:
    """The job's plugins in a stable order (svc before the ones that use its host names)."""
    order = ["svc", "ssh", "env", "pytorch", "mpi", "tensorflow", "ray", "hcclrank"]
    names = sorted(job.spec.plugins, key=lambda n: order.index(n) if n in order else len(order))
    return [PLUGINS[n](job.spec.plugins[n]) for n in names if n in PLUGINS]
