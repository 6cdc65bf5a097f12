"""tensorflow: TF_CONFIG with the cluster spec and the pod's own task."""

from __future__ import annotations

import json

from ....api.core import Pod
from ....api.volcano import Job, TaskSpec
from .base import JobPlugin, set_env, task_hosts


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
        set_env(pod, {"TF_CONFIG": json.dumps(tf_config, separators=(",", ":"), sort_keys=True)})
