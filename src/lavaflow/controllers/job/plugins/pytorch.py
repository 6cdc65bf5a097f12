"""pytorch: torch.distributed's variables, or torchrun's rendezvous for an elastic job."""

from __future__ import annotations

from ....api.core import Pod
from ....api.volcano import Job, TaskSpec
from ....elastic import spec as elastic_spec
from .base import JobPlugin, elastic_range, set_env, task_gpus, task_hosts

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
            set_env(pod, env, keep_own=True)
            if env[PET_RDZV_CONF] == "is_host=true":
                # (the pod's annotations are its own copy: _new_pod makes them per pod)
                pod.metadata.annotations[elastic_spec.RENDEZVOUS_HOST] = "true"
            return
        tasks = {t.name: t for t in job.spec.tasks}
        world = sum(tasks[n].replicas for n in (master, worker) if n in tasks)
        master_task = tasks.get(master)
        addr = task_hosts(job, master_task)[0] if master_task is not None and master_task.replicas else ""
        rank = index if task.name == master else index + (master_task.replicas if master_task is not None else 0)
        set_env(pod, {"MASTER_ADDR": addr, "MASTER_PORT": port, "WORLD_SIZE": str(world), "RANK": str(rank)})

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
        gpus = task_gpus(task)
        if gpus > 0:
            env[PET_NPROC_PER_NODE] = str(gpus)
        return env
