"""The ``svc`` and ``ssh`` job plugins mount what they create into the job's pods, as Volcano does:
ConfigMap ``<job>-svc`` at ``/etc/volcano`` (``<task>.host``, ``VC_<TASK>_HOSTS``, ``VC_<TASK>_NUM``)
and Secret ``<job>-ssh`` at ``/root/.ssh`` (mode 0600) or ``--ssh-key-file-path`` (mode 0644), in
every container and init container. Through the simulator (the controllers are the cluster's)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from test_lifecycle import run_sim

from conftest import node_group
from lavaflow.api.core import ConfigMap, Pod
from lavaflow.api.loader import load_text
from lavaflow.api.volcano import Job
from lavaflow.controllers.job.plugins.svc import SvcPlugin
from lavaflow.sim.engine import Simulation
from lavaflow.sim.inputs import prepare
from lavaflow.store.memory import MemoryStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def job(plugins: dict | None, tasks: list[tuple[str, int]], name: str = "j", init: bool = False, **spec) -> str:
    def template(task: str) -> dict:
        pod: dict = {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}},
                {"name": "side", "image": "busybox"},
            ],
        }
        if init:
            pod["initContainers"] = [{"name": "setup", "image": "busybox"}]
        pod.update(spec.get(task, {}))
        return {"metadata": {"annotations": {"sim.lavaflow.io/duration": "5"}}, "spec": pod}

    body: dict = {
        "schedulerName": "volcano",
        "tasks": [{"name": t, "replicas": n, "template": template(t)} for t, n in tasks],
    }
    if plugins is not None:
        body["plugins"] = plugins
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": body}
    return "---\n" + json.dumps(doc) + "\n"


def created(text: str) -> tuple[object, dict[str, Pod]]:
    """The simulation and each pod as the job controller created it."""
    seen: dict[str, Pod] = {}
    sim, _ = run_sim(
        node_group("n", 2, cpu="8") + text,
        until=100,
        watch={"Pod": lambda ev, p, old: seen.setdefault(p.name, p) if ev == "ADDED" else None},
    )
    return sim, seen


def dumped(pod: Pod) -> dict:
    """The pod's spec as the API server is sent it."""
    return pod.spec.model_dump(by_alias=True, exclude_none=True, mode="json")


def every_container(spec: dict) -> list[dict]:
    return spec["containers"] + spec.get("initContainers", [])


SVC_MOUNT = {"name": "j-svc", "mountPath": "/etc/volcano"}
SVC_VOLUME = {"name": "j-svc", "configMap": {"name": "j-svc"}}


def ssh_volume(mode: int) -> dict:
    items = [{"key": k, "path": f".ssh/{k}"} for k in ("id_rsa", "id_rsa.pub", "authorized_keys", "config")]
    return {"name": "j-ssh", "secret": {"secretName": "j-ssh", "items": items, "defaultMode": mode}}


# ------------------------------------------------------------------ svc


def test_svc_mounts_its_config_map_at_etc_volcano_in_every_container_and_init_container():
    sim, pods = created(job({"svc": []}, [("ps", 1), ("mpi-worker", 2)], init=True))
    assert sorted(pods) == ["j-mpi-worker-0", "j-mpi-worker-1", "j-ps-0"]
    for p in pods.values():
        spec = dumped(p)
        assert spec["volumes"] == [SVC_VOLUME]
        assert [c["volumeMounts"] for c in every_container(spec)] == [[SVC_MOUNT]] * 3
    # the files at /etc/volcano: Volcano's keys, the task's name with "-" as "_"
    hosts = ["j-mpi-worker-0.j", "j-mpi-worker-1.j"]
    assert sim.store.get("ConfigMap", "default/j-svc").data == {
        "ps.host": "j-ps-0.j",
        "VC_PS_HOSTS": "j-ps-0.j",
        "VC_PS_NUM": "1",
        "mpi_worker.host": "\n".join(hosts),
        "VC_MPI_WORKER_HOSTS": ",".join(hosts),
        "VC_MPI_WORKER_NUM": "2",
    }


def test_svc_env_is_unchanged_and_matches_the_mounted_files():
    sim, pods = created(job({"svc": []}, [("ps", 1), ("mpi-worker", 2)], init=True))
    data = sim.store.get("ConfigMap", "default/j-svc").data
    want = [
        ("VC_PS_HOSTS", "j-ps-0.j"),
        ("VC_PS_NUM", "1"),
        ("VC_MPI_WORKER_HOSTS", "j-mpi-worker-0.j,j-mpi-worker-1.j"),
        ("VC_MPI_WORKER_NUM", "2"),
    ]
    for p in pods.values():
        for c in p.spec.containers + p.spec.init_containers:
            assert [(e.name, e.value) for e in c.env] == want
            assert all(data[e.name] == e.value for e in c.env)  # what Volcano's env reads from the ConfigMap
        assert (p.spec.hostname, p.spec.subdomain) == (p.name, "j")


def test_svc_inject_hosts_env_false_leaves_the_environment_alone_but_mounts_the_hosts():
    _, pods = created(job({"svc": ["--inject-hosts-env=false"]}, [("t", 2)]))
    for p in pods.values():
        assert all(c.env == [] for c in p.spec.containers)
        assert dumped(p)["volumes"] == [SVC_VOLUME]


def test_svc_publish_not_ready_addresses_reads_the_flag_as_go_does():
    for args, want in (
        ([], False),
        (["--publish-not-ready-addresses"], True),
        (["--publish-not-ready-addresses=1"], True),
    ):
        sim, _ = created(job({"svc": args}, [("t", 1)]))
        assert sim.store.get("Service", "default/j").spec.publish_not_ready_addresses is want


def test_svc_config_map_left_by_an_older_controller_gets_todays_keys():
    store = MemoryStore()
    j = Job.model_validate(json.loads(job({"svc": []}, [("a-b", 2)])[4:]))
    store.create(
        ConfigMap.model_validate({"metadata": {"name": "j-svc", "namespace": "default"}, "data": {"a-b.host": "x"}})
    )
    SvcPlugin([]).on_job_add(j, store)
    assert store.get("ConfigMap", "default/j-svc").data == {
        "a_b.host": "j-a-b-0.j\nj-a-b-1.j",
        "VC_A_B_HOSTS": "j-a-b-0.j,j-a-b-1.j",
        "VC_A_B_NUM": "2",
    }


# ------------------------------------------------------------------ ssh


def test_ssh_mounts_its_secret_at_root_ssh_mode_0600_in_every_container_and_init_container():
    _, pods = created(job({"ssh": []}, [("master", 1), ("worker", 2)], init=True))
    mount = {"name": "j-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"}
    for p in pods.values():
        spec = dumped(p)
        assert spec["volumes"] == [ssh_volume(0o600)]
        assert spec["volumes"][0]["secret"]["defaultMode"] == 384  # (as the API server shows 0600)
        assert [c["volumeMounts"] for c in every_container(spec)] == [[mount]] * 3


@pytest.mark.parametrize(
    "args", [["--ssh-key-file-path=/home/user/.ssh"], ["--no-root", "--ssh-key-file-path=/home/user/.ssh"]]
)
def test_ssh_key_file_path_mounts_elsewhere_readable_by_a_user_0644(args):
    _, pods = created(job({"ssh": args}, [("t", 2)]))
    for p in pods.values():
        spec = dumped(p)
        assert spec["volumes"] == [ssh_volume(0o644)]
        mount = {"name": "j-ssh", "mountPath": "/home/user/.ssh", "subPath": ".ssh"}
        assert [c["volumeMounts"] for c in spec["containers"]] == [[mount]] * 2


def test_ssh_no_root_alone_is_not_a_flag_any_more():
    """Volcano removed --no-root (2020): the keys stay at /root/.ssh with mode 0600."""
    _, pods = created(job({"ssh": ["--no-root"]}, [("t", 1)]))
    spec = dumped(pods["j-t-0"])
    assert spec["volumes"] == [ssh_volume(0o600)]
    assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/root/.ssh"


def secret_files(sim, name: str = "j") -> dict[str, str]:
    secret = sim.store.get("Secret", f"default/{name}-ssh")
    return {k: base64.b64decode(v).decode() for k, v in secret.data.items()}


def test_ssh_secret_holds_a_real_key_pair_and_a_config_naming_every_pod():
    sim, _ = created(job({"ssh": []}, [("master", 1), ("worker", 2)]))
    files = secret_files(sim)
    assert set(files) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    private = serialization.load_pem_private_key(files["id_rsa"].encode(), password=None)
    assert files["id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1, as Volcano writes it
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert files["id_rsa.pub"] == files["authorized_keys"] == public.decode() + "\n"
    config = files["config"]
    assert config.startswith("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")
    for host in ("j-master-0", "j-worker-0", "j-worker-1"):
        assert f"Host {host}\n  HostName {host}.j\n  Port 22\n" in config


def test_ssh_port_goes_into_the_config_and_an_invalid_one_falls_back_to_22():
    sim, _ = created(job({"ssh": ["--ssh-port=2222"]}, [("t", 1)]))
    assert "Host j-t-0\n  HostName j-t-0.j\n  Port 2222\n" in secret_files(sim)["config"]
    for bad in ("--ssh-port=70000", "--ssh-port=0", "--ssh-port=x"):
        sim, _ = created(job({"ssh": [bad]}, [("t", 1)]))
        assert "  Port 22\n" in secret_files(sim)["config"]


def test_ssh_user_given_keys_are_kept_as_given():
    private = "-----BEGIN RSA PRIVATE KEY-----\nMIIB=\n-----END RSA PRIVATE KEY-----\n"
    public = "ssh-rsa AAAAB3Nza== user@host"
    sim, _ = created(job({"ssh": [f"--ssh-private-key={private}", f"--ssh-public-key={public}"]}, [("t", 1)]))
    files = secret_files(sim)
    assert files["id_rsa"] == private  # its final newline kept
    assert files["id_rsa.pub"] == files["authorized_keys"] == public


def test_template_mounts_and_volumes_of_its_own_win():
    own = {
        "volumes": [{"name": "cfg", "configMap": {"name": "mine"}}, {"name": "j-ssh", "emptyDir": {}}],
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1"}},
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/volcano"}],
            },
            {"name": "side", "image": "busybox"},
        ],
    }
    _, pods = created(job({"svc": [], "ssh": []}, [("t", 1)], t=own))
    spec = dumped(pods["j-t-0"])
    # a volume named j-ssh is the template's: the ssh plugin adds nothing
    assert spec["volumes"] == [*own["volumes"], SVC_VOLUME]
    # main mounts its own /etc/volcano; side gets the job's
    assert spec["containers"][0]["volumeMounts"] == own["containers"][0]["volumeMounts"]
    assert spec["containers"][1]["volumeMounts"] == [SVC_MOUNT]


def test_pods_without_these_plugins_have_no_volumes_or_mounts():
    _, pods = created(job({"env": []}, [("t", 2)]) + job(None, [("t", 1)], name="bare"))
    for p in pods.values():
        assert p.spec.volumes == [] and all(c.volume_mounts is None for c in p.spec.containers)
        spec = dumped(p)
        assert spec["volumes"] == [] and "volumeMounts" not in json.dumps(spec)


# ------------------------------------------------------------------ Volcano's MPI examples


def example_run(name: str) -> tuple[dict, list[Pod], dict[str, ConfigMap]]:
    """Simulate an example: its result, each pod as created and each ConfigMap as created."""
    pods: dict[str, Pod] = {}
    cms: dict[str, ConfigMap] = {}
    sim = Simulation(prepare(load_text((EXAMPLES / name).read_text(encoding="utf-8"))), seed=0)
    sim.store.watch("Pod", lambda ev, p, old: pods.setdefault(p.name, p) if ev == "ADDED" else None)
    sim.store.watch("ConfigMap", lambda ev, m, old: cms.setdefault(m.name, m) if ev == "ADDED" else None)
    return sim.run(), list(pods.values()), cms


@pytest.mark.parametrize("example", ["mpi-hello.yaml", "mpi-plugin.yaml"])
def test_mpi_examples_pods_carry_the_hosts_and_the_keys(example):
    result, pods, cms = example_run(example)
    assert all(j["phase"] == "Completed" for j in result["jobs"])
    (name,) = {p.metadata.labels["volcano.sh/job-name"] for p in pods}
    workers = sorted(p.name for p in pods if p.metadata.labels["volcano.sh/task-spec"] == "mpiworker")
    assert len(pods) == 1 + len(workers) >= 3
    for p in pods:
        spec = dumped(p)
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes[f"{name}-svc"]["configMap"] == {"name": f"{name}-svc"}
        assert volumes[f"{name}-ssh"]["secret"]["defaultMode"] == 0o600
        for c in every_container(spec):
            paths = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert paths == {"/etc/volcano": f"{name}-svc", "/root/.ssh": f"{name}-ssh"}
    # what mpi-hello's master reads with `cat /etc/volcano/mpiworker.host`: the workers, one a line
    assert cms[f"{name}-svc"].data["mpiworker.host"].splitlines() == [f"{w}.{name}" for w in workers]
