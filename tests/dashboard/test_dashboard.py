"""`lavaflow dashboard` without a browser: the state from a simulation's JSON (at its end and at a
time T), the pages built from it, the forecast column's adapter, the server-sent events, and the
command's errors on bad input."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import EXAMPLES, lavaflow_cli, simulate_cli
from lavaflow.dashboard import pages
from lavaflow.dashboard.forecast_column import NONE, ForecastColumn
from lavaflow.dashboard.from_result import ResultError, read_result, state_from_result
from lavaflow.dashboard.model import Job, Pod, Queue, State

NO_FORECAST = ForecastColumn(entry=None).text


def _simulated(factory, example: str) -> Path:
    """The JSON result of `lavaflow simulate` of an example, in a file."""
    out = factory.mktemp("dash") / "result.json"
    proc = simulate_cli(str(EXAMPLES / example), "--output", "json", "--cluster-state")
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    return out


@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Path:
    return _simulated(tmp_path_factory, "spark-wordcount.yaml")


@pytest.fixture(scope="module")
def elastic(tmp_path_factory) -> Path:
    return _simulated(tmp_path_factory, "elastic-pytorch.yaml")


def test_simulate_json_says_what_the_nodes_page_needs_when_asked(spark, elastic):
    trained = json.loads(elastic.read_text())
    assert list(trained)[-2:] == ["elastic", "cluster"]  # last, after the keys the command adds too
    result = json.loads(spark.read_text())
    cluster = result["cluster"]
    assert list(result)[-1] == "cluster"  # appended: the keys before it are as they were
    assert [n["name"] for n in cluster["nodes"]] == ["worker-0", "worker-1"]
    assert cluster["nodes"][0]["allocatable"]["cpu"] == 3.0
    assert len(cluster["podRequests"]) == len(result["pods"])
    drivers = [r for p, r in zip(result["pods"], cluster["podRequests"]) if p["name"].endswith("-driver")]
    assert drivers and all(r["cpu"] == 1.0 for r in drivers)
    # without --cluster-state the output is as it was: no cluster key
    plain = simulate_cli(str(EXAMPLES / "spark-wordcount.yaml"), "--output", "json")
    assert plain.returncode == 0 and "cluster" not in json.loads(plain.stdout)


def test_state_at_a_time_shows_who_waited_and_why(spark):
    result = read_result(spark)
    st = state_from_result(result, "spark.json", at=30.0)
    phases = {j.name: j.phase for j in st.jobs.values()}
    assert phases["spark-wordcount-1-podgroup"] == "Running"
    waiting = st.jobs["spark/spark-wordcount-3-podgroup"]
    assert waiting.pending
    # the words of the decision the scheduler took about it by then (as --explain prints them)
    assert waiting.why.startswith("minResources (cpu 3, memory 3Gi) exceed what the cluster can admit in cpu")
    # nodes hold what the running pods request at 30 s: two drivers and their executors on 6 CPUs
    assert sum(u.get("cpu", 0.0) for u in st.node_used.values()) == pytest.approx(
        sum(p.requests.get("cpu", 0.0) for p in st.pods.values() if p.phase == "Running")
    )
    html = pages.queues_page(st, NO_FORECAST)
    assert "spark/spark-wordcount-3-podgroup" in html and "exceed what the cluster can admit" in html
    job = pages.job_page(st, "spark/spark-wordcount-3-podgroup", NO_FORECAST)
    assert 'id="why"' in job and "Decisions" in job
    driver = pages.pod_page(st, "spark/spark-wordcount-1-driver")
    assert driver is not None and 'href="/nodes/worker-' in driver and "cpu 1" in driver
    assert pages.pod_page(st, "spark/no-such-pod") is None
    # at the end every job has completed: nothing waits
    end = state_from_result(result, "spark.json")
    assert {j.phase for j in end.jobs.values()} == {"Completed"}
    assert "exceed what" not in pages.queues_page(end, NO_FORECAST)


def test_elastic_page_lists_each_resize_with_its_reason(elastic):
    st = state_from_result(read_result(elastic), "elastic.json")
    el = st.elastic["default/resnet50-elastic"]
    assert [r.workers for r in el.history] == [2, 4, 8, 0]
    assert el.history[1].reason == "resized 2 → 4 workers: Lavaflow: 8 GPUs, room to grow"
    assert el.throughput.endswith("samples/s")
    html = pages.elastic_job_page(st, "default/resnet50-elastic")
    assert html.count('class="resize"') == 4 and "<svg" in html
    nodes = pages.nodes_page(st, {})
    assert "GPUs by type" in nodes and "v100" in nodes


def test_live_state_works_out_deserved_as_proportion_does():
    st = State("test", simulated=False)
    for name, weight in (("a", 1), ("b", 3)):
        st.put_queue(Queue(name=name, weight=weight))
    from lavaflow.dashboard.model import Node

    st.put_node(Node("n0", {"cpu": 8.0}))
    for q in ("a", "b"):
        st.put_job(Job("default", f"j-{q}", "Job", queue=q))
        for i in range(8):
            st.put_pod(Pod("default", f"j-{q}-{i}", job=f"default/j-{q}", requests={"cpu": 1.0}))
    d = st.deserved()
    assert d["a"]["cpu"] == pytest.approx(2.0) and d["b"]["cpu"] == pytest.approx(6.0)
    # binding and ending pods keep the node's and job's sums right
    st.put_pod(Pod("default", "j-a-0", job="default/j-a", node="n0", phase="Running", requests={"cpu": 1.0}))
    assert st.node_used["n0"]["cpu"] == 1.0
    st.put_pod(Pod("default", "j-a-0", job="default/j-a", node="n0", phase="Succeeded", requests={"cpu": 1.0}))
    assert st.node_used["n0"]["cpu"] == 0.0
    v = st.version
    st.drop_pod("default/j-a-1")
    assert st.changed(v) == {"Pod"} and st.changed(st.version) == set()


def test_forecast_column_degrades_to_a_dash():
    assert ForecastColumn(entry=None).text("ns/job") == NONE

    class P:
        def __init__(self, start, low, high):
            self.start, self.start_low, self.start_high, self.source, self.running = (
                start,
                low,
                high,
                "annotations",
                False,
            )

    class R:
        jobs = {"ns/job": P(1300.0, 1120.0, 1900.0)}

    col = ForecastColumn(entry=lambda objects, conf, now: R())
    col.refresh([], None, 1000.0)
    assert col.text("ns/job") == "in 5m (2m–15m), annotations"
    assert col.text("ns/other") == NONE

    def broken(objects, conf, now):
        raise RuntimeError("boom")

    col = ForecastColumn(entry=broken)
    col.refresh([], None, 0.0)
    assert col.text("ns/job") == NONE


def _dashboard(*args: str) -> subprocess.CompletedProcess:
    return lavaflow_cli("dashboard", *args, timeout=60)


@pytest.mark.parametrize(
    ("content", "args", "says"),
    [
        (None, (), "cannot read file"),
        ("{not json", (), "not JSON"),
        ('{"scheduler": "lavaflow"}', (), "endTime: missing"),
        ('{"results": [{"scheduler": "lavaflow"}]}', ("--scheduler", "volcano"), "no run of scheduler 'volcano'"),
        ("{}", ("--at", "soon"), "--at:"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, content, args, says):
    f = tmp_path / "result.json"
    if content is not None:
        f.write_text(content)
    proc = _dashboard("--from", str(f), *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_read_result_names_the_file_and_field(tmp_path):
    f = tmp_path / "r.json"
    f.write_text('{"scheduler": "x", "endTime": 1, "jobs": {}, "podGroups": [], "pods": [], "queues": [], "stuck": []}')
    with pytest.raises(ResultError) as exc:
        read_result(f)
    assert exc.value.problems == [f"{f}: jobs: expected a list, got dict"]


def test_server_sends_an_event_when_the_state_changes():
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import asyncio

    from lavaflow.dashboard.app import Dashboard, make_app, server

    st = State("test", simulated=False)
    st.put_queue(Queue("default"))
    dash = Dashboard(st, live=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    srv = server(make_app(dash), "127.0.0.1", port)
    got: list[str] = []

    def client() -> None:
        while not srv.started:
            time.sleep(0.02)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stream?since={st.version}", timeout=10) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    got.append(line)
                    return

    async def main() -> None:
        serving = asyncio.create_task(srv.serve())
        reader = threading.Thread(target=client)
        reader.start()
        while not srv.started:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        st.put_job(Job("default", "j", "Job"))
        dash.broadcast.fire()
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.05)
        srv.should_exit = True
        await asyncio.wait([serving], timeout=5)
        reader.join(5)

    asyncio.run(main())
    assert got and json.loads(got[0][5:])["kinds"] == ["Job"]
    # a page of the live dashboard carries its version and the script that follows the events
    html = pages.page(st, "Jobs", "", "jobs", "Job", live=True)
    assert f'data-version="{st.version}"' in html and "EventSource" in html


def test_the_command_serves_a_cluster_from_its_kubeconfig_and_stops_on_sigterm(tmp_path):
    pytest.importorskip("aiohttp")
    pytest.importorskip("starlette")
    import asyncio
    import signal
    import urllib.error

    from dashboard_cluster import NODES, QUEUES
    from lavaflow.kube.client import ClientConfig, KubeClient
    from lavaflow.kube.ops import create_manifest
    from lavaflow.testing import ApiDouble

    double = ApiDouble().start()
    try:

        async def setup() -> None:
            client = KubeClient(ClientConfig(server=double.url))
            for obj in NODES + QUEUES:
                await create_manifest(client, dict(obj))
            await client.close()

        asyncio.run(setup())
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: d, cluster: {{server: '{double.url}'}}}}]\n"
            "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: d, user: u}}]\n"
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-c", "from lavaflow.cli import main; main()", "dashboard"]
            + ["--kubeconfig", str(kubeconfig), "--port", str(port)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            body = ""
            for _ in range(200):
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/queues", timeout=2).read().decode()
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.1)
            assert 'href="/queues/vision"' in body and 'href="/queues/research"' in body
            nodes = urllib.request.urlopen(f"http://127.0.0.1:{port}/nodes", timeout=5).read().decode()
            assert all(f'href="/nodes/{n["metadata"]["name"]}"' in nodes for n in NODES)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                _, err = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        assert proc.returncode == 0, err
    finally:
        double.stop()


def test_forecast_column_finds_a_job_by_its_podgroup_too():
    class R:
        jobs = {"ns/train-1234": type("P", (), {"start": 60.0, "running": False})()}

    col = ForecastColumn(entry=lambda objects, conf, now: R())
    col.refresh([], None, 0.0)
    assert col.text("ns/train", "ns/train-1234") == "in 60s"
    assert col.text("ns/train") == NONE


def test_forecast_loop_refreshes_the_column_and_tells_the_pages():
    pytest.importorskip("starlette")
    import asyncio

    from lavaflow.dashboard.app import Dashboard, forecast_loop

    seen = []

    class R:
        jobs = {"default/j": type("P", (), {"start": 1e12, "running": False})()}

    def entry(objects, conf, now):
        seen.append((list(objects), conf))
        return R()

    st = State("test", simulated=False)
    dash = Dashboard(st, live=True, forecast=ForecastColumn(interval=3600, entry=entry))

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(forecast_loop(dash, lambda: ["obj"], "conf", stop, tick=0.01))
        for _ in range(200):
            if "Forecast" in (st.changed(0) or set()):
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(main())
    assert seen == [(["obj"], "conf")]  # once: the next is an interval away
    assert dash.forecast.text("default/j").startswith("in ")
    html = pages.page(st, "Jobs", pages.jobs_page(st, dash.forecast.text, {}), "jobs", "Job,Pod,Forecast", True)
    assert 'data-kinds="Job,Pod,Forecast"' in html


def _pod(name: str, labels: dict | None = None, spec: dict | None = None, phase: str = "Pending") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **(spec or {})},
        "status": {"phase": phase},
    }


def test_live_state_shows_the_gangs_of_the_other_two_apis():
    pytest.importorskip("aiohttp")
    from lavaflow.dashboard.live import LiveState
    from lavaflow.kube.client import ClientConfig, KubeClient

    live = LiveState(KubeClient(ClientConfig(server="https://unused.invalid")), "test")
    st = live.state
    live._on_CoschedulingPodGroup(
        "ml/trainer",
        {"metadata": {"name": "trainer", "namespace": "ml", "uid": "g"}, "spec": {"minMember": 2}, "status": {}},
    )
    live._on_Pod("ml/trainer-0", _pod("trainer-0", labels={"scheduling.x-k8s.io/pod-group": "trainer"}))
    live._on_Workload(
        "ml/wl",
        {"metadata": {"name": "wl", "namespace": "ml", "uid": "w"}, "spec": {"podGroups": [{"name": "workers"}]}},
    )
    ref = {"workloadRef": {"name": "wl", "podGroup": "workers"}}
    live._on_Pod("ml/wl-0", _pod("wl-0", spec=ref))
    trainer, wl = st.jobs["ml/trainer"], st.jobs["ml/wl"]
    assert trainer.kind == "PodGroup (scheduling.x-k8s.io)" and trainer.pending and trainer.min_member == 2
    assert trainer.why == "waiting to be scheduled as a gang"
    assert [p.name for p in st.pods_of("ml/trainer")] == ["trainer-0"]
    assert wl.kind.startswith("Workload") and wl.phase == "Pending"
    # a Workload keeps no phase: it follows its pods
    live._on_Pod("ml/wl-0", _pod("wl-0", spec={**ref, "nodeName": "n0"}, phase="Running"))
    assert st.jobs["ml/wl"].phase == "Running"
    assert st.node_used["n0"] == {"cpu": 1.0}
    html = pages.jobs_page(st, NO_FORECAST, {})
    assert "PodGroup (scheduling.x-k8s.io)" in html and "Workload (scheduling.k8s.io/v1alpha1)" in html
    live._on_Workload("ml/wl", None)
    assert "ml/wl" not in st.jobs


def test_a_port_in_use_is_one_line_and_exit_code_2(spark):
    pytest.importorskip("starlette")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _dashboard("--from", str(spark), "--port", str(port))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"error: --port: cannot listen on 127.0.0.1:{port} (Address already in use)"


def test_live_why_follows_the_queue_a_job_names():
    pytest.importorskip("aiohttp")
    from lavaflow.dashboard.live import LiveState
    from lavaflow.kube.client import ClientConfig, KubeClient

    live = LiveState(KubeClient(ClientConfig(server="https://unused.invalid")), "test")
    live._on_Queue("default", {"metadata": {"name": "default"}, "spec": {"weight": 1}})
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": {"queue": "ml"}, "status": {}}
    live._on_Job("ns/j", job)
    assert live.state.jobs["ns/j"].why == "Queue 'ml' does not exist; existing queues are: 'default'."
    live._on_Queue("ml", {"metadata": {"name": "ml"}, "spec": {"weight": 1}})
    assert live.state.jobs["ns/j"].why == "waiting for its PodGroup to be created"
    pg = {
        "metadata": {
            "name": "j-u",
            "namespace": "ns",
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j"}],
        },
        "spec": {"queue": "ml", "minMember": 2},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "Unschedulable", "status": "True", "message": "2/2 tasks in gang unschedulable: x"}
            ],
        },
    }
    live._on_PodGroup("ns/j-u", pg)
    assert live.state.jobs["ns/j"].why == "2/2 tasks in gang unschedulable: x"
    assert live.state.jobs["ns/j"].podgroup == "ns/j-u"
    live._on_Queue("ml", None)
    assert live.state.jobs["ns/j"].why.startswith("Queue 'ml' does not exist")
