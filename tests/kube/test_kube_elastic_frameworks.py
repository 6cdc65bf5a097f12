"""On a cluster, the training processes follow an elastic job's resizes (issue 32): the ``mpi`` job
plugin keeps Horovod's host discovery script (ConfigMap ``<job>-config`` at ``/etc/mpi``) true as the
scheduler shrinks and grows the job, and ``lavaflow train get jobs`` shows the resizes and the
job's last reported throughput.

Against the in-process API double: the scheduler with the elastic action, the controllers and the
fake kubelet (pods with an infinite duration run until deleted), as in test_kube_elastic.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from test_kube_elastic import CONF, elastic_job, gpu_node, running_workers  # noqa: E402

from kube_harness import Cluster  # noqa: E402
from lavaflow.cli.tables import format_train_jobs  # noqa: E402
from lavaflow.kube.client import MERGE_PATCH  # noqa: E402
from lavaflow.scheduler.framework.conf import load_scheduler_conf  # noqa: E402


def horovod_job(name: str, workers: int, fewest: int) -> dict:
    """An elastic Horovod job as Voda runs it: a launcher and GPU workers, the mpi plugin."""
    job = elastic_job(name, 1000, fewest, workers, "inf")
    job["spec"]["minAvailable"] = 1 + fewest
    job["spec"]["plugins"] = {"mpi": ["--master=launcher", "--worker=worker"]}
    job["spec"]["tasks"].insert(
        0,
        {
            "name": "launcher",
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {"sim.lavaflow.io/duration": "inf"}},
                "spec": {
                    "containers": [
                        {
                            "name": "launcher",
                            "image": "horovod/horovod:0.28.1",
                            "command": ["horovodrun", "--host-discovery-script", "/etc/mpi/discover_hosts.sh"],
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ]
                },
            },
        },
    )
    return job


def script_for(names: list[str], job: str) -> str:
    return "#!/bin/sh\n" + "".join(f"echo {n}.{job}:1\n" for n in names)


async def discovery_follows(c: Cluster, job: str, n: int, what: str) -> list[dict]:
    """Until ``job`` runs ``n`` workers and its discovery script lists exactly those."""

    async def check():
        pods = await c.pods("default")
        running = [n for n in running_workers(pods, job) if n.startswith(f"{job}-worker-")]
        running.sort(key=lambda name: int(name.rsplit("-", 1)[1]))
        cms = {m["metadata"]["name"]: m for m in await c.objects("ConfigMap", "default")}
        script = (cms.get(f"{job}-config") or {}).get("data", {}).get("discover_hosts.sh")
        return len(running) == n and script == script_for(running, job) and pods

    return await c.wait_for(check, 60, what)


def test_discovery_script_follows_the_scheduler_resizes_and_train_get_jobs_shows_them(tmp_path):
    async def scenario():
        async with Cluster([gpu_node("v100-0", 4, "v100"), gpu_node("v100-1", 4, "v100")], time_scale=0.01) as c:
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(CONF))
            await c.until_ready()
            await c.create([horovod_job("hvd", 8, 2)])
            pods = await discovery_follows(c, "hvd", 8, "hvd on 8 workers, all 8 listed")

            # the launcher (and each worker) mounts the script at /etc/mpi, mode 0555, as sent to the server
            launcher = next(p for p in pods if p["metadata"]["name"] == "hvd-launcher-0")
            volume = next(v for v in launcher["spec"]["volumes"] if v["name"] == "mpi-job-config")
            assert volume["configMap"]["name"] == "hvd-config"
            assert volume["configMap"]["items"] == [
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}
            ]
            (container,) = launcher["spec"]["containers"]
            assert {"name": "mpi-job-config", "mountPath": "/etc/mpi", "readOnly": True} in container["volumeMounts"]
            assert container["command"][-1] == "/etc/mpi/discover_hosts.sh"  # the template's own fields kept

            # scale-in: a second job arrives, hvd gives up its highest-index workers
            small = elastic_job("small", 10, 2, 4, "300s")
            await c.create([small])
            await discovery_follows(c, "hvd", 4, "hvd shrunk to 4 workers, 4 listed")
            # scale-out: small completes, hvd grows back
            await discovery_follows(c, "hvd", 8, "hvd back on 8 workers, 8 listed")

            cm = next(m for m in await c.objects("ConfigMap", "default") if m["metadata"]["name"] == "hvd-config")
            path = tmp_path / "discover_hosts.sh"
            path.write_text(cm["data"]["discover_hosts.sh"])
            out = subprocess.run(["sh", str(path)], capture_output=True, text=True, check=True).stdout
            assert out.splitlines() == [f"hvd-worker-{i}.hvd:1" for i in range(8)]
            assert [r["kind"] for r in cm["metadata"]["ownerReferences"]] == ["Job"]

            # the job's training agent reports its throughput (on the Job; the controller copies it)
            report = {"profile": [["v100", 2, 8, 32, 0, 0.25, 0.05]], "batchSize": 256}
            await c.api.request(
                "PATCH",
                "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/hvd",
                body={"metadata": {"annotations": {"lavaflow.io/metrics": json.dumps(report)}}},
                content_type=MERGE_PATCH,
            )

            async def shown():
                jobs = await c.objects("Job", "default")
                pods = await c.pods("default")
                pgs = await c.objects("PodGroup", "default")
                events = await c.objects("Event", "default")
                text = format_train_jobs(jobs, pods, podgroups=pgs, events=events)
                lines = text.splitlines()
                header = lines[0]
                row = next(ln for ln in lines[1:] if ln.startswith("hvd "))
                cell = {n: row[header.index(n) :].split("   ")[0].strip() for n in ("WORKERS", "RESIZES", "THROUGHPUT")}
                resizes = int(cell["RESIZES"]) if cell["RESIZES"].isdigit() else 0
                ok = cell["WORKERS"] == "8 (2-8)" and resizes >= 2 and cell["THROUGHPUT"] == "1024 samples/s"
                return ok and text

            await c.wait_for(shown, 30, "train get jobs: 8 (2-8) workers, 2 resizes, 1024 samples/s")

            # the ConfigMap goes with the job
            await c.api.request("DELETE", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/hvd")

            async def gone():
                names = {m["metadata"]["name"] for m in await c.objects("ConfigMap", "default")}
                return "hvd-config" not in names

            await c.wait_for(gone, 30, "hvd-config deleted with the job")

    asyncio.run(asyncio.wait_for(scenario(), 240))
