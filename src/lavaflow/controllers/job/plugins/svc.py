"""svc: a headless Service and a ConfigMap of the tasks' hosts, for pods to find each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....api.core import ConfigMap, ConfigMapVolumeSource, Pod, Service, Volume, VolumeMount
from ....api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, Job, TaskSpec
from .base import JobPlugin, bool_arg, env_name, mount_everywhere, owner_refs, set_env, task_hosts

if TYPE_CHECKING:  # pragma: no cover
    from ....store.base import Store


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
            data[f"VC_{env_name(t.name)}_HOSTS"] = ",".join(hosts)
            data[f"VC_{env_name(t.name)}_NUM"] = str(len(hosts))
        return data

    def on_job_add(self, job: Job, store: Store) -> None:
        svc = Service.model_validate(
            {
                "metadata": {"name": job.name, "namespace": job.namespace, "ownerReferences": owner_refs(job)},
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace},
                    "publishNotReadyAddresses": bool_arg(self.args, "publish-not-ready-addresses", False),
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
                            "ownerReferences": owner_refs(job),
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
        if bool_arg(self.args, "inject-hosts-env", True):
            env = {}
            for t in job.spec.tasks:
                env[f"VC_{env_name(t.name)}_HOSTS"] = ",".join(task_hosts(job, t))
                env[f"VC_{env_name(t.name)}_NUM"] = str(t.replicas)
            set_env(pod, env)
        name = f"{job.name}{SVC_SUFFIX}"
        mount_everywhere(
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
