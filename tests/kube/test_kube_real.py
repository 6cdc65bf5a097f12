"""The acceptance scenarios against a real kube-apiserver (v1.30+) with fake nodes.

Skipped unless LAVAFLOW_TEST_KUBECONFIG names a kubeconfig of a disposable cluster (an apiserver
with etcd and no kubelets is enough: the fake kubelet here marks bound pods Running and then
Succeeded, and finishes deletions). The CRDs are applied from deploy/crds; nodes, namespaces and
objects made by a test are removed afterwards. kube-scheduler should be absent or not own the
schedulerName "volcano". Except in the webhook test, no admission webhook runs: objects are
defaulted by lavaflow's admission code before being created, as the webhook would. The webhook test
serves lavaflow's webhook on 127.0.0.1, so the API server must run on this machine (its
configurations match only that test's namespace and labelled queues). The Workload API test needs
kube-apiserver 1.36 started with --feature-gates=GenericWorkload=true
--runtime-config=scheduling.k8s.io/v1alpha2=true and skips on a server that does not serve it. The
test over Volcano's own CRDs reads them from a copy of Volcano's repository named by
LAVAFLOW_TEST_VOLCANO_REPO (skipped without it), puts them in place of lavaflow's and puts
lavaflow's back at the end.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
import yaml

KUBECONFIG = os.environ.get("LAVAFLOW_TEST_KUBECONFIG")
pytestmark = pytest.mark.skipif(
    not KUBECONFIG,
    reason="no real API server configured: set LAVAFLOW_TEST_KUBECONFIG to a kubeconfig of a disposable cluster (kube-apiserver v1.30+)",
)

ROOT = Path(__file__).resolve().parents[2]

# Imported with this module, not inside a scenario: compiling test_kube_e2e there (pytest rewrites
# its asserts) after the earlier scenarios had run failed on CPython 3.11.7 with "AST constructor
# recursion depth mismatch" (see python/cpython#106905), in two of four runs of this file.
from test_kube_e2e import spark_style  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 180))


async def _install_crds(client) -> None:
    from lavaflow.kube.ops import apply_manifest

    for p in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        await apply_manifest(client, yaml.safe_load(p.read_text()))
    await asyncio.sleep(2)  # CRDs become Established


def _admitted(doc: dict) -> dict:
    from lavaflow.api.kinds import kind_of_manifest
    from lavaflow.kube.webhook import review

    res = kind_of_manifest(doc)
    if res.kind not in ("Job", "PodGroup", "Queue"):
        return doc
    resp = review(
        {"uid": "t", "operation": "CREATE", "object": doc, "namespace": doc["metadata"].get("namespace")},
        res.kind,
        True,
    )
    if resp.get("patch"):
        import base64
        import json

        from lavaflow.kube.webhook import apply_json_patch

        doc = apply_json_patch(doc, json.loads(base64.b64decode(resp["patch"])))
    return doc


async def _cleanup(api, ns: str, nodes: list[dict]) -> None:
    """Delete what a test made. Jobs, PodGroups and pods go first, pods with grace period 0: a bare
    control plane (no kube-controller-manager, so no namespace controller or pod GC) would otherwise
    keep them, Running on deleted nodes and counted in the queues, and the next test would see them."""
    from lavaflow.api.kinds import kind_info
    from lavaflow.kube.client import ApiError
    from lavaflow.kube.ops import delete_object

    for kind in ("Job", "PodGroup", "Pod"):
        try:
            await api.request(
                "DELETE",
                kind_info(kind).path(ns),
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except ApiError:
            pass
    await delete_object(api, "Namespace", ns)
    for n in nodes:
        await delete_object(api, "Node", n["metadata"]["name"])


@pytest.mark.parametrize(
    "example,pods", [("mpi-hello.yaml", 4), ("tensorflow-benchmark.yaml", 3), ("spark-wordcount.yaml", 18)]
)
def test_examples_on_a_real_api_server(example, pods):
    from kube_harness import Cluster, load_example

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        nodes, objs, held = load_example(example)
        for n in nodes:
            n["metadata"]["name"] += f"-{suffix}"
        ns = f"lavaflow-e2e-{suffix}"
        for d in objs + held:
            d.setdefault("metadata", {})["namespace"] = ns
        async with Cluster(nodes, held, real=True, period=0.2, time_scale=0.02) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                c.start_scheduler()
                await c.until_ready()
                await c.create([_admitted(d) for d in objs])

                async def finished():
                    ps = await c.pods(ns)
                    return len(ps) >= pods and all(p["spec"].get("nodeName") for p in ps)

                await c.wait_for(finished, 120, "every pod bound")
                ps = await c.pods(ns)
                assert {p["spec"]["nodeName"] for p in ps} <= {n["metadata"]["name"] for n in nodes}
                for pg in await c.objects("PodGroup", ns):
                    assert pg["status"]["phase"] in ("Running", "Completed", "Inqueue")
                if example == "mpi-hello.yaml":
                    # the svc and ssh plugins' mounts, as the server keeps them (configMap's mode defaulted)
                    for p in ps:
                        volumes = {v["name"]: v for v in p["spec"]["volumes"]}
                        assert volumes["lm-mpi-job-svc"]["configMap"] == {
                            "name": "lm-mpi-job-svc",
                            "defaultMode": 0o644,
                        }
                        assert volumes["lm-mpi-job-ssh"]["secret"]["defaultMode"] == 0o600
                        mounts = {m["mountPath"]: m for m in p["spec"]["containers"][0]["volumeMounts"]}
                        assert mounts["/etc/volcano"]["name"] == "lm-mpi-job-svc"
                        assert mounts["/root/.ssh"] == {
                            "name": "lm-mpi-job-ssh",
                            "mountPath": "/root/.ssh",
                            "subPath": ".ssh",
                        }
                if example == "spark-wordcount.yaml":
                    # the deadlock scenario resolves: every application runs to the end

                    async def completed():
                        ps = await c.pods(ns)
                        pgs = await c.objects("PodGroup", ns)
                        return (
                            len(ps) == pods
                            and all(p["status"].get("phase") == "Succeeded" for p in ps)
                            and len(pgs) == 6
                            and all(pg["status"].get("phase") == "Completed" for pg in pgs)
                        )

                    await c.wait_for(completed, 120, "all six applications Succeeded and their PodGroups Completed")
            finally:
                await _cleanup(c.api, ns, nodes)

    run(scenario())


class _NodeNames:
    """Watch-free record of every pod's nodeName over time (a pod must never change node)."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.changed: list[str] = []

    def update(self, pods) -> None:
        for p in pods:
            key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            node = p["spec"].get("nodeName")
            if not node:
                continue
            if key in self.seen and self.seen[key] != node:
                self.changed.append(key)
            self.seen[key] = node


def _labelled_nodes(suffix: str, n: int, cpu: str, memory: str, start: int = 0) -> list[dict]:
    from lavaflow.testing import fake_node

    return [
        fake_node(f"rt-{suffix}-{i}", cpu=cpu, memory=memory, labels={"lavaflow-test": suffix})
        for i in range(start, start + n)
    ]


def test_spark_style_podgroup_is_all_or_nothing_on_a_real_api_server():
    """A PodGroup (minMember 3, minResources cpu 3) with annotation-linked pods: nothing is bound on 2 CPUs, all three on 4."""
    from kube_harness import Cluster, settled

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-spark-{suffix}"
        docs = []
        for d in spark_style():
            d["metadata"]["namespace"] = ns
            if d["kind"] == "Pod":
                d["spec"]["nodeSelector"] = {"lavaflow-test": suffix}
            docs.append(d)
        nodes = _labelled_nodes(suffix, 1, "2", "8Gi")
        extra = _labelled_nodes(suffix, 1, "2", "8Gi", start=1)
        async with Cluster(nodes, real=True, period=0.2) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                s = c.start_scheduler()
                await c.until_ready()
                await c.create([_admitted(d) for d in docs])

                async def explained():
                    pods = await c.pods(ns)
                    conds = [
                        next((x for x in p["status"].get("conditions", []) if x["type"] == "PodScheduled"), None)
                        for p in pods
                    ]
                    return len(pods) == 3 and all(x and x["status"] == "False" for x in conds) and conds

                conds = await c.wait_for(explained, 30, "PodScheduled=False on every pod")
                assert conds[0]["reason"] == "Unschedulable"
                assert conds[0]["message"].startswith("3/3 tasks in gang unschedulable"), conds[0]["message"]
                pg = (await c.objects("PodGroup", ns))[0]
                assert any(
                    x["type"] == "Unschedulable" and x["status"] == "True" for x in pg["status"].get("conditions", [])
                ), pg["status"]
                events = await c.objects("Event", ns)
                assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["kind"] == "Pod" for e in events)
                await settled(s)
                assert not [p for p in await c.pods(ns) if p["spec"].get("nodeName")], "a partial gang was bound"
                await c.create(extra)

                async def running():
                    pods = await c.pods(ns)
                    pg = (await c.objects("PodGroup", ns))[0]
                    return (
                        all(p["spec"].get("nodeName") for p in pods)
                        and pg["status"].get("phase") == "Running"
                        and pg["status"].get("running") == 3
                    )

                await c.wait_for(running, 30, "all three pods bound and the PodGroup Running with 3 running")
            finally:
                await _cleanup(c.api, ns, nodes + extra)

    run(scenario())


def test_killed_scheduler_restarts_on_a_real_api_server():
    """Kill the scheduler mid-run (no lease release): the next one rebuilds from the API, binds the rest, none twice, no overcommit."""
    from test_kube_e2e import many_jobs

    from kube_harness import Cluster, lease_tries, node_usage, settled

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-restart-{suffix}"
        nodes = _labelled_nodes(suffix, 6, "4", "16Gi")
        jobs = many_jobs(10, 2)
        for j in jobs:
            j["metadata"]["namespace"] = ns
            j["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {"lavaflow-test": suffix}
        names = _NodeNames()
        async with Cluster(nodes, real=True, lease=True, period=0.2) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                first = c.start_scheduler(f"sched-a-{suffix}", lease_duration=2.0, bind_workers=2)
                await c.until_ready()
                await c.create([_admitted(j) for j in jobs])

                async def bound_at_least(n):
                    pods = await c.pods(ns)
                    names.update(pods)
                    return sum(1 for p in pods if p["spec"].get("nodeName")) >= n

                await c.wait_for(lambda: bound_at_least(4), 60, "some pods bound")
                await c.kill_scheduler(first)
                before = sum(1 for p in await c.pods(ns) if p["spec"].get("nodeName"))
                second = c.start_scheduler(f"sched-b-{suffix}", lease_duration=2.0)
                await c.wait_for(lambda: bound_at_least(20), 90, "every pod bound after the restart")

                async def second_leads() -> bool:
                    return second.elector.is_leader

                # On a fast machine the first may have bound all 20 before it was killed: the
                # second then takes the lease (after it runs out) with nothing left to bind.
                await c.wait_for(second_leads, 10, "the second scheduler to take the lease")
                await settled(second)  # a cycle of its over all it had seen: nothing bound twice
                pods = await c.pods(ns)
                names.update(pods)
                assert len(pods) == 20 and before <= 20
                assert second.elector.is_leader
                assert second.writer.bind_failures == 0, (
                    "the restarted scheduler tried to bind a pod that was already bound"
                )
                assert first.writer.bound + second.writer.bound <= 20
                assert not names.changed, names.changed
                usage = node_usage(pods)
                assert all(v <= 4 for v in usage.values()), usage
                standby = c.start_scheduler(f"sched-c-{suffix}", lease_duration=2.0)
                tries = lease_tries(standby)
                await c.wait_for(lambda: tries, 30, "the standby, synced, trying for the lease")
                assert not any(tries)
                assert not standby.elector.is_leader and standby.writer.bound == 0
                print(
                    f"bound before the kill: {before}; by the first: {first.writer.bound}, by the second: {second.writer.bound}"
                )
            finally:
                await _cleanup(c.api, ns, nodes)

    run(scenario())


def test_admission_webhook_on_a_real_api_server(tmp_path):
    """The API server itself calls `lavaflow webhook`'s server over TLS (a generated self-signed
    certificate, its CA written into the webhook configurations): a Volcano Job gets Volcano's
    defaults and keeps the fields lavaflow does not model; an invalid Job and a Queue under a
    missing parent are refused with messages naming the object and the field."""
    from lavaflow.kube.client import ApiError, KubeClient, load_config
    from lavaflow.kube.manifests import webhook_objects
    from lavaflow.kube.ops import delete_object
    from lavaflow.kube.store import KubeStore
    from lavaflow.kube.webhook import WebhookServer, patch_ca_bundle, self_signed

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-webhook-{suffix}"
        name = f"lavaflow-webhook-{suffix}"
        cfg = load_config(KUBECONFIG)
        cfg.qps, cfg.burst = 0, 0
        api = KubeClient(cfg)
        store = KubeStore(api)
        for kind in ("Queue", "PodGroup", "Namespace"):
            store.inform(kind)
        served = None
        plurals = {
            "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
            "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
        }
        try:
            await _install_crds(api)
            await api.request(
                "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
            await store.start()
            assert await store.wait_synced(20)
            cert, key, ca = self_signed("lavaflow-webhook", ns, tmp_path)
            served = await WebhookServer(store).serve("127.0.0.1", 0, cert, key)
            for doc in webhook_objects(ns)[1:]:
                doc["metadata"]["name"] = name
                for wh in doc["webhooks"]:
                    wh["clientConfig"] = {
                        "url": f"https://127.0.0.1:{served.bound_port}{wh['clientConfig']['service']['path']}"
                    }
                    if wh["rules"][0]["resources"] == ["queues"]:  # cluster-scoped: only this test's queues
                        wh["objectSelector"] = {"matchLabels": {"lavaflow-test": suffix}}
                    else:
                        wh["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
                await api.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plurals[doc['kind']]}", body=doc)
            await patch_ca_bundle(api, [name], ca)
            await asyncio.sleep(2)  # the API server picks up new webhook configurations

            jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
            task = {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "busybox", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}
                        ]
                    }
                },
            }
            job = {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "mpi", "namespace": ns},
                "spec": {"tasks": [task]},
            }
            made = await api.request("POST", jobs, body=job)
            spec = made["spec"]
            assert spec["queue"] == "default" and spec["schedulerName"] == "volcano" and spec["minAvailable"] == 2
            assert spec["maxRetry"] == 3 and spec["tasks"][0]["name"] == "default0"
            assert spec["tasks"][0]["template"]["spec"]["containers"][0]["volumeMounts"] == [
                {"name": "x", "mountPath": "/x"}
            ]

            bad = {
                **job,
                "metadata": {"name": "too-many", "namespace": ns},
                "spec": {"minAvailable": 5, "tasks": [task]},
            }
            with pytest.raises(ApiError) as err:
                await api.request("POST", jobs, body=bad)
            assert err.value.status == 422
            assert f"Job {ns}/too-many" in err.value.message and "minAvailable" in err.value.message

            queue = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": f"orphan-{suffix}", "labels": {"lavaflow-test": suffix}},
                "spec": {"weight": 1, "parent": f"missing-{suffix}"},
            }
            with pytest.raises(ApiError) as err:
                await api.request("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", body=queue)
            assert f"Queue orphan-{suffix}" in err.value.message and "spec.parent" in err.value.message
        finally:
            for plural in plurals.values():
                try:
                    await api.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
                except ApiError:
                    pass
            if served is not None:
                await served.cleanup()
            await store.stop()
            try:
                await api.request("DELETE", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs")
            except ApiError:
                pass
            await delete_object(api, "Namespace", ns)
            await api.close()

    run(scenario())


def test_helm_chart_is_accepted_by_a_real_api_server():
    """Every object `helm template charts/lavaflow` renders (CRDs, RBAC, Deployments, the scheduler
    ConfigMap, the webhook Service and configurations, the default Queue) passes a server-side
    dry run: the API server's own schema, defaulting and admission accept the install."""
    import shutil
    import subprocess
    import sys

    from lavaflow.kube.client import KubeClient, load_config
    from lavaflow.kube.ops import delete_object

    helm = next(
        (
            c
            for c in (os.environ.get("LAVAFLOW_HELM"), shutil.which("helm"), str(Path(sys.executable).parent / "helm"))
            if c and Path(c).exists()
        ),
        None,
    )
    kubectl = shutil.which("kubectl")
    if helm is None or kubectl is None:
        pytest.skip("needs helm and kubectl (`sh deploy/get-helm.sh .venv/bin` installs helm)")
    ns = f"lavaflow-helm-{uuid.uuid4().hex[:6]}"
    rendered = subprocess.run(
        [helm, "template", "lavaflow", str(ROOT / "charts" / "lavaflow"), "--namespace", ns, "--include-crds"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    kinds = sorted({d["kind"] for d in yaml.safe_load_all(rendered) if d})
    assert {"CustomResourceDefinition", "Deployment", "ClusterRole", "MutatingWebhookConfiguration", "Queue"} <= set(
        kinds
    )

    async def make_namespace(delete: bool = False):
        cfg = load_config(KUBECONFIG)
        api = KubeClient(cfg)
        try:
            if delete:
                await delete_object(api, "Namespace", ns)
            else:
                await _install_crds(api)
                await api.request(
                    "POST",
                    "/api/v1/namespaces",
                    body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                )
        finally:
            await api.close()

    run(make_namespace())
    try:
        out = subprocess.run(
            [kubectl, "--kubeconfig", KUBECONFIG, "apply", "--server-side", "--dry-run=server", "-f", "-"],
            input=rendered, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        applied = [line for line in out.stdout.splitlines() if "(server dry run)" in line]
        assert len(applied) == len([d for d in yaml.safe_load_all(rendered) if d]), out.stdout
    finally:
        run(make_namespace(delete=True))


def test_elastic_job_is_resized_on_a_real_api_server():
    """Issue 10 on a cluster: an elastic Volcano Job on GPU nodes (nvidia.com/gpu, accelerator
    label) runs at its maximum, shrinks for a second job, grows back when that one completes."""
    from test_kube_elastic import resize_scenario

    _elastic_on_a_real_api_server(resize_scenario, "lavaflow-elastic")


def _elastic_on_a_real_api_server(scenario_fn, prefix: str) -> None:
    """Run an elastic scenario of test_kube_elastic on GPU nodes of the real server, in a namespace
    of its own, cleaned up afterwards."""
    from test_kube_elastic import gpu_nodes

    from kube_harness import Cluster

    async def scenario():
        suffix = "-" + uuid.uuid4().hex[:6]
        nodes = gpu_nodes(suffix)
        ns = f"{prefix}{suffix}"
        async with Cluster(nodes, real=True, period=0.2, time_scale=0.01) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                await scenario_fn(c, ns, _admitted, suffix)
            finally:
                await _cleanup(c.api, ns, nodes)

    asyncio.run(asyncio.wait_for(scenario(), 300))


def test_elastic_job_grows_with_its_reports_on_a_real_api_server():
    """Issue 31 on a cluster: learned models; the job grows as its reports come in."""
    from test_kube_elastic import learning_scenario

    _elastic_on_a_real_api_server(learning_scenario, "lavaflow-learn")


# ---------------------------------------------------------------------- failover of real processes

LEASE = [
    "--leader-elect-lease-duration",
    "4s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "500ms",
]


def _gang(ns: str, suffix: str, name: str, members: int, cpu: int, priority_class: str | None = None) -> list[dict]:
    """A Volcano PodGroup (minMember = members, minResources) and its pods of ``cpu`` CPUs each."""
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": members, "queue": "default", "minResources": {"cpu": str(members * cpu)}},
    }
    if priority_class:
        pg["spec"]["priorityClassName"] = priority_class
    docs = [_admitted(pg)]
    for i in range(members):
        spec = {
            "schedulerName": f"lf-{suffix}",
            "nodeSelector": {"lavaflow-test": suffix},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpu)}}}],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": ns,
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": spec,
            }
        )
    return docs


def _scheduler_proc(suffix: str, ns: str, who: str, qps: str, log_dir: Path):
    """``lavaflow scheduler`` in a process of its own; its /metrics on the port ``metrics_port``."""
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, POD_NAME=f"{who}-{suffix}")
    cmd = [
        sys.executable, "-m", "lavaflow.cli", "scheduler", "--kubeconfig", KUBECONFIG, "--scheduler-name", f"lf-{suffix}",
        "--lock-name", f"lf-{suffix}", "--lock-namespace", ns, "--listen-address", "127.0.0.1", "--listen-port", str(port),
        "--kube-api-qps", qps, "--kube-api-burst", "1", "--schedule-period", "200ms", "--no-events", *LEASE,
    ]  # fmt: skip
    out = open(log_dir / f"{who}.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    proc.metrics_port = port  # type: ignore[attr-defined]
    return proc


async def _cycles(proc) -> int:
    """The scheduling cycles the scheduler process ``proc`` has run, read from its /metrics."""
    import urllib.request

    def read() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("lavaflow_scheduling_cycles_total "):
                    return int(float(line.split()[1]))
        raise AssertionError("no lavaflow_scheduling_cycles_total in the scheduler's /metrics")

    return await asyncio.to_thread(read)


async def _holder(api, ns: str, suffix: str) -> str | None:
    from lavaflow.kube.client import ApiError

    try:
        lease = await api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/lf-{suffix}")
    except ApiError:
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def _check_whole(pods: list[dict], node_cpu: float) -> dict[str, int]:
    """No node over capacity; every gang bound whole (all its pods) or not at all. Returns bound pods per gang."""
    from kube_harness import node_usage

    usage = node_usage(pods)
    assert all(v <= node_cpu + 1e-9 for v in usage.values()), f"node over capacity: {usage}"
    per_gang: dict[str, list[bool]] = {}
    for p in pods:
        group = p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        per_gang.setdefault(group, []).append(bool(p["spec"].get("nodeName")))
    broken = {g: f"{sum(b)}/{len(b)}" for g, b in per_gang.items() if 0 < sum(b) < len(b)}
    assert not broken, f"gangs bound in part: {broken}"
    return {g: sum(b) for g, b in per_gang.items()}


async def _setup_failover(api, ns: str, nodes: list[dict]) -> None:
    from lavaflow.kube.ops import create_manifest

    await _install_crds(api)
    await create_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await _create_nodes(api, nodes)


async def _create_nodes(api, nodes: list[dict]) -> None:
    """Create fake nodes and lift the not-ready taint kube-apiserver's admission gives a new Node
    (a bare control plane has no node lifecycle controller to lift it)."""
    from lavaflow.kube.ops import create_manifest
    from lavaflow.testing import lift_not_ready_taint

    for n in nodes:
        await lift_not_ready_taint(api, await create_manifest(api, dict(n)))


async def _wait(pred, timeout: float, what: str):
    from kube_harness import wait_for

    return await wait_for(pred, timeout, what)


def test_frozen_leader_does_not_bind_from_a_stale_view_on_a_real_api_server(tmp_path):
    """SIGSTOP the leader while its bindings wait in its client's rate limiter; the standby takes
    over and fills the cluster (a higher-priority gang arrived meanwhile); SIGCONT the old leader:
    it must send none of its queued bindings. Six nodes of 2 CPUs, gangs of 4 x 1 CPU."""
    import signal
    import time

    from lavaflow.kube.client import KubeClient, load_config
    from lavaflow.kube.ops import create_manifest, delete_object, list_objects

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-freeze-{suffix}"
        nodes = _labelled_nodes(suffix, 6, "2", "8Gi")
        cfg = load_config(KUBECONFIG)
        cfg.qps = 0
        api = KubeClient(cfg)
        pc = f"lf-hi-{suffix}"
        procs = []
        try:
            await _setup_failover(api, ns, nodes)
            await create_manifest(
                api,
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": pc},
                    "value": 1000,
                },
            )
            a = _scheduler_proc(suffix, ns, "a", "2", tmp_path)
            procs.append(a)
            await _wait(lambda: _holder(api, ns, suffix), 60, "a leader")
            b = _scheduler_proc(suffix, ns, "b", "50", tmp_path)
            procs.append(b)
            for g in range(3):
                for d in _gang(ns, suffix, f"g{g}", 4, 1):
                    await create_manifest(api, d)

            async def bound() -> int:
                return sum(1 for p in await list_objects(api, "Pod", ns) if p["spec"].get("nodeName"))

            await _wait(lambda: _at_least(bound, 2), 60, "the leader's first bindings")
            a.send_signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            before = await bound()
            for d in _gang(ns, suffix, "hi", 4, 1, priority_class=pc):
                await create_manifest(api, d)
            await _wait(lambda: _is(_holder(api, ns, suffix), f"b-{suffix}"), 30, "the standby to take over")
            took_over = time.monotonic() - frozen_at
            try:
                await _wait(lambda: _at_least(bound, 12), 60, "the standby to fill the cluster")
            except AssertionError as exc:  # say where each gang stands
                pods = await list_objects(api, "Pod", ns)
                tail = (tmp_path / "b.log").read_text()[-1500:]
                raise AssertionError(f"{exc}; bound per gang {_bound_per_gang(pods)}; standby log: {tail}") from None
            a.send_signal(signal.SIGCONT)
            # Its lease taken, the old leader steps down and exits: nothing of it can reach the
            # server after that (its queued bindings would have gone out by then).
            await _wait(lambda: a.poll() is not None, 30, "the old leader to step down and exit")
            pods = await list_objects(api, "Pod", ns)
            per_gang = _check_whole(pods, 2.0)
            assert sum(per_gang.values()) == 12, per_gang
            assert await _is(_holder(api, ns, suffix), f"b-{suffix}")
            log_a = (tmp_path / "a.log").read_text()
            # Its queued bindings were refused before leaving or dropped when it stepped down: none
            # reached the server (where those the standby had bound would have failed).
            assert " failed: " not in log_a, log_a[-2000:]
            assert "lost leadership" in log_a or "lost lease" in log_a or "not renewed" in log_a, log_a[-2000:]
            print(
                f"bound before the freeze: {before}; standby took over after {took_over:.1f}s (lease 4s); per gang {per_gang}"
            )
            print("old leader:", [line for line in log_a.splitlines() if "lease" in line or "not sending" in line][:5])
        finally:
            for p in procs:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait(10)
                except Exception:
                    pass
            await _cleanup(api, ns, nodes)
            await delete_object(api, "PriorityClass", pc)
            await api.close()

    run(scenario())


def test_killed_leader_leaves_no_gang_half_bound_on_a_real_api_server(tmp_path):
    """SIGKILL the leader in the middle of binding gangs that fill the cluster exactly (plus one
    that does not fit): the standby takes over within the lease and every gang ends whole."""
    import signal
    import time

    from lavaflow.kube.client import KubeClient, load_config
    from lavaflow.kube.ops import create_manifest, list_objects

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-kill-{suffix}"
        nodes = _labelled_nodes(suffix, 6, "2", "8Gi")
        cfg = load_config(KUBECONFIG)
        cfg.qps = 0
        api = KubeClient(cfg)
        procs = []
        try:
            await _setup_failover(api, ns, nodes)
            a = _scheduler_proc(suffix, ns, "a", "2", tmp_path)
            procs.append(a)
            await _wait(lambda: _holder(api, ns, suffix), 60, "a leader")
            b = _scheduler_proc(suffix, ns, "b", "50", tmp_path)
            procs.append(b)
            for g in range(4):
                for d in _gang(ns, suffix, f"g{g}", 4, 1):
                    await create_manifest(api, d)

            async def bound() -> int:
                return sum(1 for p in await list_objects(api, "Pod", ns) if p["spec"].get("nodeName"))

            # Kill it while the third gang is part bound (it binds 2 pods a second): the rest of
            # the cluster is full, so a new leader that admitted it again would never fit it.
            await _wait(lambda: _partial(api, ns), 60, "a gang bound in part")
            a.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            before = await bound()
            await _wait(lambda: _is(_holder(api, ns, suffix), f"b-{suffix}"), 30, "the standby to take over")
            took_over = time.monotonic() - killed_at
            await _wait(lambda: _at_least(bound, 12), 60, "the standby to complete the gangs")
            # Two more of its cycles ended (the first may have begun before): one over the full
            # cluster had the chance to bind part of the gang that does not fit.
            seen = await _cycles(b)
            await _wait(lambda: _at_least(lambda: _cycles(b), seen + 2), 30, "two more cycles of the standby")
            per_gang = _check_whole(await list_objects(api, "Pod", ns), 2.0)
            assert sorted(per_gang.values()) == [0, 4, 4, 4], per_gang
            assert took_over < 4 + 2, took_over
            print(
                f"bound when killed: {before}; standby took over after {took_over:.1f}s (lease 4s); per gang {per_gang}"
            )
            t0 = time.monotonic()
            b.send_signal(signal.SIGTERM)
            b.wait(10)
            print(f"graceful stop of the leader took {time.monotonic() - t0:.2f}s")
            assert time.monotonic() - t0 < 5
            assert await _holder(api, ns, suffix) in (None, "")
        finally:
            for p in procs:
                try:
                    p.kill()
                    p.wait(10)
                except Exception:
                    pass
            await _cleanup(api, ns, nodes)
            await api.close()

    run(scenario())


def _bound_per_gang(pods: list[dict]) -> dict[str, str]:
    out: dict[str, list[int]] = {}
    for p in pods:
        group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name", "")
        seen = out.setdefault(group, [0, 0])
        seen[0] += bool(p["spec"].get("nodeName"))
        seen[1] += 1
    return {g: f"{b}/{n}" for g, (b, n) in sorted(out.items())}


async def _at_least(count, n: int) -> bool:
    return await count() >= n


async def _is(value, want) -> bool:
    """The lease holder is the process started as ``want`` (identity: POD_NAME + '_' + random)."""
    return ((await value) or "").startswith(f"{want}_")


async def _partial(api, ns: str) -> bool:
    from lavaflow.kube.ops import list_objects

    per_gang: dict[str, int] = {}
    for p in await list_objects(api, "Pod", ns):
        g = p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        per_gang[g] = per_gang.get(g, 0) + bool(p["spec"].get("nodeName"))
    return any(0 < v < 4 for v in per_gang.values()) and sum(per_gang.values()) >= 9


def test_gang_half_bound_by_a_dead_leader_is_completed_on_a_real_api_server(tmp_path):
    """What a leader killed between its bindings and its PodGroup status write leaves: on 3 nodes
    of 2 CPUs, gang g0 (4 x 1 CPU) bound whole and gang g1 bound 2 of 4, both PodGroups without a
    status. A new scheduler must bind g1's other two pods (admitting g1 again would count its
    bound pods twice and never fit it)."""
    import signal

    from lavaflow.kube.client import KubeClient, load_config
    from lavaflow.kube.ops import create_manifest, list_objects

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-strand-{suffix}"
        nodes = _labelled_nodes(suffix, 3, "2", "8Gi")
        cfg = load_config(KUBECONFIG)
        cfg.qps = 0
        api = KubeClient(cfg)
        procs = []
        try:
            await _setup_failover(api, ns, nodes)
            for g in range(2):
                for d in _gang(ns, suffix, f"g{g}", 4, 1):
                    await create_manifest(api, d)
            placed = [("g0-0", 0), ("g0-1", 0), ("g0-2", 1), ("g0-3", 1), ("g1-0", 2), ("g1-1", 2)]
            for pod, node in placed:
                body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": ns},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[node]["metadata"]["name"]}}  # fmt: skip
                await api.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/binding", body=body)
            # two more nodes' worth of room appears for g1's other pods
            more = _labelled_nodes(suffix, 1, "2", "8Gi", start=3)
            await _create_nodes(api, more)
            nodes += more
            procs.append(_scheduler_proc(suffix, ns, "a", "50", tmp_path))

            async def g1_whole() -> bool:
                pods = await list_objects(api, "Pod", ns)
                return (
                    sum(1 for p in pods if p["metadata"]["name"].startswith("g1-") and p["spec"].get("nodeName")) == 4
                )

            await _wait(g1_whole, 60, "the half-bound gang completed")
            per_gang = _check_whole(await list_objects(api, "Pod", ns), 2.0)
            assert per_gang == {"g0": 4, "g1": 4}
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except Exception:
                    p.kill()
            await _cleanup(api, ns, nodes)
            await api.close()

    run(scenario())


def test_scheduler_plugins_podgroup_is_gang_scheduled_on_a_real_api_server():
    """scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1, its CRD from tests/data/crds): 5 pods
    labelled with a group of minMember 4 get nothing on 3 CPUs — Scheduling, PodScheduled=False, a
    ScheduleTimeout Event after 1 s — and all five on 5 CPUs, the group Running with running 5,
    written through its status subresource (so the field names match the CRD's schema)."""
    from test_kube_x_k8s_podgroup import group, pods, scheduled_condition

    from kube_harness import Cluster, settled
    from lavaflow.api.kinds import kind_info as resource
    from lavaflow.kube.client import ApiError
    from lavaflow.kube.ops import apply_manifest

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-xk8s-{suffix}"
        docs = [
            group("trainer", 4, ns=ns, scheduleTimeoutSeconds=1, minResources={"cpu": "4"}),
            *pods("trainer", 5, ns=ns),
        ]
        for d in docs[1:]:
            d["spec"]["nodeSelector"] = {"lavaflow-test": suffix}
        nodes = _labelled_nodes(suffix, 1, "3", "8Gi")
        extra = _labelled_nodes(suffix, 1, "2", "8Gi", start=1)
        crd = yaml.safe_load((ROOT / "tests" / "data" / "crds" / "scheduling.x-k8s.io_podgroups.yaml").read_text())
        async with Cluster(nodes, real=True, period=0.2) as c:
            try:
                await _install_crds(c.api)
                await apply_manifest(c.api, crd)

                async def served():  # the CRD Established (also after an earlier run's CRD was deleted)
                    try:
                        await c.api.request("GET", resource("CoschedulingPodGroup").path(ns), params={"limit": 1})
                        return True
                    except ApiError:
                        return False

                await c.wait_for(served, 30, "the scheduling.x-k8s.io PodGroup CRD served")
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()
                s = c.start_scheduler()
                await c.until_ready()

                async def watching():
                    return s.ready and s.cosched.enabled

                await c.wait_for(watching, 30, "the scheduler watching scheduling.x-k8s.io PodGroups")
                await c.create(docs)

                async def waiting():
                    pg = (await c.objects("CoschedulingPodGroup", ns))[0]
                    ps = await c.pods(ns)
                    conds = [scheduled_condition(p) for p in ps]
                    events = [e for e in await c.objects("Event", ns) if e["reason"] == "ScheduleTimeout"]
                    ok = (pg.get("status") or {}).get("phase") == "Scheduling" and events
                    ok = ok and all(x and "scheduleTimeoutSeconds (1s)" in (x.get("message") or "") for x in conds)
                    return ok and (pg, conds, events)

                pg, conds, events = await c.wait_for(
                    waiting, 30, "Scheduling, a ScheduleTimeout Event, the pods' messages"
                )
                assert pg["status"]["scheduleStartTime"]
                assert conds[0]["reason"] == "Unschedulable"
                assert events[0]["involvedObject"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
                assert not [p for p in await c.pods(ns) if p["spec"].get("nodeName")], "part of a gang was bound"
                assert await c.objects("PodGroup", ns) == [], "a Volcano PodGroup was made for labelled pods"
                await c.create(extra)

                async def running():
                    ps = await c.pods(ns)
                    st = (await c.objects("CoschedulingPodGroup", ns))[0].get("status") or {}
                    ok = (
                        all(p["spec"].get("nodeName") for p in ps)
                        and st.get("phase") == "Running"
                        and st.get("running") == 5
                    )
                    return ok and st

                st = await c.wait_for(running, 30, "all five bound and the group Running with 5 running")
                assert st["scheduleStartTime"] == pg["status"]["scheduleStartTime"]
                assert (st["succeeded"], st["failed"]) == (0, 0)
                # steady: a status equal to the server's is not written again
                await settled(s)
                rv = (await c.objects("CoschedulingPodGroup", ns))[0]["metadata"]["resourceVersion"]
                await settled(s)
                assert (await c.objects("CoschedulingPodGroup", ns))[0]["metadata"]["resourceVersion"] == rv
            finally:
                try:
                    await c.api.request(
                        "DELETE",
                        resource("CoschedulingPodGroup").path(ns),
                        body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                    )
                except ApiError:
                    pass
                await _cleanup(c.api, ns, nodes + extra)  # the CRD stays (deleting it takes a while)

    run(scenario())


def test_workload_api_v1alpha2_podgroups_are_gang_scheduled_on_a_real_api_server():
    """The Kubernetes Workload API of 1.36 (scheduling.k8s.io/v1alpha2, KEP-4671), served by
    kube-apiserver itself: a Workload with two podGroupTemplates, a PodGroup made from each, pods
    naming theirs with spec.schedulingGroup.podGroupName (1 CPU each), the scheduler running as a
    service account with only the scheduler ClusterRole lavaflow installs. On 5 CPUs (3 + 2) the
    4-pod gang (minCount 4) is bound whole; the 3-pod gang (minCount 3) then has 1 CPU, room for one
    of its pods, and gets none bound; its PodGroup's PodGroupScheduled condition turns False with
    reason Unschedulable (written through the status subresource, so the server accepts its form)
    and a Warning Event names the PodGroup. With 2 more CPUs all three are bound, the nodes exactly
    full, and the condition turns True. Skipped when the server does not serve
    scheduling.k8s.io/v1alpha2 (kube-apiserver < 1.36, or without
    --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true)."""
    from kube_harness import Cluster, node_usage, settled
    from lavaflow.api.kinds import kind_info as resource
    from lavaflow.kube.client import ApiError, KubeClient, load_config

    async def served() -> bool:
        api = KubeClient(load_config(KUBECONFIG))
        try:
            await api.request("GET", resource("SchedulingPodGroup").path(), params={"limit": 1})
            return True
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        finally:
            await api.close()

    if not asyncio.run(served()):
        pytest.skip("the API server does not serve scheduling.k8s.io/v1alpha2 PodGroups (Kubernetes 1.36 Workload API)")

    V2 = "scheduling.k8s.io/v1alpha2"

    def podgroup(name: str, template: str, min_count: int) -> dict:
        return {
            "apiVersion": V2,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": template}},
                "schedulingPolicy": {"gang": {"minCount": min_count}},
            },
        }

    def members(prefix: str, n: int, group: str) -> list[dict]:
        return [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{prefix}-{i}",
                    "namespace": ns,
                    "annotations": {"sim.lavaflow.io/duration": "inf"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "schedulingGroup": {"podGroupName": group},
                    "nodeSelector": {"lavaflow-test": suffix},
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
            for i in range(n)
        ]

    def condition(pg: dict) -> dict | None:
        conds = (pg.get("status") or {}).get("conditions") or []
        return next((x for x in conds if x["type"] == "PodGroupScheduled"), None)

    suffix = uuid.uuid4().hex[:6]
    ns = f"lavaflow-wl-{suffix}"
    role = f"lavaflow-wl-{suffix}-scheduler"
    workload = {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {
            "podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}},
                {"name": "evaluators", "schedulingPolicy": {"gang": {"minCount": 3}}},
            ]
        },
    }

    async def scenario():
        nodes = _labelled_nodes(suffix, 1, "3", "8Gi") + _labelled_nodes(suffix, 1, "2", "8Gi", start=1)
        extra = _labelled_nodes(suffix, 1, "2", "8Gi", start=2)
        async with Cluster(nodes, real=True, period=0.2) as c:
            try:
                await _install_crds(c.api)
                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                c.start_controllers()  # lavaflow's PodGroup controller must leave these pods alone
                # the scheduler as a service account with only lavaflow's scheduler ClusterRole
                s = c.start_scheduler(client=await _service_account_client(c.api, ns, role))
                await c.until_ready()

                async def watching():
                    return s.ready and s.workloads.enabled

                await c.wait_for(watching, 30, "the scheduler watching scheduling.k8s.io/v1alpha2 PodGroups")
                assert s.workloads.kinds == ["SchedulingPodGroup"], s.workloads.kinds
                # the workers first: 4 of the 5 CPUs
                await c.create([workload, podgroup("train-workers", "workers", 4), *members("w", 4, "train-workers")])

                async def workers_bound():
                    ps = await c.pods(ns)
                    pg = next(
                        g for g in await c.objects("SchedulingPodGroup", ns) if g["metadata"]["name"] == "train-workers"
                    )
                    cond = condition(pg)
                    ok = len(ps) == 4 and all(p["spec"].get("nodeName") for p in ps)
                    return ok and cond and cond["status"] == "True" and (ps, cond)

                ps, cond = await c.wait_for(workers_bound, 30, "the workers bound and their PodGroupScheduled True")
                assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "train-workers"} for p in ps)
                assert cond["reason"] == "Scheduled" and cond["lastTransitionTime"]
                # the evaluators: room for one pod of three, so none of them may be bound. Their pods
                # come first (the API allows it): naming a PodGroup not yet seen, they wait, loose
                # pods of no gang would take the free CPU
                await c.create(members("e", 3, "train-evaluators"))
                await settled(s, tuple(f"{ns}/e-{i}" for i in range(3)))
                assert not [
                    p for p in await c.pods(ns) if p["spec"].get("nodeName") and p["metadata"]["name"][0] == "e"
                ]
                await c.create([podgroup("train-evaluators", "evaluators", 3)])
                # a condition another component writes (kube-scheduler's preemption): left alone
                other = {
                    "type": "DisruptionTarget",
                    "status": "False",
                    "reason": "Other",
                    "message": "written by someone else",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                await c.api.request(
                    "PATCH",
                    resource("SchedulingPodGroup").path(ns, "train-evaluators", "status"),
                    body={"status": {"conditions": [other]}},
                    content_type="application/merge-patch+json",
                )

                async def evaluators_refused():
                    pg = next(
                        g
                        for g in await c.objects("SchedulingPodGroup", ns)
                        if g["metadata"]["name"] == "train-evaluators"
                    )
                    cond = condition(pg)
                    return cond and cond["status"] == "False" and (pg, cond)

                pg, cond = await c.wait_for(evaluators_refused, 30, "PodGroupScheduled=False on the evaluators")
                assert cond["reason"] == "Unschedulable", cond
                assert "tasks in gang unschedulable" in cond["message"], cond
                assert cond["lastTransitionTime"].endswith("Z"), cond

                async def event():
                    return [e for e in await c.objects("Event", ns) if e["reason"] == "Unschedulable"]

                ev = (await c.wait_for(event, 10, "an Unschedulable Event on the PodGroup"))[0]
                assert ev["type"] == "Warning" and ev["involvedObject"]["name"] == "train-evaluators", ev
                assert (ev["involvedObject"]["apiVersion"], ev["involvedObject"]["kind"]) == (V2, "PodGroup"), ev
                assert ev["involvedObject"]["uid"] == pg["metadata"]["uid"], ev
                assert ev["message"].startswith(f"PodGroup {ns}/train-evaluators: "), ev
                assert "tasks in gang unschedulable" in ev["message"], ev
                await settled(s)
                ps = await c.pods(ns)
                assert not [p for p in ps if p["metadata"]["name"].startswith("e-") and p["spec"].get("nodeName")], (
                    "part of a gang was bound"
                )
                assert await c.objects("PodGroup", ns) == [], "a Volcano PodGroup was made for these pods"
                # steady: a condition equal to the server's is not written again
                rv = pg["metadata"]["resourceVersion"]
                await settled(s)  # (one more cycle since the one above)
                again = [
                    g for g in await c.objects("SchedulingPodGroup", ns) if g["metadata"]["name"] == "train-evaluators"
                ]
                assert again[0]["metadata"]["resourceVersion"] == rv, condition(again[0])
                await c.create(extra)

                async def evaluators_bound():
                    ps = [p for p in await c.pods(ns) if p["metadata"]["name"].startswith("e-")]
                    pg = next(
                        g
                        for g in await c.objects("SchedulingPodGroup", ns)
                        if g["metadata"]["name"] == "train-evaluators"
                    )
                    cond = condition(pg)
                    ok = len(ps) == 3 and all(p["spec"].get("nodeName") for p in ps)
                    return ok and cond and cond["status"] == "True" and cond

                cond = await c.wait_for(
                    evaluators_bound, 30, "the evaluators bound whole once they fit, condition True"
                )
                assert cond["reason"] == "Scheduled"
                pg = next(
                    g for g in await c.objects("SchedulingPodGroup", ns) if g["metadata"]["name"] == "train-evaluators"
                )
                assert [x for x in pg["status"]["conditions"] if x["type"] == "DisruptionTarget"] == [other]
                # every node exactly full: 3 + 2 + 2 CPUs for 7 pods
                usage = node_usage(await c.pods(ns))
                assert usage == {n["metadata"]["name"]: float(n["status"]["capacity"]["cpu"]) for n in nodes + extra}
            finally:
                await _cleanup_workload_api(c.api, ns)
                for path in (f"{RBAC}/clusterrolebindings/{role}", f"{RBAC}/clusterroles/{role}"):
                    try:
                        await c.api.request("DELETE", path)
                    except ApiError:
                        pass
                await _cleanup(c.api, ns, nodes + extra)

    run(scenario())


RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def _service_account_client(api, ns: str, role: str):
    """A client of the API server acting as a new service account ``ns/scheduler`` bound to a
    ClusterRole ``role`` with lavaflow's scheduler rules (kube/manifests.py, as the Helm chart
    grants them): so what the scheduler reads and writes is checked against them. The token comes
    from the TokenRequest API (no token controller needed)."""
    from lavaflow.kube.client import KubeClient, load_config
    from lavaflow.kube.manifests import SCHEDULER_RULES

    await api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "scheduler", "namespace": ns}},
    )
    await api.request(
        "POST",
        f"{RBAC}/clusterroles",
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": SCHEDULER_RULES,
        },
    )
    await api.request(
        "POST",
        f"{RBAC}/clusterrolebindings",
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "scheduler", "namespace": ns}],
        },
    )
    tr = await api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/scheduler/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )
    cfg = load_config(KUBECONFIG)
    cfg.token, cfg.cert_file, cfg.key_file, cfg.cert_data, cfg.key_data = tr["status"]["token"], None, None, None, None
    cfg.exec_cmd, cfg.qps, cfg.burst = None, 0, 0
    return KubeClient(cfg)


async def _cleanup_workload_api(api, ns: str) -> None:
    """Delete a namespace's v1alpha2 PodGroups and Workloads. A PodGroup carries the finalizer
    scheduling.k8s.io/podgroup-protection, which kube-controller-manager removes; a bare control
    plane has none, so it is patched away here."""
    from lavaflow.api.kinds import kind_info as resource
    from lavaflow.kube.client import MERGE_PATCH, ApiError

    try:
        listed = await api.request("GET", resource("SchedulingPodGroup").path(ns))
        for pg in listed.get("items") or []:
            await api.request(
                "PATCH",
                resource("SchedulingPodGroup").path(ns, pg["metadata"]["name"]),
                body={"metadata": {"finalizers": None}},
                content_type=MERGE_PATCH,
            )
    except ApiError:
        pass
    for kind in ("SchedulingPodGroup", "WorkloadV1alpha2"):
        try:
            await api.request(
                "DELETE",
                resource(kind).path(ns),
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except ApiError:
            pass


def test_bound_pods_read_as_protobuf_match_json_on_a_real_api_server():
    """The scheduler's store reads bound pods from the server's protobuf encoding at start-up: on a
    real server (its own marshalling, defaulting and timestamps) it holds exactly what it holds
    when it reads them all as JSON, pod by pod, with the pods protobuf cannot give in full read as
    JSON by name."""
    pytest.importorskip("google.protobuf")
    from test_kube_protobuf_sync import _cluster

    from kube_harness import pod_view
    from lavaflow.kube.client import KubeClient, load_config

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-protobuf-{suffix}"
        api = KubeClient(load_config(KUBECONFIG))
        try:
            await api.request(
                "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
            pods = _cluster(4)
            pods[0]["metadata"]["finalizers"] = [
                "lavaflow.io/test"
            ]  # deleted below: terminating, with a deletionTimestamp
            pods[1]["spec"]["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "train"}},
                }
            ]
            pods[2]["spec"]["priorityClassName"] = "system-node-critical"
            pods[2]["metadata"]["namespace"] = "kube-system"
            for p in pods:
                p["metadata"].setdefault("namespace", ns)
                if p["metadata"]["namespace"] == "ns":
                    p["metadata"]["namespace"] = ns
                p["metadata"]["name"] += f"-{suffix}" if p["metadata"]["namespace"] == "kube-system" else ""
                for k in ("uid", "creationTimestamp"):
                    p["metadata"].pop(k, None)
                p["spec"].pop("priority", None)
                p.pop("status", None)
                await api.request("POST", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", body=p)
            name0 = pods[0]["metadata"]["name"]
            patch = {
                "status": {
                    "phase": "Running",
                    "startTime": "2026-11-28T06:00:00Z",
                    "reason": "Because",
                    "message": "it ran",
                }
            }
            await api.request(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/{name0}/status",
                body=patch,
                content_type="application/merge-patch+json",
            )
            await api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name0}")
            a = await _sync_real(True)
            b = await _sync_real(False)
            try:
                mine = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
                got, want = a.objects["Pod"], b.objects["Pod"]
                assert mine <= set(got) and set(got) == set(want)
                for key in got:
                    assert pod_view(got[key]) == pod_view(want[key]), key
                first = got[f"{ns}/{name0}"]
                assert first.metadata.deletion_timestamp is not None and first.status.reason == "Because"
                assert type(got[f"{ns}/{pods[1]['metadata']['name']}"]).__name__ == "Pod"  # partial: read whole
                assert a.informers["Pod"].protobuf is None and a.protobuf_pods
            finally:
                for s in (a, b):
                    await s.stop()
                    await s.client.close()
        finally:
            try:
                await api.request(
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/pods/{pods[0]['metadata']['name']}",
                    body={"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
            except Exception:
                pass
            for p in pods:
                if p["metadata"]["namespace"] == "kube-system":
                    await api.request(
                        "DELETE",
                        f"/api/v1/namespaces/kube-system/pods/{p['metadata']['name']}",
                        body={"gracePeriodSeconds": 0},
                    )
            await _cleanup(api, ns, [])
            await api.close()

    async def _sync_real(protobuf: bool):
        from lavaflow.kube.client import KubeClient, load_config
        from lavaflow.kube.store import KubeStore

        store = KubeStore(KubeClient(load_config(KUBECONFIG)), keep_raw=False)
        store.ours = frozenset({"lavaflow"})
        store.protobuf_pods = protobuf
        store.inform("Pod")
        await store.start()
        assert await store.wait_synced(60)
        return store

    run(scenario())


# ---------------------------------------------------------------------- over Volcano's own CRDs

VOLCANO_REPO = os.environ.get("LAVAFLOW_TEST_VOLCANO_REPO")
# where Volcano's repository keeps the CRDs its Helm chart installs (JobFlow's in a subchart)
VOLCANO_CRD_DIRS = ("installer/helm/chart/volcano/crd/bases", "installer/helm/chart/volcano/charts/jobflow/crd/bases")


def _volcano_crds() -> list[dict]:
    """Volcano's own CRDs of the kinds lavaflow has CRDs for, read from LAVAFLOW_TEST_VOLCANO_REPO
    (skips, saying why, when that is not set or holds none)."""
    from lavaflow.kube.manifests import crds

    if not VOLCANO_REPO:
        pytest.skip(
            "set LAVAFLOW_TEST_VOLCANO_REPO to a copy of Volcano's repository (a directory holding "
            "installer/helm/chart/volcano/crd/bases/) to test lavaflow over Volcano's own CRDs"
        )
    root = Path(VOLCANO_REPO)
    if not (root / VOLCANO_CRD_DIRS[0]).is_dir():
        pytest.skip(
            f"LAVAFLOW_TEST_VOLCANO_REPO={VOLCANO_REPO} has no {VOLCANO_CRD_DIRS[0]}/ (not Volcano's repository?)"
        )
    ours = {doc["metadata"]["name"] for doc in crds().values()}
    docs = [yaml.safe_load(p.read_text()) for d in VOLCANO_CRD_DIRS for p in sorted((root / d).glob("*.yaml"))]
    docs = [d for d in docs if d and d.get("kind") == "CustomResourceDefinition" and d["metadata"]["name"] in ours]
    # (older Volcanos have no HyperNode CRD: lavaflow's stays)
    missing = sorted(_USED - {d["metadata"]["name"] for d in docs})
    if missing:
        pytest.skip(f"{VOLCANO_REPO} lacks Volcano's CRDs {', '.join(missing)}")
    return docs


_USED = {
    f"{plural}.{group}"
    for plural, group in (
        ("podgroups", "scheduling.volcano.sh"),
        ("queues", "scheduling.volcano.sh"),
        ("jobs", "batch.volcano.sh"),
        ("commands", "bus.volcano.sh"),
        ("jobflows", "flow.volcano.sh"),
        ("jobtemplates", "flow.volcano.sh"),
    )
}


async def _replace_crds(api, docs: list[dict]) -> None:
    """Each CRD exactly as ``docs`` gives it (metadata included: not merged with what the server
    has, unlike ``apply_manifest``), created or replaced."""
    from lavaflow.kube.ops import create_manifest, get_object

    for doc in docs:
        cur = await get_object(api, "CustomResourceDefinition", doc["metadata"]["name"])
        if cur is None:
            await create_manifest(api, dict(doc))
            continue
        doc = dict(doc, metadata=dict(doc["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
        await api.request(
            "PUT", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}", body=doc
        )


async def _served_as(api, crds: list[dict]) -> bool:
    """Whether discovery serves each CRD's storage version, with a status subresource exactly
    where the CRD has one (a replaced CRD takes a moment to be served as it now is)."""
    from lavaflow.kube.client import ApiError
    from lavaflow.kube.discovery import served_resources

    for doc in crds:
        spec = doc["spec"]
        for v in spec["versions"]:
            if not v.get("served"):
                continue
            try:
                served = await served_resources(api, f"{spec['group']}/{v['name']}")
            except ApiError:  # (a new group: 404 until its first CRD is established)
                return False
            plural = spec["names"]["plural"]
            if plural not in served or (f"{plural}/status" in served) != ("status" in (v.get("subresources") or {})):
                return False
    return True


def test_volcano_job_queue_command_and_jobflow_over_volcanos_own_crds_on_a_real_api_server():
    """Volcano's own CRDs (read from a copy of Volcano's repository; its PodGroup CRD has no status
    subresource) in place of lavaflow's: `lavaflow install` finds them and leaves them as they are;
    the scheduler and controllers then run a Queue, a Volcano Job in it, an AbortJob and a ResumeJob
    Command, and a JobFlow of two JobTemplates, with no write refused. lavaflow's CRDs are put back
    at the end."""
    from typer.testing import CliRunner

    from kube_harness import Cluster
    from lavaflow.api.kinds import kind_info
    from lavaflow.cli import app
    from lavaflow.kube.manifests import crds
    from lavaflow.kube.ops import delete_object

    volcano = _volcano_crds()

    async def scenario():
        suffix = uuid.uuid4().hex[:6]
        ns = f"lavaflow-volcano-{suffix}"
        queue = f"q-{suffix}"
        nodes = _labelled_nodes(suffix, 2, "4", "8Gi")
        commit = Path(VOLCANO_REPO, "COMMIT")
        async with Cluster(nodes, real=True, period=0.2, time_scale=0.01) as c:
            version = (await c.api.request("GET", "/version")).get("gitVersion")
            print(
                f"kube-apiserver {version}; Volcano {commit.read_text().strip() if commit.exists() else VOLCANO_REPO}"
            )
            try:
                await _replace_crds(c.api, volcano)
                await c.wait_for(lambda: _served_as(c.api, volcano), 30, "Volcano's CRDs served as they are")
                installed = await asyncio.to_thread(
                    CliRunner().invoke, app, ["install", "--crds-only", "--kubeconfig", KUBECONFIG]
                )
                assert installed.exit_code == 0, installed.output
                lines = installed.stdout.splitlines()
                theirs = {d["metadata"]["name"] for d in volcano}
                for line in lines:
                    if line.split(":")[0] in theirs:
                        assert "found (not lavaflow's; serves " in line and line.endswith(": left as it is"), line
                    else:
                        assert line.endswith("found (lavaflow's): updated"), line
                assert len(lines) == len(crds())
                assert (
                    "podgroups.scheduling.volcano.sh: found (not lavaflow's; serves v1beta1; no status subresource "
                    "— lavaflow writes status on the object): left as it is"
                ) in lines
                assert await _served_as(c.api, volcano)  # install left them as they are

                await c.create([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
                ctrl = c.start_controllers()
                s = c.start_scheduler()
                await c.until_ready()

                async def synced():  # (the built-in queues may be there from before)
                    return s.ready and ctrl.ready

                await c.wait_for(synced, 30, "the scheduler's and the controller's informers synced")
                assert s.store.has_status(kind_info("PodGroup")) is False
                assert ctrl.store.has_status(kind_info("PodGroup")) is False
                assert s.store.has_status(kind_info("Queue")) is True

                await c.create(
                    [
                        _admitted(
                            {
                                "apiVersion": "scheduling.volcano.sh/v1beta1",
                                "kind": "Queue",
                                "metadata": {"name": queue},
                                "spec": {"weight": 1, "reclaimable": True},
                            }
                        )
                    ]
                )

                async def queue_open():
                    q = next((q for q in await c.objects("Queue") if q["metadata"]["name"] == queue), None)
                    return q is not None and (q.get("status") or {}).get("state") == "Open"

                await c.wait_for(queue_open, 30, "the Queue Open")
                await _volcano_job_runs(c, ns, suffix, queue)
                await _abort_and_resume(c, ns, suffix, queue)
                await _jobflow_runs(c, ns, suffix, queue)
                assert not s.store.refusals and not ctrl.store.refusals, (s.store.refusals, ctrl.store.refusals)
                # every status written on an object stayed as written (nothing pruned by Volcano's schemas)
                assert not s.store._rediscovered and not ctrl.store._rediscovered
            finally:
                for kind in ("JobFlow", "JobTemplate", "Command"):  # (or the JobFlow makes its Jobs again)
                    await c.api.request(
                        "DELETE", kind_info(kind).path(ns), body={"apiVersion": "v1", "kind": "DeleteOptions"}
                    )
                await _cleanup(c.api, ns, nodes)
                await delete_object(c.api, "Queue", queue)
                await _install_crds(c.api)
                await c.wait_for(lambda: _served_as(c.api, list(crds().values())), 30, "lavaflow's CRDs served again")

    asyncio.run(asyncio.wait_for(scenario(), 300))


def _vjob(ns: str, suffix: str, name: str, queue: str, replicas: int, duration: str) -> dict:
    """A Volcano Job of ``replicas`` pods of 1 CPU on the test's nodes, each running ``duration``
    (the fake kubelet's seconds; "inf": until deleted)."""
    from test_kube_e2e import many_jobs

    job = many_jobs(1, replicas)[0]
    job["metadata"] = {"name": name, "namespace": ns}
    job["spec"]["queue"] = queue
    template = job["spec"]["tasks"][0]["template"]
    template["metadata"]["annotations"]["sim.lavaflow.io/duration"] = duration
    template["spec"].update(
        nodeSelector={"lavaflow-test": suffix}, restartPolicy="Never", terminationGracePeriodSeconds=0
    )
    return job


def _job_phase(job: dict | None) -> str:
    return ((job or {}).get("status") or {}).get("state", {}).get("phase", "")


async def _job(c, ns: str, name: str) -> dict | None:
    return next((j for j in await c.objects("Job", ns) if j["metadata"]["name"] == name), None)


async def _volcano_job_runs(c, ns: str, suffix: str, queue: str) -> None:
    """A Job in the queue: its PodGroup (no status subresource) goes Inqueue and Running, its two
    pods are bound, it completes."""
    name = f"run-{suffix}"
    phases: set[str] = set()

    async def completed():
        for pg in await c.objects("PodGroup", ns):
            if pg["metadata"]["name"].startswith(name):
                phases.add((pg.get("status") or {}).get("phase", ""))
        return _job_phase(await _job(c, ns, name)) == "Completed"

    await c.create([_admitted(_vjob(ns, suffix, name, queue, 2, "100"))])
    await c.wait_for(completed, 60, f"Job {name} Completed")
    assert {"Inqueue", "Running"} & phases, phases
    job = await _job(c, ns, name)
    assert job["status"].get("succeeded") == 2, job["status"]


async def _abort_and_resume(c, ns: str, suffix: str, queue: str) -> None:
    """AbortJob, then ResumeJob (bus.volcano.sh Commands) on a running Job: Aborted with its pods
    gone, then Running again with its pods bound; each Command consumed."""
    name = f"hold-{suffix}"

    async def phase_is(want: str, bound: int):
        job = await _job(c, ns, name)
        pods = [p for p in await c.pods(ns) if p["metadata"]["name"].startswith(f"{name}-")]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return _job_phase(job) == want and sum(1 for p in live if p["spec"].get("nodeName")) == bound and job

    async def command(action: str, uid: str) -> None:
        target = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": uid}
        doc = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": f"{name}-{action.lower()}", "namespace": ns},
            "action": action,
            "target": target,
        }
        await c.create([doc])

    async def consumed():
        return not await c.objects("Command", ns)

    await c.create([_admitted(_vjob(ns, suffix, name, queue, 2, "inf"))])
    job = await c.wait_for(lambda: phase_is("Running", 2), 60, f"Job {name} Running")
    await command("AbortJob", job["metadata"]["uid"])
    await c.wait_for(lambda: phase_is("Aborted", 0), 60, f"Job {name} Aborted")
    await c.wait_for(consumed, 30, "the AbortJob Command consumed")
    await command("ResumeJob", job["metadata"]["uid"])
    await c.wait_for(lambda: phase_is("Running", 2), 60, f"Job {name} Running again")
    await c.wait_for(consumed, 30, "the ResumeJob Command consumed")


async def _jobflow_runs(c, ns: str, suffix: str, queue: str) -> None:
    """A JobFlow of two JobTemplates, b after a: each Job made when its turn comes, both complete,
    the flow Succeed."""
    templates = []
    for t in ("a", "b"):
        job = _admitted(_vjob(ns, suffix, t, queue, 1, "100"))
        templates.append(
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobTemplate",
                "metadata": job["metadata"],
                "spec": job["spec"],
            }
        )
    flow = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": f"f-{suffix}", "namespace": ns},
        "spec": {"jobRetainPolicy": "retain", "flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
    }
    await c.create([*templates, flow])

    async def succeeded():
        got = next(
            (f for f in await c.objects("JobFlow", ns) if f["metadata"]["name"] == flow["metadata"]["name"]), None
        )
        return ((got or {}).get("status") or {}).get("state", {}).get("phase") == "Succeed" and got

    got = await c.wait_for(succeeded, 90, "the JobFlow Succeed")
    for t in ("a", "b"):
        assert _job_phase(await _job(c, ns, f"f-{suffix}-{t}")) == "Completed"
    assert sorted(got["status"].get("completedJobs") or []) == [f"f-{suffix}-a", f"f-{suffix}-b"], got["status"]
