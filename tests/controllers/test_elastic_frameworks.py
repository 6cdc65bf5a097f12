"""Training frameworks follow an elastic job's resizes (issue 32): the ``mpi`` job plugin keeps
Horovod's host discovery script true, the ``pytorch`` plugin gives torchrun a rendezvous.

In the simulator: the discovery script is checked after every step of the run against the worker
pods that run at that moment, through scale-in, scale-out, a lost node and a migration.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest
import yaml

from conftest import EXAMPLES
from lavaflow.api.core import ConfigMap
from lavaflow.api.loader import load_text
from lavaflow.api.mpijob import to_volcano_job
from lavaflow.controllers.job.plugins import mpi as mpi_plugin
from lavaflow.scheduler.framework.conf import load_scheduler_conf
from lavaflow.sim import engine
from lavaflow.sim.inputs import prepare


def oracle_conf():
    """lavaflow's default configuration, its elastic policy Lavaflow on the true speed models (the
    workers here report nothing), rescheduling at once: resizes come when the test says."""
    conf = load_scheduler_conf()
    elastic = next(p for t in conf.tiers for p in t.plugins if p.name == "elastic")
    elastic.arguments.update(
        {
            "elastic.policy": "Lavaflow",
            "elastic.resizeInterval": "0s",
            "elastic.resizeCost": "30s",
            "elastic.oracle": True,
        }
    )
    return conf


def node(name: str, gpus: int = 2, annotations: dict | None = None, count: int = 1) -> dict:
    return {
        "apiVersion": "sim.lavaflow.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "count": count,
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
        },
    }


def container(name: str, gpus: int = 0, env: dict | None = None) -> dict:
    res: dict = {"requests": {"cpu": "1"}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": gpus}
    c: dict = {"name": name, "image": "horovod/horovod:0.28.1", "resources": res}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return c


def elastic_job(
    name: str,
    workers: int,
    fewest: int,
    epochs: int,
    plugins: dict | None = None,
    launcher: bool = True,
    gpus: int = 1,
    at: str | None = None,
    speed: bool = True,
    annotations: dict | None = None,
    worker_env: dict | None = None,
) -> dict:
    """A Volcano Job with GPU workers (fewest..workers of them) and, optionally, a CPU launcher."""
    ann = dict(annotations or {})
    if speed:
        ann.update(
            {
                "lavaflow.io/speedup": ",".join(f"{n}:{n}" for n in range(1, workers + 1)),
                "lavaflow.io/epoch-time": "60s",
                "lavaflow.io/epochs": str(epochs),
            }
        )
    if at:
        ann["sim.lavaflow.io/submit-at"] = at
    tasks = []
    if launcher:
        tasks.append(
            {
                "name": "launcher",
                "replicas": 1,
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                "template": {"spec": {"containers": [container("launcher")]}},
            }
        )
    tasks.append(
        {
            "name": "worker",
            "replicas": workers,
            "template": {"spec": {"containers": [container("worker", gpus, worker_env)]}},
        }
    )
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": ann},
        "spec": {
            "minAvailable": fewest + (1 if launcher else 0),
            "plugins": plugins if plugins is not None else {"mpi": ["--master=launcher", "--worker=worker"]},
            "tasks": tasks,
        },
    }


def text(*docs: dict) -> str:
    return "".join("---\n" + json.dumps(d) + "\n" for d in docs)


def running_workers(sim: engine.Simulation, job: str) -> list[tuple[str, str]]:
    """(pod, node) of the job's worker pods that run now, by index."""
    pods = [
        p
        for p in sim.store.list("Pod")
        if p.metadata.labels.get("volcano.sh/job-name") == job
        and p.metadata.labels.get("volcano.sh/task-spec") == "worker"
        and p.status.phase == "Running"
    ]
    pods.sort(key=lambda p: int(p.metadata.labels["volcano.sh/task-index"]))
    return [(p.name, p.spec.node_name) for p in pods]


def follow(monkeypatch, source: str, job: str, slots: int = 1) -> tuple[engine.Simulation, list]:
    """Run ``source``; after every step check that ``job``'s discovery script lists exactly its
    running workers; return the simulation and the placements seen, in order."""
    seen: list[tuple[float, list[tuple[str, str]]]] = []
    settle = engine.Simulation._settle

    def checked(self):
        settle(self)
        cm = self.store.get("ConfigMap", f"default/{job}-config")
        running = running_workers(self, job)
        if cm is None:
            assert not running, (self.now, running)
            return
        want = "#!/bin/sh\n" + "".join(f"echo {pod}.{job}:{slots}\n" for pod, _ in running)
        assert cm.data["discover_hosts.sh"] == want, (self.now, cm.data, running)
        if not seen or seen[-1][1] != running:
            seen.append((self.now, running))

    monkeypatch.setattr(engine.Simulation, "_settle", checked)
    sim = engine.Simulation(prepare(load_text(source)), conf=oracle_conf(), seed=0)
    result = sim.run()
    assert result["stuck"] == [] and all(j["phase"] == "Completed" for j in result["jobs"]), result["jobs"]
    return sim, seen


def test_discovery_follows_scale_in_scale_out_and_a_lost_node(monkeypatch):
    """hvd runs on 4 workers (nodes a and b), shrinks to 2 when a short job arrives, grows back
    to 4 when it completes, and loses node b: its two workers there come back on node c."""
    source = text(
        node("a"),
        node("b", annotations={"sim.lavaflow.io/fail-at": "20m", "sim.lavaflow.io/recover-at": "25m"}),
        node("c"),
        elastic_job("hvd", 4, 1, 120),
        elastic_job("other", 4, 2, 8, plugins={}, launcher=False, at="10m"),
    )
    _, seen = follow(monkeypatch, source, "hvd")
    names = [[pod for pod, _ in placement] for _, placement in seen]
    four = [f"hvd-worker-{i}" for i in range(4)]
    assert names[:4] == [[], four, four[:2], four], seen  # start, scale-in, scale-out
    nodes = [dict(placement) for _, placement in seen]
    assert nodes[3] == {four[0]: "a-0", four[1]: "a-0", four[2]: "b-0", four[3]: "b-0"}, seen
    # node b is lost (its workers leave the script), they are placed on c (and come back)
    assert names[4] == four[:2] and nodes[5] == {four[0]: "a-0", four[1]: "a-0", four[2]: "c-0", four[3]: "c-0"}
    assert names[-1] == []  # done: no worker runs, none is listed


def three_gpu_gang() -> dict:
    """Job r: one 3-GPU pod for an hour, the gang that holds n-0 in the migration scenarios."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "r"},
        "spec": {
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": {"sim.lavaflow.io/duration": "60m"}},
                        "spec": {"containers": [container("t", gpus=3)]},
                    },
                }
            ],
        },
    }


def test_discovery_follows_a_migration(monkeypatch):
    """hvd starts on the one GPU left on n-1; when q completes, the policy grows it to 3 workers on
    n-0 and moves its worker off n-1 (evicted there, bound again on n-0)."""
    source = text(
        node("n", gpus=4, count=2),
        elastic_job("q", 4, 3, 30, plugins={}, launcher=False),
        three_gpu_gang(),
        elastic_job("hvd", 3, 1, 300, at="1m"),
    )
    _, seen = follow(monkeypatch, source, "hvd")
    placements = [dict(p) for _, p in seen]
    moved = [
        (before, after)
        for before, after in zip(placements, placements[1:])
        if any(after.get(pod) not in (None, node) for pod, node in before.items())
        or (set(before) - set(after) and set(after) - set(before))
    ]
    assert placements[1] == {"hvd-worker-0": "n-1"}, seen
    assert moved, seen  # a worker left n-1 while others started on n-0
    assert placements[-2] == {f"hvd-worker-{i}": "n-0" for i in range(3)}, seen


def test_discovery_script_runs_and_prints_host_slots(tmp_path):
    script = mpi_plugin.discover_hosts_script([("j-worker-0.j", 2), ("j-worker-3.j", 2)])
    path = tmp_path / "discover_hosts.sh"
    path.write_text(script)
    out = subprocess.run(["sh", str(path)], capture_output=True, text=True, check=True)
    assert out.stdout == "j-worker-0.j:2\nj-worker-3.j:2\n" and out.stderr == ""
    # as mounted (mode 0555), Horovod runs it as a program: the shebang makes it one
    path.chmod(mpi_plugin.DISCOVER_HOSTS_MODE)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o555
    if shutil.which("sh"):
        assert subprocess.run([str(path)], capture_output=True, text=True, check=True).stdout == out.stdout
    # no worker running: prints nothing, successfully
    path.chmod(0o644)
    path.write_text(mpi_plugin.discover_hosts_script([]))
    assert subprocess.run(["sh", str(path)], capture_output=True, text=True, check=True).stdout == ""


def created(source: str, until: float = 5.0) -> engine.Simulation:
    sim = engine.Simulation(prepare(load_text(source)), conf=oracle_conf(), seed=0, until=until)
    sim.run()
    return sim


def pod(sim: engine.Simulation, name: str):
    return sim.store.get("Pod", f"default/{name}")


def test_launcher_and_workers_mount_the_discovery_script_read_only_0555():
    sim = created(text(node("a", gpus=4), elastic_job("hvd", 4, 1, 10)))
    for name in ("hvd-launcher-0", "hvd-worker-0", "hvd-worker-3"):
        p = pod(sim, name)
        vols = [v for v in p.spec.volumes if v.name == mpi_plugin.MPI_CONFIG_VOLUME]
        assert len(vols) == 1 and vols[0].config_map is not None
        source = vols[0].config_map
        assert source.name == "hvd-config"
        assert [(i.key, i.path, i.mode) for i in source.items] == [("discover_hosts.sh", "discover_hosts.sh", 0o555)]
        mounts = [(m.name, m.mount_path, m.read_only) for c in p.spec.containers for m in c.volume_mounts or ()]
        # (after the svc plugin's hosts and the ssh plugin's keys, which every pod of the job mounts)
        assert mounts == [
            ("hvd-svc", "/etc/volcano", None),
            ("hvd-ssh", "/root/.ssh", None),
            (mpi_plugin.MPI_CONFIG_VOLUME, "/etc/mpi", True),
        ]
    cm = sim.store.get("ConfigMap", "default/hvd-config")
    assert [(r.kind, r.name, r.controller) for r in cm.metadata.owner_references] == [("Job", "hvd", True)]
    # the pod the API server is sent carries the volume (modelled fields, camelCase)
    dumped = pod(sim, "hvd-launcher-0").spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped["volumes"][-1] == {
        "name": "mpi-job-config",
        "configMap": {
            "name": "hvd-config",
            "items": [{"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 365}],
        },
    }
    assert dumped["containers"][0]["volumeMounts"][-1] == {
        "name": "mpi-job-config",
        "mountPath": "/etc/mpi",
        "readOnly": True,
    }


def test_template_volumes_and_mounts_are_kept_beside_the_discovery_volume():
    job = elastic_job("hvd", 2, 1, 10)
    w = job["spec"]["tasks"][1]["template"]["spec"]
    w["volumes"] = [{"name": "data", "emptyDir": {"medium": "Memory"}}, {"name": "mine", "configMap": {"name": "x"}}]
    w["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"},
        {"name": "mine", "mountPath": "/etc/mpi"},
    ]
    sim = created(text(node("a", gpus=4), job))
    spec = pod(sim, "hvd-worker-0").spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert spec["volumes"][:2] == w["volumes"]  # kept whole (emptyDir is not modelled)
    assert [v["name"] for v in spec["volumes"][2:]] == ["hvd-svc", "hvd-ssh", "mpi-job-config"]
    # the template mounts its own volume at /etc/mpi: that container keeps it, nothing is mounted over it
    mounts = spec["containers"][0]["volumeMounts"]
    assert mounts[:2] == w["containers"][0]["volumeMounts"]
    assert [m["mountPath"] for m in mounts[2:]] == ["/etc/volcano", "/root/.ssh"]


def test_slots_are_the_workers_gpus_or_the_jobs_setting():
    def lines(job: dict) -> list[str]:
        sim = created(text(node("a", gpus=8), job))
        name = job["metadata"]["name"]
        return sim.store.get("ConfigMap", f"default/{name}-config").data["discover_hosts.sh"].splitlines()

    two = lines(elastic_job("two", 3, 1, 10, gpus=2))
    assert two == ["#!/bin/sh"] + [f"echo two-worker-{i}.two:2" for i in range(3)]
    four = lines(elastic_job("four", 2, 1, 10, annotations={mpi_plugin.SLOTS_PER_WORKER: "4"}))
    assert four == ["#!/bin/sh"] + [f"echo four-worker-{i}.four:4" for i in range(2)]


def test_mpijob_slots_per_worker_becomes_the_jobs_setting():
    docs = list(yaml.safe_load_all((EXAMPLES / "voda-mpijob.yaml").read_text()))
    mpijob = next(d for d in docs if d["kind"] == "MPIJob")
    assert mpijob["spec"]["slotsPerWorker"] == 1
    job = to_volcano_job(dict(mpijob, spec={**mpijob["spec"], "slotsPerWorker": 2}))
    assert job["metadata"]["annotations"][mpi_plugin.SLOTS_PER_WORKER] == "2"


def test_voda_mpijob_example_runs_unchanged_with_host_discovery(monkeypatch):
    """Voda's MPIJob YAML, unchanged: the launcher's `horovodrun --host-discovery-script
    /etc/mpi/discover_hosts.sh` finds the script, and the script follows the job's resizes."""
    source = (EXAMPLES / "voda-mpijob.yaml").read_text()
    assert "--host-discovery-script /etc/mpi/discover_hosts.sh" in source
    seen: list[str] = []
    settle = engine.Simulation._settle

    def checked(self):
        settle(self)
        for job in self.store.list("Job"):
            cm = self.store.get("ConfigMap", f"{job.namespace}/{job.name}-config")
            assert cm is not None
            pods = [
                p
                for p in self.store.list("Pod")
                if p.metadata.labels.get("volcano.sh/job-name") == job.name
                and p.metadata.labels.get("volcano.sh/task-spec") == "worker"
                and p.status.phase == "Running"
            ]
            pods.sort(key=lambda p: int(p.metadata.labels["volcano.sh/task-index"]))
            want = "#!/bin/sh\n" + "".join(f"echo {p.name}.{job.name}:1\n" for p in pods)
            assert cm.data["discover_hosts.sh"] == want
            if not seen or seen[-1] != want:
                seen.append(want)

    monkeypatch.setattr(engine.Simulation, "_settle", checked)
    sim = engine.Simulation(prepare(load_text(source)), seed=0)
    result = sim.run()
    assert all(j["phase"] == "Completed" for j in result["jobs"])
    assert max(s.count("echo ") for s in seen) == 4  # grew to its maximum
    launcher = next(p for p in sim.store.list("Pod") if p.name == "tf2-keras-cifar10-resnet50-elastic-launcher-0")
    mounts = [m.mount_path for c in launcher.spec.containers for m in c.volume_mounts or ()]
    assert mounts == ["/etc/volcano", "/root/.ssh", "/etc/mpi"]


def test_no_write_when_the_script_did_not_change(monkeypatch):
    writes: list[str] = []
    sim_update = engine.MemoryStore.update

    def update(self, obj, old=None, quiet=False):
        if isinstance(obj, ConfigMap) and obj.name.endswith("-config"):
            writes.append(obj.data["discover_hosts.sh"])
        return sim_update(self, obj, old, quiet)

    monkeypatch.setattr(engine.MemoryStore, "update", update)
    source = text(
        node("a"),
        node("b"),
        elastic_job("hvd", 4, 1, 60),
        elastic_job("other", 2, 1, 5, plugins={}, launcher=False, at="5m"),
    )
    sim = engine.Simulation(prepare(load_text(source)), conf=oracle_conf(), seed=0)
    sim.run()
    # every pod event of the job reconciles it; the ConfigMap is written only when its script moves
    assert writes and all(a != b for a, b in zip(writes, writes[1:])), writes


def test_discovery_config_map_goes_with_the_job_and_another_objects_is_left_alone():
    source = text(node("a", gpus=4), elastic_job("hvd", 2, 1, 10), elastic_job("taken", 2, 1, 10))
    sim = engine.Simulation(prepare(load_text(source)), conf=oracle_conf(), seed=0, until=5)
    foreign = ConfigMap.model_validate(
        {"metadata": {"name": "taken-config", "namespace": "default"}, "data": {"hostfile": "mine"}}
    )
    sim.store.create(foreign)
    sim.run()
    assert sim.store.get("ConfigMap", "default/taken-config").data == {"hostfile": "mine"}
    assert "discover_hosts.sh" in sim.store.get("ConfigMap", "default/hvd-config").data
    for name in ("hvd", "taken"):
        sim.store.delete("Job", f"default/{name}")
    sim.now += 1
    sim._settle()
    assert sim.store.get("ConfigMap", "default/hvd-config") is None
    assert sim.store.get("ConfigMap", "default/taken-config") is not None


def worker_env(sim: engine.Simulation, name: str) -> dict[str, str]:
    return {e.name: e.value for e in pod(sim, name).spec.containers[0].env}


def test_elastic_pytorch_job_gets_torchrun_rendezvous_and_no_world_size():
    job = elastic_job(
        "tr", 8, 2, 10, plugins={"pytorch": ["--port=29400"]}, launcher=False, worker_env={"PET_MAX_RESTARTS": "7"}
    )
    sim = created(text(node("a", gpus=8), job))
    job_uid = sim.store.get("Job", "default/tr").metadata.uid
    for i in range(8):
        env = worker_env(sim, f"tr-worker-{i}")
        assert not {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"} & set(env), env
        assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
            "PET_NNODES": "2:8",
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": "tr-worker-0.tr:29400",
            "PET_RDZV_ID": job_uid,
            "PET_RDZV_CONF": f"is_host={'true' if i == 0 else 'false'}",
            "PET_MAX_RESTARTS": "7",  # the container's own value is kept
            "PET_NPROC_PER_NODE": "1",
        }


def test_elastic_pytorch_job_with_a_master_meets_at_the_master():
    job = elastic_job("tm", 3, 1, 10, plugins={"pytorch": []}, launcher=False)
    job["spec"]["tasks"].insert(
        0, {"name": "master", "replicas": 1, "template": {"spec": {"containers": [container("m", gpus=1)]}}}
    )
    job["spec"]["minAvailable"] = 2
    sim = created(text(node("a", gpus=8), job))
    master, worker = worker_env(sim, "tm-master-0"), worker_env(sim, "tm-worker-2")
    assert master["PET_NNODES"] == worker["PET_NNODES"] == "2:4"
    assert master["PET_RDZV_ENDPOINT"] == worker["PET_RDZV_ENDPOINT"] == "tm-master-0.tm:23456"
    assert (master["PET_RDZV_CONF"], worker["PET_RDZV_CONF"]) == ("is_host=true", "is_host=false")


def test_pytorch_job_that_is_not_elastic_keeps_its_fixed_world():
    # the same shape without a speed model is an ordinary gang: Volcano's variables, as before
    job = elastic_job("fx", 2, 1, 10, plugins={"pytorch": []}, launcher=False, speed=False)
    sim = created(text(node("a", gpus=8), job))
    env = worker_env(sim, "fx-worker-1")
    assert env["WORLD_SIZE"] == "2" and env["RANK"] == "1" and env["MASTER_PORT"] == "23456"
    assert not any(k.startswith("PET_") for k in env)


# The env of every pod of a rigid MPI job, in order, as the mpi, ssh and svc plugins wrote it before
# issue 32 (Volcano's semantics): it must not change by a byte.
RIGID_ENV = {
    "m-launcher-0": [
        ("VC_LAUNCHER_HOSTS", "m-launcher-0.m"),
        ("VC_LAUNCHER_NUM", "1"),
        ("VC_WORKER_HOSTS", "m-worker-0.m,m-worker-1.m"),
        ("VC_WORKER_NUM", "2"),
        ("MPI_HOST", "m-worker-0.m,m-worker-1.m"),
    ],
    "m-worker-0": [
        ("VC_LAUNCHER_HOSTS", "m-launcher-0.m"),
        ("VC_LAUNCHER_NUM", "1"),
        ("VC_WORKER_HOSTS", "m-worker-0.m,m-worker-1.m"),
        ("VC_WORKER_NUM", "2"),
    ],
}


@pytest.mark.parametrize("speed", [True, False], ids=["rigid-with-speed-model", "elastic-shape-no-speed-model"])
def test_mpi_job_that_is_not_elastic_is_unchanged(speed):
    job = elastic_job("m", 2, 2 if speed else 1, 10, speed=speed)
    sim = created(text(node("a", gpus=4), job))
    for name, env in RIGID_ENV.items():
        p = pod(sim, name)
        assert [(e.name, e.value) for c in p.spec.containers for e in c.env] == env
        # only what the svc and ssh plugins mount in every pod, as Volcano does: no host discovery
        assert [v.name for v in p.spec.volumes] == ["m-svc", "m-ssh"]
        assert [m.mount_path for c in p.spec.containers for m in c.volume_mounts or ()] == [
            "/etc/volcano",
            "/root/.ssh",
        ]
        dumped = json.dumps(p.spec.model_dump(by_alias=True, exclude_none=True, mode="json"), sort_keys=True)
        assert "mpi-job-config" not in dumped and "/etc/mpi" not in dumped
    assert sim.store.get("ConfigMap", "default/m-config") is None


def test_elastic_torchrun_example_runs_and_its_workers_get_a_rendezvous():
    from conftest import simulate

    r = simulate((EXAMPLES / "elastic-torchrun.yaml").read_text(encoding="utf-8"))
    assert r["stuck"] == [] and all(j["phase"] == "Completed" for j in r["jobs"])
    # the first job is resized while it runs (shrunk for the second, grown back)
    reasons = [(e["reason"], e["message"].split(":")[0]) for e in r["events"] if "bert-elastic" in e["object"]]
    assert ("Resized", "resized 8 → 6 workers") in reasons and ("Resized", "resized 6 → 8 workers") in reasons
    for p in r["pods"]:
        env = p["env"]
        assert "WORLD_SIZE" not in env and "RANK" not in env
        assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_RDZV_ENDPOINT"] == f"{p['job']}-worker-0.{p['job']}:29400"
        assert env["PET_NNODES"] == {"bert-elastic": "2:8", "resnet-elastic": "2:4"}[p["job"]]


def test_moving_the_rendezvous_host_restarts_the_whole_torchrun_group(monkeypatch):
    """The migration of test_discovery_follows_a_migration, for a torchrun job: its worker 0 hosts
    the c10d rendezvous store, and when that worker goes every other worker's torchrun fails. So
    the policy's move of worker 0 off n-1 evicts the whole group at once (none is bound beside it
    in that session), and the group forms again on n-0; worker 0 never leaves while others run."""
    source = text(
        node("n", gpus=4, count=2),
        elastic_job("q", 4, 3, 30, plugins={}, launcher=False),
        three_gpu_gang(),
        elastic_job("ddp", 3, 1, 300, at="1m", plugins={"pytorch": [], "svc": []}, launcher=False),
    )
    seen: list[dict[str, str]] = []
    settle = engine.Simulation._settle

    def recorded(self):
        settle(self)
        running = dict(running_workers(self, "ddp"))
        if not seen or seen[-1] != running:
            seen.append(running)

    monkeypatch.setattr(engine.Simulation, "_settle", recorded)
    sim = engine.Simulation(prepare(load_text(source)), conf=oracle_conf(), seed=0)
    result = sim.run()
    assert result["stuck"] == [] and all(j["phase"] == "Completed" for j in result["jobs"]), result["jobs"]
    host = "ddp-worker-0"
    assert pod(sim, host).metadata.annotations["lavaflow.io/rendezvous-host"] == "true"
    assert "lavaflow.io/rendezvous-host" not in pod(sim, "ddp-worker-1").metadata.annotations
    assert seen[1] == {host: "n-1"}, seen
    moves = [(a, b) for a, b in zip(seen, seen[1:]) if host in a and b.get(host) != a[host]]
    assert moves, seen  # the policy did move worker 0
    for before, after in moves:
        # worker 0 left: so did every worker that ran beside it
        assert not after, (before, after, seen)
    assert seen[-2] == {f"ddp-worker-{i}": "n-0" for i in range(3)}, seen
