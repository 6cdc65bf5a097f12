"""hcclrank: each pod's HCCL rank (Ascend) as an annotation."""

from __future__ import annotations

from ....api.core import Pod
from ....api.volcano import Job, TaskSpec
from .base import JobPlugin


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
