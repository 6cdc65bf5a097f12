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

One module a plugin (env, svc, ssh, pytorch, mpi, tensorflow, ray, hcclrank), what they share in
``base``; here the registry and how the controller calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .base import JobPlugin
from .env import EnvPlugin
from .hcclrank import HCCLRankPlugin
from .mpi import MPIPlugin
from .pytorch import PyTorchPlugin
from .ray import RayPlugin
from .ssh import SSHPlugin
from .svc import SvcPlugin
from .tensorflow import TensorFlowPlugin

if TYPE_CHECKING:  # pragma: no cover
    from ....api.core import Pod
    from ....api.volcano import Job
    from ....store.base import Store

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
