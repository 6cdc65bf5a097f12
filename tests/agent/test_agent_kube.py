"""The agent's reports on a cluster: a JSON merge patch of the job's Volcano Job through the API
(here lavaflow's API double), configured from the environment as a pod has it; an API that fails
or never answers does not stop training; and end to end, a training process's reports reach the
PodGroup and the scheduler grows the job as it learns."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from lavaflow.agent import (  # noqa: E402
    Agent,
    KubeSink,
    Topology,
    report as rp,  # noqa: E402
    sink_from_env,
)
from lavaflow.agent.sinks import FileSink, KubeError  # noqa: E402
from lavaflow.elastic import learned  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "agent" / "train_toy.py"


def vcjob(name: str, ns: str = "team") -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": {"owner": "ml"}},
        "spec": {"minAvailable": 1, "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {}}}]},
    }


def pod(name: str, job: str, ns: str = "team") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"volcano.sh/job-name": job}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


@pytest.fixture()
def double():
    d = ApiDouble().start()
    d.put_object(vcjob("train"))
    d.put_object(pod("train-worker-0", "train"))
    yield d
    d.stop()


def job_annotations(d: ApiDouble, key: str = "team/train") -> dict:
    return d.get("Job", key)["metadata"]["annotations"]


def test_the_report_is_merged_into_the_jobs_annotations(double):
    sink = KubeSink(double.url, namespace="team", job_name="train", token="t")
    sink.send({rp.METRICS: '{"rates":[["v100",1,2,0.5]]}', rp.PROGRESS: "0.25"})
    ann = job_annotations(double)
    assert ann["owner"] == "ml" and ann[rp.PROGRESS] == "0.25"
    assert learned.parse_report(ann[rp.METRICS]).rates == (("v100", 1, 2, 0.5),)
    assert double.counts["patch/Job"] == 1


def test_the_job_is_found_from_the_pods_label(double):
    sink = KubeSink(double.url, namespace="team", pod_name="train-worker-0")
    sink.send({rp.PROGRESS: "0.5"})
    sink.send({rp.PROGRESS: "0.6"})
    assert job_annotations(double)[rp.PROGRESS] == "0.6"
    assert double.counts["get/Pod"] == 1  # looked up once
    with pytest.raises(KubeError, match="LAVAFLOW_JOB_NAME"):
        KubeSink(double.url).send({})


def test_the_environment_chooses_the_sink(double, tmp_path):
    token = tmp_path / "token"
    token.write_text("secret\n")
    env = {"LAVAFLOW_KUBE_URL": double.url, "LAVAFLOW_KUBE_TOKEN_FILE": str(token), "POD_NAMESPACE": "team"}
    sink = sink_from_env({**env, "LAVAFLOW_JOB_NAME": "train"})
    assert isinstance(sink, KubeSink) and sink.path().endswith("/namespaces/team/jobs/train")
    sink.send({rp.PROGRESS: "0.1"})
    assert job_annotations(double)[rp.PROGRESS] == "0.1"
    # a kubeconfig (the API double writes one), the job named by the pod's label
    cfg = double.kubeconfig(str(tmp_path / "kubeconfig"))
    sink = sink_from_env({"KUBECONFIG": cfg, "POD_NAMESPACE": "team", "POD_NAME": "train-worker-0"})
    assert isinstance(sink, KubeSink) and sink.token == "test"
    sink.send({rp.PROGRESS: "0.2"})
    assert job_annotations(double)[rp.PROGRESS] == "0.2"
    # in a pod: the service account's token, CA and namespace
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok")
    (sa / "namespace").write_text("team")
    incluster = KubeSink.from_env(
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", "LAVAFLOW_JOB_NAME": "j"},
        service_account_dir=str(sa),
    )
    assert incluster is not None and incluster.server == "https://10.0.0.1:443"
    assert incluster.namespace == "team" and incluster.token_file == str(sa / "token")
    assert incluster.path() == "/apis/batch.volcano.sh/v1alpha1/namespaces/team/jobs/j"
    # a file, or nothing
    assert isinstance(sink_from_env({**env, "LAVAFLOW_REPORT_FILE": str(tmp_path / "r.json")}), FileSink)
    assert sink_from_env({**env, "LAVAFLOW_REPORT": "off"}) is None
    assert sink_from_env({}) is None


def agent_with(sink, **kw) -> Agent:
    return Agent(
        batch_size=32,
        total_steps=10_000,
        sink=sink,
        topology=Topology(replicas=2, gpu_type="v100"),
        checkpoint_dir=None,
        handle_signals=False,
        environ={},
        report_period=0.05,
        first_report_steps=1,
        warmup_steps=0,
        **kw,
    )


def test_api_errors_are_dropped_and_training_goes_on(double):
    double.fail_next("Job", "patch", 500, n=3)
    a = agent_with(KubeSink(double.url, namespace="team", job_name="train"))
    for _ in range(200):
        time.sleep(0.002)
        a.step_done()
    a.close()
    assert a.step == 200 and a.reporter is None
    ann = job_annotations(double)
    assert float(ann[rp.PROGRESS]) == pytest.approx(0.02)  # the last report went through
    assert learned.parse_report(ann[rp.METRICS]).rates[0][:3] == ("v100", 1, 2)


def test_an_api_server_that_never_answers_does_not_hold_up_training():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])  # and never answer
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        sink = KubeSink(url, namespace="team", job_name="train", timeout=0.5)
        a = agent_with(sink)
        t0 = time.monotonic()
        for _ in range(300):
            time.sleep(0.002)
            a.step_done()
        assert time.monotonic() - t0 < 3.0
        deadline = time.monotonic() + 10
        while a.reporter.failed < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.reporter.failed >= 1  # timed out, logged, dropped
        t1 = time.monotonic()
        a.close(timeout=0.3)
        assert time.monotonic() - t1 < 2.0
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        srv.close()


def test_a_training_process_reports_and_the_scheduler_grows_its_job(tmp_path):
    """End to end on the API double: controllers, scheduler (learned models, no oracle) and the
    toy training script as a process reporting to the Job: the report reaches the PodGroup, the
    scheduler's learned model reads it, and the job, on one worker until then, gets a second."""
    pytest.importorskip("prometheus_client")
    sys.path.insert(0, str(ROOT / "tests" / "kube"))  # the elastic cluster tests' job and nodes
    from test_kube_elastic import CONF, elastic_job, gpu_node, running_workers

    from kube_harness import Cluster
    from lavaflow.scheduler.framework.conf import load_scheduler_conf

    async def scenario():
        async with Cluster([gpu_node("v100-0", 4, "v100")], time_scale=0.01) as c:
            c.start_controllers()
            c.start_scheduler(conf=load_scheduler_conf(CONF.replace(", elastic.oracle: true", "")))
            await c.until_ready()
            # long enough that a second worker is worth the policy's switching cost (12 × 30 s)
            await c.create([elastic_job("learner", 100_000, 1, 4, "inf")])

            async def running(n: int):
                return len(running_workers(await c.pods("default"), "learner")) == n

            await c.wait_for(lambda: running(1), 60, "one worker before any report")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LAVAFLOW_", "KUBE"))}
            env.update(
                PYTHONPATH=str(ROOT / "src"),
                LAVAFLOW_KUBE_URL=c.double.url,
                POD_NAMESPACE="default",
                POD_NAME="learner-worker-0",  # the job's name from the pod's label
                LAVAFLOW_GPU_TYPE="v100",
                LAVAFLOW_REPORT_PERIOD="0.5",
                WORLD_SIZE="1",
            )
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(TOY),
                "--epochs",
                "100000",
                "--step-seconds",
                "0.01",
                "--log-every",
                "1000000",
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            try:

                async def reported():
                    pgs = await c.objects("PodGroup", "default")
                    raw = pgs and (pgs[0]["metadata"].get("annotations") or {}).get(rp.METRICS)
                    return raw and learned.parse_report(raw)

                r = await c.wait_for(reported, 60, "the agent's report on the PodGroup")
                assert r.rates and r.rates[0][:3] == ("v100", 1, 1)
                await c.wait_for(lambda: running(2), 60, "a second worker once measured on one")
            finally:
                proc.terminate()
                _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()[-2000:]

    asyncio.run(asyncio.wait_for(scenario(), 150))
