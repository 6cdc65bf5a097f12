"""Kubernetes layer pieces: codec merges, the store's relist and conflict handling, the webhook
over TLS, /metrics /healthz /readyz, leader election, and the vcctl/Voda CLI against the API double."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from kube_harness import Cluster, wait_for  # noqa: E402
from lavaflow.api.kinds import kind_info  # noqa: E402
from lavaflow.kube import codec  # noqa: E402
from lavaflow.kube.client import ClientConfig, ConfigError, KubeClient, kubeconfig_config  # noqa: E402
from lavaflow.kube.leader import LeaderElector  # noqa: E402
from lavaflow.kube.store import KubeStore  # noqa: E402
from lavaflow.kube.webhook import WebhookServer, admission_review, self_signed  # noqa: E402
from lavaflow.testing import ApiDouble, fake_node  # noqa: E402


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _seen(events: list, event: tuple, seconds: float = 5.0) -> None:
    """Wait (up to ``seconds``) until a store handler has recorded ``event``; the caller asserts it."""
    for _ in range(int(seconds / 0.05)):
        if event in events:
            return
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------- codec


def test_merge3_keeps_fields_lavaflow_does_not_model():
    raw = {
        "metadata": {"name": "p", "annotations": {"a": "1"}, "managedFields": [{"x": 1}]},
        "spec": {
            "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "volumes": [{"name": "v"}],
        },
    }
    res = kind_info("Pod")
    model = codec.decode(res, raw)
    old = codec.encode(model, res)
    model.metadata.annotations["b"] = "2"
    model.spec.containers[0].image = "j"
    out = codec.merge3(raw, old, codec.encode(model, res))
    assert out["spec"]["volumes"] == [{"name": "v"}]
    assert out["spec"]["containers"][0]["volumeMounts"] == [{"name": "v", "mountPath": "/v"}]
    assert out["spec"]["containers"][0]["image"] == "j"
    assert out["metadata"]["annotations"] == {"a": "1", "b": "2"}


def test_times_are_floats_in_models_and_rfc3339_on_the_wire():
    res = kind_info("Job")
    job = codec.decode(
        res,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j", "creationTimestamp": "2026-01-02T03:04:05Z"},
            "status": {"state": {"phase": "Running", "lastTransitionTime": "2026-01-02T03:04:06Z"}},
        },
    )
    assert isinstance(job.metadata.creation_timestamp, float)
    assert isinstance(job.status.state.last_transition_time, float)
    wire = codec.encode(job, res)
    assert wire["status"]["state"]["lastTransitionTime"] == "2026-01-02T03:04:06Z"


def test_pod_exit_code_comes_from_container_statuses():
    pod = codec.decode(
        kind_info("Pod"),
        {
            "metadata": {"name": "p"},
            "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]},
        },
    )
    assert pod.status.exit_code == 3
    assert "exitCode" not in codec.encode(pod, kind_info("Pod"))["status"]


def test_kubeconfig_parsing(tmp_path):
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    p = tmp_path / "config"
    p.write_text(
        json.dumps(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://10.0.0.1:6443/", "certificate-authority-data": ca}}
                ],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ml"}}],
                "current-context": "x",
            }
        )
    )
    cfg = kubeconfig_config(str(p))
    assert cfg.server == "https://10.0.0.1:6443" and cfg.token == "abc" and cfg.namespace == "ml"
    assert cfg.ca_data == b"-----BEGIN CERTIFICATE-----\n" and cfg.ca_file is None


def test_inline_kubeconfig_credentials_stay_in_memory(tmp_path, monkeypatch):
    """Client certificate, key and CA given inline (``*-data``) are never written to a file: a
    killed process must leave no copy of the key behind."""
    pytest.importorskip("cryptography")
    from lavaflow.kube.webhook import self_signed

    cert, key, ca = self_signed("api", "default", tmp_path / "pki")
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    p = tmp_path / "config"
    p.write_text(
        json.dumps(
            {
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(ca)},
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "client-certificate-data": b64(open(cert, "rb").read()),
                            "client-key-data": b64(open(key, "rb").read()),
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    cfg = kubeconfig_config(str(p))
    assert cfg.cert_file is None and cfg.key_file is None and cfg.ca_file is None
    ctx = cfg.ssl_context()
    assert ctx.verify_mode.name == "CERT_REQUIRED" and ctx.cert_store_stats()["x509_ca"] == 1
    assert list(tmp.iterdir()) == []
    bad = tmp_path / "bad"
    bad.write_text(p.read_text().replace(b64(ca), "not base64!"))
    with pytest.raises(ConfigError, match="certificate-authority-data is not valid base64"):
        kubeconfig_config(str(bad))


# ---------------------------------------------------------------------- store


def test_store_relist_delivers_deletions_and_update_retries_conflicts():
    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        try:
            client = KubeClient(ClientConfig(server=double.url, qps=0))
            store = KubeStore(client)
            store.inform("Queue")
            events = []
            store.watch("Queue", lambda ev, obj, old: events.append((ev, obj.name)))
            double.put_object(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": "a"},
                    "spec": {"weight": 1},
                }
            )
            double.put_object(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": "b"},
                    "spec": {"weight": 1},
                }
            )
            await store.start()
            assert await store.wait_synced(5)
            assert sorted(e[1] for e in events) == ["a", "b"]
            inf = store.informers["Queue"]
            # An object vanishes while history is compacted: the relist reports it DELETED.
            await wait_for(lambda: inf.bookmarks > 0, 5, "a bookmark")
            double.call(lambda: double.objects["scheduling.volcano.sh/v1beta1/queues"].pop((None, "b")))
            double.compact()
            await _seen(events, ("DELETED", "b"))
            assert ("DELETED", "b") in events and inf.relists >= 1
            # Conflicts: the update is re-applied on a fresh copy.
            double.fail_next("Queue", "update", 409, 2)
            q = store.get("Queue", "a")
            q.spec.weight = 7
            q.status.state = "Open"
            await store.aupdate(q)
            assert store.conflicts == 2
            assert double.get("Queue", "a")["spec"]["weight"] == 7
            assert double.get("Queue", "a")["status"]["state"] == "Open"
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())


def _queue_raw(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {}}


@pytest.mark.parametrize(
    ("version", "watch_list", "knows", "streams"),
    [
        ((1, 36), True, True, True),
        ((1, 36), False, True, False),
        (("", ""), True, True, True),
        ((1, 18), True, False, False),
    ],
    ids=["streaming-list", "server-cannot-stream", "source-build-without-version", "server-before-streaming-lists"],
)
def test_informer_starts_from_a_streaming_list_when_the_server_can_send_one(version, watch_list, knows, streams):
    """An informer asks its watch for the initial state (sendInitialEvents) instead of listing where
    the server sends one: objects arrive one at a time and are applied as they come. Whether it
    does is asked of the server, not read from /version: a server built from source answers an
    empty major and minor there and streams all the same (issue 36). A server that answers with an
    ERROR event (its etcd cannot report progress) gets a list instead, and so does an older one,
    which ignores the parameter and would never end the initial state."""

    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        double.version = version
        double.watch_list = watch_list
        double.knows_watch_list = knows
        try:
            for name in ("a", "b", "c"):
                double.put_object(_queue_raw(name))
            client = KubeClient(ClientConfig(server=double.url, qps=0))
            store = KubeStore(client)
            store.watch_list_probe_timeout = 1.0
            store.inform("Queue")
            events = []
            store.watch("Queue", lambda ev, obj, old: events.append((ev, obj.name)))
            await store.start()
            assert await store.wait_synced(5)
            assert sorted(e[1] for e in events) == ["a", "b", "c"]
            inf = store.informers["Queue"]
            assert bool(store.watch_list and inf.streaming) is streams
            assert (double.counts["list/Queue"] == 0) is streams
            # the same stream goes on as a watch: a change after the initial state arrives
            double.put_object(_queue_raw("d"))
            await _seen(events, ("ADDED", "d"))
            assert ("ADDED", "d") in events
            # history compacted while an object vanished: the next initial state (or list) drops it
            double.call(lambda: double.objects["scheduling.volcano.sh/v1beta1/queues"].pop((None, "b")))
            double.compact()
            await _seen(events, ("DELETED", "b"))
            assert ("DELETED", "b") in events and inf.relists >= 1
            assert sorted(q.name for q in store.list("Queue")) == ["a", "c", "d"]
            assert (double.counts["list/Queue"] == 0) is streams
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())


def test_a_one_page_list_applies_every_object_in_the_server_order():
    """A first list from the watch cache comes in one page; its objects are applied (and freed) one
    by one in the order the server sent them, which is the order jobs are first seen in."""

    async def scenario():
        double = ApiDouble().start()
        double.watch_list = False
        try:
            names = [f"q{i:02d}" for i in range(30)]
            for name in names:
                double.put_object(_queue_raw(name))
            client = KubeClient(ClientConfig(server=double.url, qps=0))
            store = KubeStore(client)
            store.inform("Queue")
            seen = []
            store.watch("Queue", lambda ev, obj, old: seen.append(obj.name))
            await store.start()
            assert await store.wait_synced(5)
            assert seen == names
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())


# ---------------------------------------------------------------------- webhook


def _review(kind_path: str, obj: dict, op: str = "CREATE", **kw):
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "operation": op, "object": obj, "namespace": "default"},
    }
    return admission_review(body, kind_path, **kw)["response"]


def _queue(name: str, state: str = "Open"):
    from lavaflow.api.volcano import Queue

    q = Queue.model_validate(
        {"metadata": {"name": name}, "spec": {"weight": 1, "parent": "root" if name != "root" else ""}}
    )
    q.status.state = state
    return q


JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "default"},
    "spec": {
        "tasks": [
            {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "busybox", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}
                        ]
                    }
                },
            }
        ],
        "plugins": {"mpi": []},
    },
}


def test_webhook_mutates_jobs_with_volcanos_defaults_and_keeps_unknown_fields():
    resp = _review("/jobs/mutate", JOB)
    assert resp["allowed"] and resp["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(resp["patch"]))
    spec = next(op["value"] for op in patch if op["path"] == "/spec")
    assert spec["queue"] == "default" and spec["minAvailable"] == 2 and spec["maxRetry"] == 3
    assert spec["tasks"][0]["name"] == "default0" and spec["tasks"][0]["minAvailable"] == 2
    assert "ssh" in spec["plugins"] and "svc" in spec["plugins"]
    assert spec["tasks"][0]["template"]["spec"]["containers"][0]["volumeMounts"] == [{"name": "x", "mountPath": "/x"}]


def test_webhook_validation_refusals_name_object_and_field():
    bad = json.loads(json.dumps(JOB))
    bad["spec"]["tasks"][0]["name"] = "w"
    bad["spec"]["tasks"][0]["minAvailable"] = 3
    bad["spec"]["queue"] = "missing"
    resp = _review("/jobs/validate", bad, queues={"default": _queue("default"), "root": _queue("root")})
    assert not resp["allowed"]
    msg = resp["status"]["message"]
    assert msg.startswith("Job default/j: ")
    assert "spec.tasks[0].minAvailable" in msg and "spec.queue" in msg
    resp = _review(
        "/queues/validate",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"weight": 0},
        },
        queues={},
    )
    assert not resp["allowed"] and "spec.weight" in resp["status"]["message"]
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "u",
            "operation": "DELETE",
            "name": "default",
            "oldObject": {"metadata": {"name": "default"}},
        },
    }
    resp = admission_review(body, "/queues/validate", queues={"default": _queue("default")}, podgroups=lambda: [])[
        "response"
    ]
    assert not resp["allowed"] and resp["status"]["code"] == 403


JOBFLOW_CYCLE = {
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobFlow",
    "metadata": {"name": "flow", "namespace": "default"},
    "spec": {"flows": [{"name": "a", "dependsOn": {"targets": ["b"]}}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
}
COMMAND_BAD_ACTION = {
    "apiVersion": "bus.volcano.sh/v1alpha1",
    "kind": "Command",
    "metadata": {"name": "cmd", "namespace": "default"},
    "action": "OpenQueue",
    "target": {"kind": "Job", "name": "j"},
}


def test_webhook_serves_every_kind_volcanos_admission_serves():
    from lavaflow.kube.webhook import ENDPOINTS

    validated = {kind for kind, mutate in ENDPOINTS.values() if not mutate}
    assert {"Job", "PodGroup", "Queue", "Pod", "JobFlow", "JobTemplate", "Command", "HyperNode"} <= validated
    assert {kind for kind, mutate in ENDPOINTS.values() if mutate} == {"Job", "PodGroup", "Queue"}


def test_webhook_validates_jobflows_commands_jobtemplates_and_hypernodes():
    resp = _review("/jobflows/validate", JOBFLOW_CYCLE)
    assert not resp["allowed"] and "JobFlow default/flow: spec.flows: flows are not a DAG" in resp["status"]["message"]
    resp = _review("/commands/validate", COMMAND_BAD_ACTION)
    assert (
        not resp["allowed"]
        and "Command default/cmd: action: 'OpenQueue' is not an action for a Job" in resp["status"]["message"]
    )
    ok = dict(COMMAND_BAD_ACTION, action="AbortJob")
    assert _review("/commands/validate", ok)["allowed"]  # the target may come later: not looked up
    tmpl = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": dict(JOB["spec"], plugins={}),
    }
    bad = json.loads(json.dumps(tmpl))
    bad["spec"]["tasks"][0]["minAvailable"] = 5
    assert _review("/jobtemplates/validate", tmpl)["allowed"]
    resp = _review("/jobtemplates/validate", bad)
    assert not resp["allowed"] and "spec.tasks[0].minAvailable" in resp["status"]["message"]
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": []},
    }
    resp = _review("/hypernodes/validate", hn)
    assert not resp["allowed"] and "spec.members" in resp["status"]["message"]


def test_api_double_with_the_webhook_refuses_cyclic_jobflows_and_wrong_commands():
    from lavaflow.kube.client import ApiError
    from lavaflow.kube.ops import create_manifest

    async def scenario():
        async with Cluster() as c:
            for doc in (JOBFLOW_CYCLE, COMMAND_BAD_ACTION):
                with pytest.raises(ApiError) as err:
                    await create_manifest(c.api, json.loads(json.dumps(doc)))
                assert err.value.status == 422
            await create_manifest(c.api, dict(COMMAND_BAD_ACTION, action="AbortJob"))
            assert c.webhook.refused == 2

    run(scenario())


def test_helm_chart_lists_the_webhooks_the_code_serves():
    import re
    from pathlib import Path

    from lavaflow.kube.webhook import HOOKS

    text = (Path(__file__).resolve().parents[2] / "charts/lavaflow/templates/webhook.yaml").read_text()
    chart = re.findall(
        r'\(dict "name" "([^"]+)" "path" "([^"]+)" .*"resource" "([^"]+)" "ops" \(list ([^)]*)\) "mutate" (\w+)\)', text
    )
    code = [
        (h.name, h.path, h.kind.plural, " ".join(f'"{o}"' for o in h.operations), str(h.mutate).lower()) for h in HOOKS
    ]
    assert chart == code


def test_webhook_serves_admission_reviews_over_tls(tmp_path):
    async def scenario():
        cert, key, ca = self_signed("lavaflow-webhook", "lavaflow-system", tmp_path)
        server = WebhookServer(store=None)
        runner = await server.serve("127.0.0.1", 0, cert, key)
        try:
            ctx = ssl.create_default_context(cadata=ca.decode())
            async with aiohttp.ClientSession() as s:
                body = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "x", "operation": "CREATE", "object": JOB},
                }
                async with s.post(f"https://localhost:{runner.bound_port}/jobs/mutate", json=body, ssl=ctx) as r:
                    out = await r.json()
                async with s.get(f"https://localhost:{runner.bound_port}/healthz", ssl=ctx) as r:
                    assert r.status == 200
            assert out["response"]["uid"] == "x" and out["response"]["allowed"]
        finally:
            await runner.cleanup()

    run(scenario())


# ---------------------------------------------------------------------- metrics, health, leader


def test_metrics_healthz_readyz_and_leader_election():
    async def scenario():
        from lavaflow.kube.metrics import serve_health

        async with Cluster([fake_node("n0")]) as c:
            s = c.start_scheduler()
            await c.until_ready()
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "annotations": {"sim.lavaflow.io/duration": "inf"}},
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
            c.start_controllers()
            await c.create([pod])

            async def bound():
                return s.writer.bound >= 1

            await c.wait_for(bound, 10, "the pod bound")
            runner = await serve_health(s.metrics.registry, "127.0.0.1", 0, lambda: s.healthy, lambda: s.ready)
            try:
                async with aiohttp.ClientSession() as http:
                    base = f"http://127.0.0.1:{runner.bound_port}"
                    async with http.get(base + "/metrics") as r:
                        text = await r.text()
                    for name in (
                        "lavaflow_scheduling_cycle_duration_seconds_bucket",
                        "lavaflow_e2e_scheduling_latency_seconds_count",
                        "lavaflow_pods_bound_total 1.0",
                        "lavaflow_pods_bound_per_second",
                        'lavaflow_pending_jobs{queue="default"}',
                        "lavaflow_preemptions_total",
                        'lavaflow_writes_waiting{lane="decision"}',
                        "lavaflow_events_dropped",
                    ):
                        assert name in text, name
                    for path in ("/healthz", "/readyz"):
                        async with http.get(base + path) as r:
                            assert r.status == 200
            finally:
                await runner.cleanup()
            # Leases: one holder at a time; release hands over at once.
            a = LeaderElector(c.client(), "l", "default", "a", lease_duration=5, retry_period=0.05)
            b = LeaderElector(c.client(), "l", "default", "b", lease_duration=5, retry_period=0.05)
            assert await a.acquire()
            assert not await b.try_acquire_or_renew()
            await a.release()
            assert await b.try_acquire_or_renew()
            lease = c.double.get("Lease", "default/l")
            assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] >= 1

    run(scenario())


# ---------------------------------------------------------------------- CLI


def test_vcctl_and_voda_commands_against_the_double(tmp_path):
    from typer.testing import CliRunner

    from lavaflow.cli import app

    double = ApiDouble().start()
    try:
        kc = double.kubeconfig(str(tmp_path / "kubeconfig"))
        double.put_object(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1},
                "status": {"state": "Open"},
            }
        )
        cli = CliRunner()

        def ok(*args):
            res = cli.invoke(app, [*args, "--kubeconfig", kc])
            assert res.exit_code == 0, res.output
            return res.output

        assert "run job demo successfully" in ok("job", "run", "-N", "demo", "-r", "2", "-m", "2")
        out = ok("job", "list")
        header = out.splitlines()[0]
        assert header.split() == [
            "Name",
            "Creation",
            "Phase",
            "JobType",
            "Replicas",
            "Min",
            "Pending",
            "Running",
            "Succeeded",
            "Failed",
            "Unknown",
            "RetryCount",
        ]
        assert header.index("Creation") == len("demo") + 3 and out.splitlines()[1].split()[0] == "demo"
        assert "Batch" in out.splitlines()[1]
        assert "Min Available:" in ok("job", "view", "-N", "demo")
        assert "suspend job demo successfully" in ok("job", "suspend", "-N", "demo")
        assert "resume job demo successfully" in ok("job", "resume", "-N", "demo")
        cmds = double.snapshot("Command")
        assert sorted(c["action"] for c in cmds) == ["AbortJob", "ResumeJob"]
        assert all(c["target"]["kind"] == "Job" and c["metadata"]["ownerReferences"][0]["name"] == "demo" for c in cmds)

        assert "create queue ml successfully" in ok("queue", "create", "-n", "ml", "-w", "3")
        out = ok("queue", "list")
        assert out.splitlines()[0].split() == [
            "Name",
            "Weight",
            "State",
            "Parent",
            "Inqueue",
            "Pending",
            "Running",
            "Unknown",
            "Completed",
        ]
        assert any(line.split()[:2] == ["ml", "3"] for line in out.splitlines())
        ok("queue", "operate", "-n", "ml", "-a", "update", "-w", "5")
        assert double.get("Queue", "ml")["spec"]["weight"] == 5
        ok("queue", "operate", "-n", "ml", "-a", "close")
        assert any(c["action"] == "CloseQueue" for c in double.snapshot("Command"))
        assert "ml" in ok("queue", "get", "-n", "ml")
        ok("queue", "delete", "-n", "ml")
        assert double.get("Queue", "ml") is None

        job_file = tmp_path / "train.yaml"
        job_file.write_text(json.dumps({**JOB, "metadata": {"name": "resnet"}}))
        assert "job/resnet created" in ok("train", "create", "-f", str(job_file))
        out = ok("train", "get", "jobs")
        assert (
            out.splitlines()[0].split()
            == "NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL RESIZES THROUGHPUT".split()
        )
        assert "resnet" in out
        assert "job resnet deleted" in ok("train", "delete", "resnet", "demo")
        assert ok("job", "list").strip() == "No resources found"
        res = cli.invoke(app, ["job", "view", "-N", "nope", "--kubeconfig", kc])
        assert res.exit_code == 1 and "not found" in res.output
    finally:
        double.stop()


def test_pods_listed_before_their_node_still_count_in_its_use():
    """On a real server the informers list concurrently: pods bound to a node can reach the
    scheduler's cache before the node does. They must count in the node's use once it arrives."""
    from lavaflow.kube.scheduler_process import KubeScheduler
    from lavaflow.scheduler.resources import CPU

    s = KubeScheduler(KubeClient(ClientConfig(server="http://127.0.0.1:9")), emit_events=False)

    def pod(name: str, scheduler: str, annotations: dict | None = None) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "resourceVersion": "1",
                "annotations": annotations or {},
            },
            "spec": {
                "schedulerName": scheduler,
                "nodeName": "n0",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }

    s.store._apply(kind_info("Pod"), "ADDED", pod("ours", "volcano", {"scheduling.k8s.io/group-name": "pg"}))
    s.store._apply(kind_info("Pod"), "ADDED", pod("theirs", "default-scheduler"))
    node = fake_node("n0", cpu="4", memory="8Gi")
    node["metadata"].update(uid="uid-n0", resourceVersion="2")
    s.store._apply(kind_info("Node"), "ADDED", node)
    i = s.cache.nodes.pos["n0"]
    assert s.cache.nodes.used[i][CPU] == 2.0
    s.cache.check_consistency()


def test_the_schedulers_pods_keep_only_what_scheduling_reads():
    from lavaflow.kube.slim import slim_pod

    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "x"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u"}],
            "managedFields": [{"manager": "kubectl"}],
            "finalizers": ["x/y"],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "c", "ready": True}],
        },
    }
    slim = slim_pod(raw)
    assert slim["metadata"] == {"name": "p", "namespace": "ns", "labels": {"app": "x"}}
    assert slim["spec"] == {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    assert slim["status"] == {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert "ownerReferences" in raw["metadata"] and len(raw["status"]["conditions"]) == 2  # the input is untouched
    # on a node: tolerations and the PodScheduled condition only served choosing the node
    raw["spec"]["nodeName"] = "n0"
    raw["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoExecute"}]
    slim = slim_pod(raw)
    assert slim["spec"] == {"nodeName": "n0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    assert slim["status"] == {"phase": "Running"}
    assert raw["spec"]["tolerations"] and len(raw["status"]["conditions"]) == 2


def test_both_backends_run_the_controllers_one_function_builds():
    from lavaflow.api.loader import load_text
    from lavaflow.controllers import build_controllers
    from lavaflow.kube.controller_process import KubeControllers
    from lavaflow.sim.engine import Simulation
    from lavaflow.sim.inputs import prepare
    from lavaflow.sim.native_controllers import WorkloadController
    from lavaflow.store.memory import MemoryStore

    built = [type(c) for c in build_controllers(MemoryStore(clock=lambda: 0.0), lambda: 0.0, ("volcano",)).all()]
    assert len(built) == 5 and len(set(built)) == 5
    kube = KubeControllers(KubeClient(ClientConfig(server="http://127.0.0.1:1")))
    assert [type(c) for c in kube.controllers] == built
    sim = Simulation(prepare(load_text("")), seed=0)
    # the simulator adds what it stands in for: kube-controller-manager's workload controllers and
    # the scheduler-plugins and Workload API gang stand-ins (on a cluster the scheduler process
    # keeps those)
    from lavaflow.sim.workload_api import WorkloadGangs
    from lavaflow.sim.x_k8s_podgroup import CoschedulingPodGroups

    assert [type(c) for c in sim.controllers] == [
        WorkloadController,
        built[0],
        CoschedulingPodGroups,
        WorkloadGangs,
        *built[1:],
    ]
    # the JobController keeps no per-job record for reports: the simulator holds them
    assert not hasattr(sim.job_ctrl, "history") and hasattr(sim, "job_history")


# ---------------------------------------------------------------------- other schedulers' pods


def _bound_pod(name: str, scheduler: str, cpu: str, **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "5", **meta},
        "spec": {
            "schedulerName": scheduler,
            "nodeName": "n0",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_pods_of_other_schedulers_are_kept_as_node_usage_only():
    """The scheduler keeps of another scheduler's pod only what the cache reads of it (node, phase,
    requests), not a pydantic Pod (~7.5 KiB each, 50,000 such pods at the #5819 shape). A pod of
    ours, or one naming a gang of any of the three gang APIs, is read whole."""
    from lavaflow.kube.scheduler_process import KubeScheduler
    from lavaflow.kube.slim import UsageOnlyPod
    from lavaflow.scheduler.resources import CPU, PODS

    async def scenario():
        s = KubeScheduler(KubeClient(ClientConfig(server="http://127.0.0.1:9")), emit_events=False)
        st = s.store
        st._apply(
            kind_info("Node"),
            "ADDED",
            {**fake_node("n0", cpu="4", memory="8Gi"), "metadata": {"name": "n0", "uid": "n0"}},
        )
        pod = kind_info("Pod")
        st._apply(pod, "ADDED", _bound_pod("web", "default-scheduler", "500m", labels={"app": "web"}))
        st._apply(pod, "ADDED", _bound_pod("mine", "lavaflow", "1", annotations={"scheduling.k8s.io/group-name": "g"}))
        st._apply(
            pod,
            "ADDED",
            _bound_pod("coflow", "default-scheduler", "250m", labels={"scheduling.x-k8s.io/pod-group": "x"}),
        )
        web = st.get("Pod", "ns/web")
        assert isinstance(web, UsageOnlyPod) and not hasattr(web, "__dict__")
        assert dict(web.metadata.labels) == {} and not hasattr(web.spec, "tolerations")
        assert web.spec.node_name == "n0" and web.status.phase == "Running" and web.metadata.uid == "uid-web"
        assert web.key == "ns/web" and web.requests == {"cpu": 0.5}
        mine = st.get("Pod", "ns/mine")
        assert mine.metadata.annotations == {"scheduling.k8s.io/group-name": "g"} and mine.spec.containers
        assert st.get("Pod", "ns/coflow").metadata.labels == {"scheduling.x-k8s.io/pod-group": "x"}
        # pods read whole are compacted: one set of given fields per shape
        st._apply(pod, "ADDED", _bound_pod("mine2", "lavaflow", "1", annotations={"scheduling.k8s.io/group-name": "g"}))
        mine2 = st.get("Pod", "ns/mine2")
        assert mine2.metadata.__pydantic_fields_set__ is mine.metadata.__pydantic_fields_set__
        assert mine2.spec.containers[0].__pydantic_fields_set__ is mine.spec.containers[0].__pydantic_fields_set__
        node = s.cache.nodes.pos["n0"]
        # web and coflow as usage; mine and mine2 as tasks of their gang: all four on the node
        assert s.cache.nodes.used[node][CPU] == pytest.approx(2.75)
        assert s.cache.nodes.used[node][PODS] == 4
        st._apply(pod, "DELETED", _bound_pod("web", "default-scheduler", "500m"))
        assert s.cache.nodes.used[node][CPU] == pytest.approx(2.25)
        # resources that do not read: the whole decode reports the pod and it is ignored, as before
        st._apply(pod, "ADDED", _bound_pod("bad", "default-scheduler", "lots"))
        assert st.get("Pod", "ns/bad") is None
        assert s.cache.nodes.used[node][CPU] == pytest.approx(2.25)

    run(scenario())


def test_a_streamed_initial_state_applies_each_event_as_its_type_says():
    """Inside a streaming list's initial state a server sends ADDED events; should another type
    come, it is applied as that type (a DELETED object stays deleted, not re-added), and only the
    end bookmark is a version to resume from."""
    from lavaflow.kube.informer import Informer

    def pod(name: str, rv: str) -> dict:
        return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv}, "spec": {}}

    end = {"metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}}}
    batches = [
        [{"type": "ADDED", "object": pod("a", "3")}, {"type": "ADDED", "object": pod("b", "4")}],
        [{"type": "DELETED", "object": pod("b", "5")}, {"type": "MODIFIED", "object": pod("a", "6")}],
        [{"type": "BOOKMARK", "object": end}],
    ]

    class Client:
        async def stream_batches(self, path, params, timeout):
            assert params["sendInitialEvents"] is True
            for b in batches:
                yield b

    async def scenario():
        store = KubeStore(Client(), keep_raw=True)  # type: ignore[arg-type]
        inf = Informer(store, kind_info("Pod"))
        await inf._watch(initial=True)
        assert sorted(store.objects["Pod"]) == ["ns/a"]
        assert store.objects["Pod"]["ns/a"].metadata.resource_version == "6"
        assert inf.synced.is_set() and inf.rv == "9"

    run(scenario())


def test_the_controllers_wait_leaves_no_unawaited_waits_when_its_timeout_is_already_due():
    """The controller loop waits for a stop or a wake with a timeout that can already be due: the
    wait is then cancelled before it starts, and must not leave waits behind that are never awaited
    (a RuntimeWarning at every such turn of the loop)."""
    import gc
    import warnings

    from lavaflow.kube.controller_process import _first_set

    async def scenario() -> None:
        stop, wake = asyncio.Event(), asyncio.Event()
        for _ in range(20):
            try:
                await asyncio.wait_for(_first_set(stop, wake), 0)
            except TimeoutError:
                pass
        wake.set()
        await asyncio.wait_for(_first_set(stop, wake), 5)  # returns once one is set

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(scenario())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


def pod(i: int) -> Any:
    """A bare pod ``p{i}`` in the default namespace."""
    from lavaflow.api.core import Pod

    return Pod.model_validate(
        {"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )


async def _pod_store(double: Any) -> tuple[KubeClient, KubeStore]:
    """An unthrottled client of ``double`` and a started, synced store informing pods."""
    client = KubeClient(ClientConfig(server=double.url, qps=0))
    store = KubeStore(client)
    store.inform("Pod")
    await store.start()
    assert await store.wait_synced(5)
    return client, store


def test_create_many_sends_slow_start_batches_and_stops_after_a_refusal():
    """A Job's pods go out in batches of 1, 2, 4, ... (at most create_concurrency in flight), all
    created and applied in order; a refused create stops the batches after its own and its error
    is raised."""
    from lavaflow.kube.client import ApiError

    async def scenario():
        double = ApiDouble().start()
        try:
            client, store = await _pod_store(double)
            made = await asyncio.to_thread(store.create_many, [pod(i) for i in range(10)])
            assert [p.name for p in made] == [f"p{i}" for i in range(10)]
            assert {p["metadata"]["name"] for p in double.snapshot("Pod")} == {f"p{i}" for i in range(10)}
            # the first create of the next pods is refused: nothing after its batch is sent
            later = [pod(i) for i in range(10, 30)]
            double.fail_next("Pod", "create", 500, 1)
            with pytest.raises(ApiError):
                await asyncio.to_thread(store.create_many, later)
            names = {p["metadata"]["name"] for p in double.snapshot("Pod")}
            assert "p10" not in names  # the first batch (one pod) was the refused one
            assert not names & {f"p{i}" for i in range(11, 30)}  # nothing sent after it
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())


def test_deferred_creates_return_at_once_and_are_applied_when_taken():
    """With defer_creates (the controller process), create_many and update_later return before the
    requests end, filed under the key being synced; take_created waits for them, applies the
    results to the cache in order and returns the first refusal instead of raising it."""
    from lavaflow.kube.client import ApiError

    async def scenario():
        double = ApiDouble().start()
        try:
            client, store = await _pod_store(double)
            store.defer_creates = True

            def sync_jobs() -> tuple[list, list, list, Any, Any]:
                store.owner = "refused"
                double.fail_next("Pod", "create", 500, 1)
                store.create_many([pod(i) for i in range(20, 25)])
                err = store.take_created("refused")
                store.owner = "a"
                got_a = store.create_many([pod(i) for i in range(10)])
                store.owner = "b"
                got_b = store.create_many([pod(i) for i in range(10, 20)])
                store.owner = None
                owners = store.deferred_owners()  # both in flight at once
                return got_a, got_b, owners, err, (store.take_created("a"), store.take_created("b"))

            async with store.lock:  # as in a reconcile pass: the cache stays still meanwhile
                got_a, got_b, owners, refused, taken = await asyncio.to_thread(sync_jobs)
            assert got_a == [] and got_b == [] and owners == ["a", "b"]
            assert isinstance(refused, ApiError) and taken == (None, None)
            assert store.deferred_owners() == []
            assert {p.name for p in store.list("Pod")} == {f"p{i}" for i in range(20)}

            def update_later() -> tuple[Any, list, Any]:
                store.owner = "u"
                p0 = store.get("Pod", "default/p0")
                p0.metadata.labels["seen"] = "yes"
                got = store.update_later(p0)
                store.owner = None
                return got, store.deferred_owners(), store.take_created("u")

            async with store.lock:
                got, owners, err = await asyncio.to_thread(update_later)
            assert got is None and owners == ["u"] and err is None
            assert {p["metadata"]["name"] for p in double.snapshot("Pod") if p["metadata"].get("labels")} == {"p0"}
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())


def test_a_server_from_before_streaming_lists_by_its_version_is_not_kept_waiting_for_the_probe():
    """A 1.18 server serves the probe a plain watch, which never ends an initial state: its
    /version says what it is, so the informers list at once instead of waiting out the probe."""

    async def scenario():
        double = ApiDouble(bookmark_interval=0.05).start()
        double.version = (1, 18)
        double.watch_list = False
        double.knows_watch_list = False
        try:
            double.put_object(_queue_raw("a"))
            client = KubeClient(ClientConfig(server=double.url, qps=0))
            store = KubeStore(client)
            store.watch_list_probe_timeout = 60.0  # were it asked, the start would wait this long
            store.inform("Queue")
            await asyncio.wait_for(store.start(), 10)
            assert await store.wait_synced(5)
            assert store.watch_list is False and [q.name for q in store.list("Queue")] == ["a"]
            await store.stop()
            await client.close()
        finally:
            double.stop()

    run(scenario())
