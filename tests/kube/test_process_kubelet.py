"""The process-backed kubelet: pods bound to its nodes run as local processes.

Against the API double (and, when LAVAFLOW_TEST_KUBECONFIG names a kubeconfig, once against a real
kube-apiserver): phases from exit codes, environment and the downward API, ConfigMap volumes kept
up to date, deletion (SIGTERM, SIGKILL after the grace period), logs, restarts, node registration
and heartbeats, pods bound through the API, and no process left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
if not Path("/proc/self/stat").exists():
    pytest.skip("runs processes the Linux way (process groups, /proc)", allow_module_level=True)

from kube_harness import wait_for  # noqa: E402
from lavaflow.kube.client import ClientConfig, KubeClient, load_config  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402
from lavaflow.testing.process_kubelet import ProcessKubelet, expand, pod_ip, write_atomic  # noqa: E402

PY = sys.executable
KUBECONFIG = os.environ.get("LAVAFLOW_TEST_KUBECONFIG")


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def pod(name: str, script: str, ns: str = "default", node: str | None = "pn-0", **spec) -> dict:
    container = {"name": "main", "image": "python:3.11", "command": [PY, "-c", script]}
    container.update(spec.pop("container", {}))
    doc: dict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **spec.pop("metadata", {})},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }
    if node:
        doc["spec"]["nodeName"] = node
    return doc


class Env:
    """An API double, a client and a process kubelet with two nodes ``pn-0`` and ``pn-1``."""

    def __init__(self, **kw) -> None:
        self.kw = kw

    async def __aenter__(self) -> Env:
        self.double = ApiDouble(bookmark_interval=0.1).start()
        self.api = KubeClient(ClientConfig(server=self.double.url, qps=0, burst=0))
        kw = {"node_prefix": "pn", "cpu": "4", "memory": "8Gi", "backoff": (0.1, 0.5), "heartbeat": 0.2}
        kw.update(self.kw)
        self.kubelet = ProcessKubelet(KubeClient(ClientConfig(server=self.double.url, qps=0, burst=0)), 2, **kw)
        await self.kubelet.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.kubelet.stop()
        await self.kubelet.client.close()
        await self.api.close()
        self.double.stop()
        assert_no_process_left(self.kubelet)

    async def create(self, doc: dict) -> dict:
        ns = doc["metadata"].get("namespace", "default")
        kind = doc["kind"].lower() + "s"
        return await self.api.request("POST", f"/api/v1/namespaces/{ns}/{kind}", body=doc)

    async def get(self, name: str, ns: str = "default") -> dict | None:
        return self.double.get("Pod", f"{ns}/{name}")

    async def until(self, predicate, timeout: float = 15.0, what: str = "condition"):
        return await wait_for(predicate, timeout, what)

    async def phase(self, name: str, want: str, ns: str = "default", timeout: float = 15.0) -> dict:
        async def reached():
            p = await self.get(name, ns)
            return p if p and (p.get("status") or {}).get("phase") == want else None

        return await self.until(reached, timeout, f"pod {name} {want}")


def running(pgid: int | None = None, pid: int | None = None) -> list[int]:
    """The processes (not zombies: this machine's init may reap them late) of a process group or
    the one process ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[3])
        if state not in "ZX" and (group == pgid or int(d.name) == pid):
            out.append(int(d.name))
    return out


def assert_no_process_left(kubelet: ProcessKubelet) -> None:
    alive = [pid for pid in kubelet.pids if running(pgid=pid)]
    assert not alive, f"process groups left running: {alive}"


def test_expansion_and_addresses():
    env = {"A": "x", "B": "$(A)"}
    assert expand("$(A)-$(C)-$$(A)-$$-$A-$(", env) == "x-$(C)-$(A)-$-$A-$("
    assert expand("$(B)", env) == "$(A)"  # values are not expanded again
    ip = pod_ip("ns", "a")
    assert ip == pod_ip("ns", "a") != pod_ip("ns", "b")
    parts = [int(x) for x in ip.split(".")]
    assert parts[0] == 127 and parts[1] >= 1 and 1 <= parts[3] <= 254


def test_atomic_writer_swaps_data_and_drops_removed_files(tmp_path):
    assert write_atomic(tmp_path, {"a.sh": (b"1", 0o555), "d/b": (b"2", 0o644)})
    assert (tmp_path / "a.sh").read_bytes() == b"1" and (tmp_path / "a.sh").stat().st_mode & 0o777 == 0o555
    assert (tmp_path / "d" / "b").read_bytes() == b"2"
    assert not write_atomic(tmp_path, {"a.sh": (b"1", 0o555), "d/b": (b"2", 0o644)})  # nothing changed
    assert write_atomic(tmp_path, {"a.sh": (b"3", 0o555)})
    assert (tmp_path / "a.sh").read_bytes() == b"3" and not (tmp_path / "d").exists()
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith("..") and not p.is_symlink()]
    assert len(hidden) == 1  # the old generation is gone


def test_pod_succeeds_with_a_kubelets_status_and_its_logs():
    async def scenario():
        async with Env() as e:
            await e.create(pod("ok", "import sys; print('hello out'); print('hello err', file=sys.stderr)"))
            p = await e.phase("ok", "Succeeded")
            st = p["status"]
            assert st["podIP"] == pod_ip("default", "ok") and st["podIPs"] == [{"ip": st["podIP"]}]
            assert st["hostIP"] == "127.0.0.1" and st["startTime"]
            (cs,) = st["containerStatuses"]
            term = cs["state"]["terminated"]
            assert (cs["name"], term["exitCode"], term["reason"], cs["restartCount"]) == ("main", 0, "Completed", 0)
            assert cs["containerID"].startswith("process://")
            conds = {c["type"]: c for c in st["conditions"]}
            assert conds["PodScheduled"]["status"] == "True" if "PodScheduled" in conds else True
            assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "PodCompleted"
            assert conds["Initialized"]["status"] == "True"
            logs = e.kubelet.logs("default", "ok")
            assert "hello out" in logs and "hello err" in logs
            assert e.kubelet.log_path("default", "ok").name == "0.log"

    run(scenario())


def test_exit_code_3_fails_the_pod():
    async def scenario():
        async with Env() as e:
            await e.create(pod("bad", "import sys; sys.exit(3)"))
            p = await e.phase("bad", "Failed")
            term = p["status"]["containerStatuses"][0]["state"]["terminated"]
            assert (term["exitCode"], term["reason"]) == (3, "Error")

    run(scenario())


def test_environment_downward_api_config_maps_and_the_api_server():
    script = "import json, os; print(json.dumps(dict(os.environ)))"

    async def scenario():
        async with Env() as e:
            await e.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "settings", "namespace": "team"},
                    "data": {"LEVEL": "debug", "mode": "fast"},
                }
            )
            env = [
                {"name": "PLAIN", "value": "v1"},
                {"name": "EXPANDED", "value": "$(PLAIN)-$(MISSING)-$$(PLAIN)"},
                *(
                    {"name": n, "valueFrom": {"fieldRef": {"fieldPath": f}}}
                    for n, f in [
                        ("POD_NAME", "metadata.name"),
                        ("POD_NS", "metadata.namespace"),
                        ("POD_IP", "status.podIP"),
                        ("NODE", "spec.nodeName"),
                        ("ANN", "metadata.annotations['lavaflow.io/x']"),
                        ("LAB", "metadata.labels['app']"),
                    ]
                ),
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {
                    "name": "MEM_MI",
                    "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}},
                },
            ]
            doc = pod(
                "envy",
                script,
                ns="team",
                node="pn-1",
                metadata={"labels": {"app": "trainer"}, "annotations": {"lavaflow.io/x": "42"}},
                container={
                    "env": env,
                    "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CM_"}],
                    "resources": {"requests": {"memory": "256Mi"}, "limits": {"cpu": "1500m"}},
                },
            )
            await e.create(doc)
            p = await e.phase("envy", "Succeeded", ns="team")
            got = json.loads(e.kubelet.logs("team", "envy"))
            assert got["PLAIN"] == "v1" and got["EXPANDED"] == "v1-$(MISSING)-$(PLAIN)"
            assert (got["POD_NAME"], got["POD_NS"], got["NODE"]) == ("envy", "team", "pn-1")
            assert got["POD_IP"] == p["status"]["podIP"] == pod_ip("team", "envy")
            assert (got["ANN"], got["LAB"], got["MODE"]) == ("42", "trainer", "fast")
            assert (got["CM_LEVEL"], got["CM_mode"]) == ("debug", "fast")
            assert (got["CPU"], got["MEM_MI"]) == ("2", "256")
            assert got["HOSTNAME"] == "envy"
            assert (got["KUBERNETES_SERVICE_HOST"], got["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", str(e.double.port))
            # the pod's kubeconfig reaches the API server the kubelet talks to
            cfg = load_config(got["KUBECONFIG"])
            assert cfg.server == e.double.url and cfg.namespace == "team"
            sa = Path(got["LAVAFLOW_MOUNT_ROOT"]) / "var/run/secrets/kubernetes.io/serviceaccount"
            assert (sa / "namespace").read_text() == "team"

    run(scenario())


def test_pod_waits_for_its_config_map():
    async def scenario():
        async with Env(retry_interval=0.1) as e:
            doc = pod(
                "waits",
                "print('ran')",
                container={"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "x"}}}]},
            )
            await e.create(doc)

            async def waiting():
                p = await e.get("waits")
                cs = (p.get("status") or {}).get("containerStatuses") or [{}]
                return cs[0].get("state", {}).get("waiting", {}).get("reason") == "CreateContainerConfigError"

            await e.until(waiting, what="CreateContainerConfigError")
            assert (await e.get("waits"))["status"]["phase"] == "Pending"
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {"x": "1"}}
            await e.create(cm)
            await e.phase("waits", "Succeeded")

    run(scenario())


DISCOVER_V1 = "#!/bin/sh\necho host-a:2\n"
DISCOVER_V2 = "#!/bin/sh\necho host-a:2\necho host-b:2\n"


def test_config_map_volume_has_its_mode_and_follows_the_config_map():
    """Horovod's way: a process runs /etc/mpi/discover_hosts.sh (mode 0555, from a ConfigMap) again
    and again and sees the new hosts once the ConfigMap changes."""
    script = (
        "import subprocess, sys, time\n"
        "seen = ''\n"
        "for _ in range(400):\n"
        "    out = subprocess.run([sys.argv[1]], capture_output=True, text=True).stdout\n"
        "    if out != seen:\n"
        "        print('HOSTS', out.split(), flush=True)\n"
        "        seen = out\n"
        "    if 'host-b:2' in out:\n"
        "        sys.exit(0)\n"
        "    time.sleep(0.05)\n"
        "sys.exit(1)\n"
    )

    async def scenario():
        async with Env() as e:
            cm = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "job-mpi"},
                "data": {"discover_hosts.sh": DISCOVER_V1, "hostfile": "host-a slots=2\n"},
            }
            await e.create(cm)
            doc = pod(
                "launcher",
                script,
                container={
                    "args": ["/etc/mpi/discover_hosts.sh"],
                    "volumeMounts": [
                        {"name": "mpi", "mountPath": "/etc/mpi"},
                        {"name": "scratch", "mountPath": "/scratch"},
                    ],
                },
                volumes=[
                    {
                        "name": "mpi",
                        "configMap": {
                            "name": "job-mpi",
                            "items": [{"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}],
                            "defaultMode": 0o644,
                        },
                    },
                    {"name": "scratch", "emptyDir": {}},
                ],
            )
            await e.create(doc)
            await e.phase("launcher", "Running")
            root = e.kubelet.run_of("default", "launcher").mount_root(
                e.kubelet.run_of("default", "launcher").containers[0]
            )
            script_path = root / "etc/mpi/discover_hosts.sh"

            async def first():
                return "HOSTS ['host-a:2']" in e.kubelet.logs("default", "launcher")

            await e.until(first, what="the first discovery")
            assert script_path.read_text() == DISCOVER_V1
            assert script_path.stat().st_mode & 0o777 == 0o555
            assert not (root / "etc/mpi/hostfile").exists()  # items: only the keys named
            assert (root / "scratch").is_dir()
            cm["data"]["discover_hosts.sh"] = DISCOVER_V2
            await e.api.request("PUT", "/api/v1/namespaces/default/configmaps/job-mpi", body=cm)
            await e.phase("launcher", "Succeeded")
            assert "HOSTS ['host-a:2', 'host-b:2']" in e.kubelet.logs("default", "launcher")
            assert script_path.stat().st_mode & 0o777 == 0o555

    run(scenario())


def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(tmp_path):
    polite = (
        "import signal, sys, time\n"
        f"def bye(*_):\n    open({str(tmp_path / 'polite')!r}, 'w').write('TERM')\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        f"open({str(tmp_path / 'polite-up')!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    stubborn = (
        "import signal, time\n"
        f"def seen(*_):\n    open({str(tmp_path / 'stubborn')!r}, 'a').write('TERM')\n"
        "signal.signal(signal.SIGTERM, seen)\n"
        f"open({str(tmp_path / 'stubborn-up')!r}, 'w').close()\n"
        "while True:\n    time.sleep(0.05)\n"
    )

    async def scenario():
        async with Env() as e:
            await e.create(pod("polite", polite))
            await e.create(pod("stubborn", stubborn, terminationGracePeriodSeconds=1))

            async def up():
                if not ((tmp_path / "polite-up").exists() and (tmp_path / "stubborn-up").exists()):
                    return False
                # A process may write its file before the kubelet's spawn has returned to it (seen
                # on a loaded machine): wait for the kubelet to hold both processes too.
                runs = [e.kubelet.run_of("default", n) for n in ("polite", "stubborn")]
                return all(r is not None and r.containers[0].proc is not None for r in runs)

            await e.until(up, what="both processes up")
            await e.phase("polite", "Running")
            runs = {n: e.kubelet.run_of("default", n) for n in ("polite", "stubborn")}
            pids = {n: r.containers[0].proc.pid for n, r in runs.items()}
            t0 = time.monotonic()
            for n in ("polite", "stubborn"):
                await e.api.request("DELETE", f"/api/v1/namespaces/default/pods/{n}")
            await e.until(lambda: _done(runs["polite"]), 5, "polite pod stopped")
            assert (tmp_path / "polite").read_text() == "TERM"
            assert time.monotonic() - t0 < 1.0
            await e.until(lambda: _done(runs["stubborn"]), 5, "stubborn pod killed")
            waited = time.monotonic() - t0
            assert (tmp_path / "stubborn").read_text() == "TERM"  # it got SIGTERM, ignored it
            assert 0.9 <= waited < 3.0, waited
            term = runs["stubborn"].containers[0].state["terminated"]
            assert (term["exitCode"], term["signal"]) == (137, signal.SIGKILL)
            assert not [pid for pid in pids.values() if running(pgid=pid)]

    run(scenario())


async def _done(r) -> bool:
    return r.task.done()


async def _gone(pid: int) -> bool:
    return not running(pid=pid)


def test_restart_policy_on_failure_restarts_with_back_off_and_keeps_each_runs_log():
    script = (
        "import os, sys\n"
        "marker = os.path.join(os.environ['LAVAFLOW_MOUNT_ROOT'], 'work', 'tries')\n"
        "n = int(open(marker).read()) if os.path.exists(marker) else 0\n"
        "open(marker, 'w').write(str(n + 1))\n"
        "print('try', n)\n"
        "sys.exit(0 if n >= 2 else 1)\n"
    )

    async def scenario():
        async with Env() as e:
            doc = pod(
                "flaky",
                script,
                restartPolicy="OnFailure",
                container={"volumeMounts": [{"name": "work", "mountPath": "/work"}]},
                volumes=[{"name": "work", "emptyDir": {}}],
            )
            await e.create(doc)
            p = await e.phase("flaky", "Succeeded")
            cs = p["status"]["containerStatuses"][0]
            assert cs["restartCount"] == 2
            assert cs["lastState"]["terminated"]["exitCode"] == 1
            assert e.kubelet.logs("default", "flaky").strip() == "try 2"
            assert e.kubelet.logs("default", "flaky", previous=True).strip() == "try 1"

    run(scenario())


def test_init_containers_run_first_and_a_missing_command_fails():
    async def scenario():
        async with Env() as e:
            doc = pod("inits", "print(open('/shared/x').read())")  # the mount path in the code is rewritten too
            doc["spec"]["initContainers"] = [
                {
                    "name": "prep",
                    "command": ["sh", "-c", "echo prepared > /shared/x"],
                    "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                }
            ]
            doc["spec"]["containers"][0]["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
            doc["spec"]["volumes"] = [{"name": "shared", "emptyDir": {}}]
            await e.create(doc)
            p = await e.phase("inits", "Succeeded")
            assert p["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
            assert e.kubelet.logs("default", "inits").strip() == "prepared"
            nocmd = pod("nocmd", "")
            del nocmd["spec"]["containers"][0]["command"]
            await e.create(nocmd)
            p = await e.phase("nocmd", "Failed")
            term = p["status"]["containerStatuses"][0]["state"]["terminated"]
            assert term["reason"] == "StartError" and "no command" in term["message"]

    run(scenario())


def test_nodes_are_registered_with_capacity_and_heartbeats():
    async def scenario():
        async with Env(gpus=2, labels={"pool": "local"}) as e:
            nodes = {n["metadata"]["name"]: n for n in e.double.snapshot("Node")}
            assert set(nodes) == {"pn-0", "pn-1"}
            n = nodes["pn-0"]
            assert n["status"]["capacity"] == {"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"}
            assert n["status"]["allocatable"] == n["status"]["capacity"]
            assert n["metadata"]["labels"]["pool"] == "local"
            assert n["metadata"]["labels"]["kubernetes.io/hostname"] == "pn-0"
            ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
            assert {"type": "InternalIP", "address": "127.0.0.1"} in n["status"]["addresses"]
            assert n["status"]["nodeInfo"]["operatingSystem"] == "linux"

            async def renewed():
                lease = e.double.get("Lease", "kube-node-lease/pn-1")
                return lease if lease and int(lease["metadata"]["resourceVersion"]) > 0 else None

            first = await e.until(renewed, what="a node Lease")
            assert first["spec"]["holderIdentity"] == "pn-1" and first["spec"]["leaseDurationSeconds"] == 40
            assert first["metadata"]["ownerReferences"][0]["kind"] == "Node"

            async def later():
                lease = e.double.get("Lease", "kube-node-lease/pn-1")
                return lease["spec"]["renewTime"] != first["spec"]["renewTime"]

            await e.until(later, 5, "the Lease renewed")

    run(scenario())


def test_the_not_ready_taint_is_cleared_and_pods_get_the_chosen_python_first_on_path(tmp_path):
    """A Node that exists with the ``not-ready`` taint (kube-apiserver's TaintNodesByCondition puts
    it on every new Node; no node lifecycle controller runs here) loses it, other taints stay; the
    pods' PATH starts with the directory of the interpreter the kubelet was given."""
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").symlink_to(PY)

    async def scenario():
        double = ApiDouble(bookmark_interval=0.1).start()
        api = KubeClient(ClientConfig(server=double.url, qps=0, burst=0))
        other = {"key": "dedicated", "value": "train", "effect": "NoSchedule"}
        taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, other]
        await api.request("POST", "/api/v1/nodes", body={"metadata": {"name": "pn-0"}, "spec": {"taints": taints}})
        kubelet = ProcessKubelet(
            KubeClient(ClientConfig(server=double.url, qps=0, burst=0)),
            1,
            node_prefix="pn",
            python=str(bindir / "python"),
        )
        try:
            await kubelet.start()
            assert double.get("Node", "pn-0")["spec"]["taints"] == [other]
            doc = pod("which", "import os, sys; print(os.environ['PATH'].split(os.pathsep)[0])", node="pn-0")
            doc["spec"]["containers"][0]["command"][0] = "python"
            await api.request("POST", "/api/v1/namespaces/default/pods", body=doc)

            async def done():
                p = double.get("Pod", "default/which")
                return (p.get("status") or {}).get("phase") == "Succeeded"

            await wait_for(done, 15, "the pod Succeeded")
            assert kubelet.logs("default", "which").strip() == str(bindir)
        finally:
            await kubelet.stop()
            await kubelet.client.close()
            await api.close()
            double.stop()
        assert_no_process_left(kubelet)

    run(scenario())


def test_pod_bound_through_the_api_runs_and_others_nodes_are_left_alone():
    async def scenario():
        async with Env() as e:
            await e.create(pod("bound-later", "print('bound')", node=None))
            await e.create(pod("elsewhere", "print('no')", node="someone-else"))
            # The watch delivers events in order: once the kubelet has taken up a pod created after
            # these two, it has seen them, and left them alone.
            await e.create(pod("marker", "print('marker')", node="pn-0"))
            await e.until(lambda: e.kubelet.run_of("default", "marker") is not None, what="the marker taken up")
            assert e.kubelet.run_of("default", "bound-later") is None
            assert e.kubelet.run_of("default", "elsewhere") is None
            assert (await e.get("bound-later"))["status"]["phase"] == "Pending"
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "bound-later"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "pn-1"},
            }
            await e.api.request("POST", "/api/v1/namespaces/default/pods/bound-later/binding", body=binding)
            await e.phase("bound-later", "Succeeded")
            assert e.kubelet.logs("default", "bound-later").strip() == "bound"
            assert (await e.get("elsewhere"))["status"]["phase"] == "Pending"
            assert e.kubelet.run_of("default", "elsewhere") is None

    run(scenario())


def test_pod_dns_names_become_pod_addresses():
    """A Volcano-style MASTER_ADDR (``<job>-master-0.<job>``) is the master pod's own loopback
    address, even for a pod that starts before the master exists, and two pods listen on the same
    port, each on its address."""
    listen = (
        "import os, socket\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind((os.environ['POD_IP'], 29400)); s.listen()\n"
    )
    server = listen + "print('listening', os.environ['MASTER_ADDR'], flush=True)\nc, _ = s.accept(); c.sendall(b'hi')\n"
    client = listen + (
        "import time\n"
        "for _ in range(200):\n"
        "    try:\n        c = socket.create_connection((os.environ['MASTER_ADDR'], 29400)); break\n"
        "    except OSError:\n        time.sleep(0.05)\n"
        "print('got', c.recv(2).decode(), os.environ['HOSTS'])\n"
    )

    ns = f"dns-{uuid.uuid4().hex[:6]}"  # addresses of its own: runs at the same time do not meet

    def member(name: str, script: str) -> dict:
        env = [
            {"name": "MASTER_ADDR", "value": "job-master-0.job"},
            {"name": "HOSTS", "value": f"job-master-0.job,job-worker-0.job.{ns}.svc.cluster.local"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
        return pod(name, script, ns=ns, hostname=name, subdomain="job", container={"env": env})

    async def scenario():
        async with Env() as e:
            await e.create(member("job-worker-0", client))
            await e.create(member("job-master-0", server))
            await e.phase("job-master-0", "Succeeded", ns=ns)
            await e.phase("job-worker-0", "Succeeded", ns=ns)
            master, worker = pod_ip(ns, "job-master-0"), pod_ip(ns, "job-worker-0")
            assert e.kubelet.logs(ns, "job-master-0").strip() == f"listening {master}"
            assert e.kubelet.logs(ns, "job-worker-0").strip() == f"got hi {master},{worker}"
            hosts = (e.kubelet.root / "hosts").read_text().splitlines()
            assert f"{master}\tjob-master-0.job.{ns}.svc.cluster.local" in hosts[1]

    run(scenario())


def test_stop_kills_running_pods_and_what_they_spawned(tmp_path):
    async def scenario():
        async with Env() as e:
            await e.create(pod("sleeper", "import time; time.sleep(60)"))
            script = f"sleep 60 & echo $! > {tmp_path}/child; exit 0"
            bg = pod("leaver", "", container={"command": ["sh", "-c", script]})
            await e.create(bg)
            await e.phase("sleeper", "Running")
            await e.phase("leaver", "Succeeded")
            child = int((tmp_path / "child").read_text())
            await e.until(lambda: _gone(child), 5, "the background child killed")  # with its container
        # Env's exit stopped the kubelet and checked that no process group is left

    run(scenario())


# ---------------------------------------------------------------------------------------- real server
@pytest.mark.skipif(
    not KUBECONFIG,
    reason="no real API server configured: set LAVAFLOW_TEST_KUBECONFIG to a kubeconfig of a disposable cluster",
)
def test_process_kubelet_on_a_real_api_server(tmp_path):
    """A node registered and heartbeating, a pod run to Succeeded with its downward API and a
    ConfigMap volume, a pod deleted (SIGTERM seen, deletion finished by the kubelet)."""

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns, node = f"lavaflow-pk-{suffix}", f"pk-{suffix}"
        cfg = load_config(KUBECONFIG)
        cfg.qps, cfg.burst = 0, 0
        api = KubeClient(cfg)
        kubelet = ProcessKubelet(KubeClient(cfg), [node], cpu="2", memory="4Gi", heartbeat=0.5, backoff=(0.1, 0.5))
        try:
            await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
            await kubelet.start()
            n = await api.request("GET", f"/api/v1/nodes/{node}")
            assert n["status"]["allocatable"]["cpu"] == "2"
            assert next(c for c in n["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
            cm = {"metadata": {"name": "scripts"}, "data": {"run.sh": "#!/bin/sh\necho from-configmap\n"}}
            await api.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=cm)
            ok = pod(
                "ok",
                "import os, subprocess; print(os.environ['POD_IP'], subprocess.run(['/opt/s/run.sh'], capture_output=True, text=True).stdout.strip())",
                ns=ns,
                node=node,
                container={
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "volumeMounts": [{"name": "s", "mountPath": "/opt/s"}],
                },
                volumes=[{"name": "s", "configMap": {"name": "scripts", "defaultMode": 0o555}}],
            )
            await api.request("POST", f"/api/v1/namespaces/{ns}/pods", body=ok)
            marker = tmp_path / "term"
            slow = pod(
                "slow",
                "import signal, sys, time\n"
                f"signal.signal(signal.SIGTERM, lambda *_: (open({str(marker)!r}, 'w').write('TERM'), sys.exit(0)))\n"
                "time.sleep(120)\n",
                ns=ns,
                node=node,
                terminationGracePeriodSeconds=5,
            )
            await api.request("POST", f"/api/v1/namespaces/{ns}/pods", body=slow)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = {
                    p["metadata"]["name"]: p
                    for p in (await api.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
                }
                phases = {k: (v.get("status") or {}).get("phase") for k, v in got.items()}
                if phases == {"ok": "Succeeded", "slow": "Running"}:
                    break
                await asyncio.sleep(0.2)
            assert phases == {"ok": "Succeeded", "slow": "Running"}, phases
            ip = got["ok"]["status"]["podIP"]
            assert ip == pod_ip(ns, "ok") and kubelet.logs(ns, "ok").split() == [ip, "from-configmap"]
            await api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/slow")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                items = (await api.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
                if [p["metadata"]["name"] for p in items] == ["ok"]:
                    break
                await asyncio.sleep(0.2)
            assert [p["metadata"]["name"] for p in items] == ["ok"]
            assert marker.read_text() == "TERM"
            lease = await api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
            assert lease["spec"]["holderIdentity"] == node
        finally:
            await kubelet.stop(delete_nodes=True)
            with contextlib.suppress(Exception):
                await api.request(
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/pods",
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                )
                await api.request("DELETE", f"/api/v1/namespaces/{ns}")
            await kubelet.client.close()
            await api.close()
        assert_no_process_left(kubelet)

    run(scenario(), 120)
