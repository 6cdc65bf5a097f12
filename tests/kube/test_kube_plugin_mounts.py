"""On a cluster, the ``svc`` and ``ssh`` job plugins' objects reach the pods as Volcano mounts them:
ConfigMap ``<job>-svc`` at ``/etc/volcano`` and Secret ``<job>-ssh`` at ``/root/.ssh`` (mode 0600),
in every container and init container, so an MPI job's ``mpirun`` over ssh finds its hosts and keys.

Against the in-process API double: the controllers and the scheduler with the fake kubelet (the pods
as the API server holds them), then with the process-backed kubelet (the files a container reads).
A real kube-apiserver accepts these pods: test_kube_real.py's mpi-hello.yaml run checks them.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, load_example  # noqa: E402


def run(coro, timeout: float = 90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


KEYS = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")


def test_mpi_example_pods_are_sent_with_the_hosts_and_keys_mounted():
    async def scenario():
        nodes, objs, held = load_example("mpi-hello.yaml")
        async with Cluster(nodes, held) as c:
            c.start_controllers()
            c.start_scheduler()
            await c.until_ready()
            await c.create(objs)

            async def all_pods():
                pods = [p for p in await c.pods("default") if p["metadata"]["name"].startswith("lm-mpi-job-")]
                return len(pods) == 4 and pods

            pods = await c.wait_for(all_pods, 20, "the job's 4 pods")
            for p in pods:
                spec = p["spec"]
                volumes = {v["name"]: v for v in spec["volumes"]}
                assert volumes["lm-mpi-job-svc"] == {"name": "lm-mpi-job-svc", "configMap": {"name": "lm-mpi-job-svc"}}
                secret = volumes["lm-mpi-job-ssh"]["secret"]
                assert secret["secretName"] == "lm-mpi-job-ssh" and secret["defaultMode"] == 0o600
                assert secret["items"] == [{"key": k, "path": f".ssh/{k}"} for k in KEYS]
                for container in spec["containers"]:
                    assert container["volumeMounts"] == [
                        {"name": "lm-mpi-job-svc", "mountPath": "/etc/volcano"},
                        {"name": "lm-mpi-job-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"},
                    ]
                    assert container["ports"][0]["name"] == "mpijob-port"  # the template's own fields kept
                assert spec["imagePullSecrets"] == [{"name": "default-secret"}]

            cms = {m["metadata"]["name"]: m for m in await c.objects("ConfigMap", "default")}
            hosts = cms["lm-mpi-job-svc"]["data"]["mpiworker.host"]
            assert hosts.splitlines() == [f"lm-mpi-job-mpiworker-{i}.lm-mpi-job" for i in range(3)]
            secrets = {s["metadata"]["name"]: s for s in await c.objects("Secret", "default")}
            assert set(secrets["lm-mpi-job-ssh"]["data"]) == set(KEYS)

    run(scenario())


# Each container (the init container too) checks what it finds where Volcano's pods find it. (Pod
# names are spelt out at run time: the process kubelet turns those in a command into addresses.)
CHECK = """
import os, sys
w = ['j-w-%d' % i for i in range(2)]
hosts = open('/etc/volcano/w.host').read().split()
assert hosts == [n + '.j' for n in w], hosts
assert open('/etc/volcano/VC_W_NUM').read() == os.environ['VC_W_NUM'] == '2'
assert (os.stat('/root/.ssh/id_rsa').st_mode & 0o777) == 0o600
assert open('/root/.ssh/id_rsa.pub').read() == open('/root/.ssh/authorized_keys').read()
assert open('/root/.ssh/id_rsa').read().startswith('-----BEGIN RSA PRIVATE KEY-----')
assert 'Host ' + w[1] + '\\n  HostName ' + w[1] + '.j\\n' in open('/root/.ssh/config').read()
print('found', sys.argv[1], hosts, flush=True)
"""


def job_reading_its_mounts() -> dict:
    def container(name: str, cpu: str | None) -> dict:
        c = {"name": name, "image": "python:3.11", "command": [sys.executable, "-c", CHECK, name]}
        if cpu:
            c["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
        return c

    def task(name: str, n: int) -> dict:
        spec = {
            "restartPolicy": "Never",
            "initContainers": [container("setup", None)],
            "containers": [container("main", "100m")],
        }
        return {"name": name, "replicas": n, "template": {"spec": spec}}

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 3,
            "plugins": {"ssh": [], "svc": []},
            "tasks": [task("m", 1), task("w", 2)],
        },
    }


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the process kubelet runs processes the Linux way")
def test_containers_find_the_hosts_and_keys_where_volcano_puts_them():
    from lavaflow.testing.process_kubelet import ProcessKubelet

    async def scenario():
        async with Cluster([]) as c:
            await c.kubelet.stop()  # the pods run as processes instead
            kubelet = ProcessKubelet(c.client(), 2, node_prefix="mounts", cpu="2", memory="4Gi", heartbeat=0.2)
            await kubelet.start()
            try:
                c.start_controllers()
                c.start_scheduler()
                await c.until_ready()
                await c.create([job_reading_its_mounts()])

                async def finished():
                    pods = [p for p in await c.pods("default") if p["metadata"]["name"].startswith("j-")]
                    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in pods}
                    return len(phases) == 3 and all(v in ("Succeeded", "Failed") for v in phases.values()) and phases

                phases = await c.wait_for(finished, 60, "the job's 3 pods to finish")
                logs = {n: kubelet.logs("default", n, "main") + kubelet.logs("default", n, "setup") for n in phases}
                assert phases == {"j-m-0": "Succeeded", "j-w-0": "Succeeded", "j-w-1": "Succeeded"}, logs
                for name, text in logs.items():
                    assert "found setup ['j-w-0.j', 'j-w-1.j']" in text and "found main" in text, (name, text)
                secret = next(s for s in await c.objects("Secret", "default") if s["metadata"]["name"] == "j-ssh")
                assert base64.b64decode(secret["data"]["config"]).decode().startswith("StrictHostKeyChecking no\n")
            finally:
                await kubelet.stop()

    run(scenario())
