"""env: the pod's task index in VK_TASK_INDEX and VC_TASK_INDEX."""

from __future__ import annotations

from ....api.core import Pod
from ....api.volcano import Job, TaskSpec
from .base import JobPlugin, set_env


class EnvPlugin(JobPlugin):
    name = "env"

    def on_pod_create(self, job: Job, task: TaskSpec, index: int, pod: Pod) -> None:
        set_env(pod, {"VK_TASK_INDEX": str(index), "VC_TASK_INDEX": str(index)})
