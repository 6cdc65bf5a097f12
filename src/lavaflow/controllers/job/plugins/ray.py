"""ray: the head's and the workers' ray start commands, and a Service for the head."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.core import ContainerPort, Pod, Service
from ....api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, TASK_SPEC_KEY, Job, TaskSpec
from .base import JobPlugin, owner_refs

if TYPE_CHECKING:  # pragma: no cover
    from ....store.base import Store


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
                            "ownerReferences": owner_refs(job),
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
