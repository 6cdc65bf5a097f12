"""Admission: Volcano's webhook defaults and validation rules (lavaflow.api.admission)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from lavaflow.api.admission import (
    Problem,
    default_job,
    default_podgroup,
    default_queue,
    parse_duration,
    validate_job,
    validate_job_update,
    validate_pod,
    validate_podgroup,
    validate_queue,
    validate_queue_delete,
)
from lavaflow.api.core import Pod
from lavaflow.api.volcano import Job, PodGroup, Queue

# --- seed jobs (verbatim from the Volcano AI-computing guide) ----------------------

TF_JOB_YAML = r"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tensorflow-benchmark
  labels:
    "volcano.sh/job-type": "Tensorflow"
spec:
  minAvailable: 3
  schedulerName: volcano
  plugins:
    env: []
    svc: []
  policies:
    - event: PodEvicted
      action: RestartJob
  tasks:
    - replicas: 1
      name: ps
      template:
        spec:
          imagePullSecrets:
            - name: default-secret
          containers:
            - command:
                - sh
                - -c
                - |
                  PS_HOST=`cat /etc/volcano/ps.host | sed 's/$/&:2222/g' | tr "\n" ","`;
                  WORKER_HOST=`cat /etc/volcano/worker.host | sed 's/$/&:2222/g' | tr "\n" ","`;
                  python tf_cnn_benchmarks.py --batch_size=32 --model=resnet50 --variable_update=parameter_server --flush_stdout=true --num_gpus=1 --local_parameter_device=cpu --device=cpu --data_format=NHWC --job_name=ps --task_index=${VK_TASK_INDEX} --ps_hosts=${PS_HOST} --worker_hosts=${WORKER_HOST}
              image: docker.m.daocloud.io/volcanosh/example-tf:0.0.1
              name: tensorflow
              ports:
                - containerPort: 2222
                  name: tfjob-port
              resources:
                requests:
                  cpu: "1000m"
                  memory: "2048Mi"
                limits:
                  cpu: "1000m"
                  memory: "2048Mi"
              workingDir: /opt/tf-benchmarks/scripts/tf_cnn_benchmarks
          restartPolicy: OnFailure
    - replicas: 2
      name: worker
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          imagePullSecrets:
            - name: default-secret
          containers:
            - command:
                - sh
                - -c
                - |
                  PS_HOST=`cat /etc/volcano/ps.host | sed 's/$/&:2222/g' | tr "\n" ","`;
                  WORKER_HOST=`cat /etc/volcano/worker.host | sed 's/$/&:2222/g' | tr "\n" ","`;
                  python tf_cnn_benchmarks.py --batch_size=32 --model=resnet50 --variable_update=parameter_server --flush_stdout=true --num_gpus=1 --local_parameter_device=cpu --device=cpu --data_format=NHWC --job_name=worker --task_index=${VK_TASK_INDEX} --ps_hosts=${PS_HOST} --worker_hosts=${WORKER_HOST}
              image: docker.m.daocloud.io/volcanosh/example-tf:0.0.1
              name: tensorflow
              ports:
                - containerPort: 2222
                  name: tfjob-port
              resources:
                requests:
                  cpu: "2000m"
                  memory: "2048Mi"
                limits:
                  cpu: "2000m"
                  memory: "4096Mi"
              workingDir: /opt/tf-benchmarks/scripts/tf_cnn_benchmarks
          restartPolicy: OnFailure
"""

MPI_JOB_YAML = r"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi-job
  labels:
    "volcano.sh/job-type": "MPI"
spec:
  minAvailable: 4
  schedulerName: volcano
  plugins:
    ssh: []
    svc: []
  policies:
    - event: PodEvicted
      action: RestartJob
  tasks:
    - replicas: 1
      name: mpimaster
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          containers:
            - command:
                - /bin/sh
                - -c
                - |
                  MPI_HOST=`cat /etc/volcano/mpiworker.host | tr "\n" ","`;
                  mkdir -p /var/run/sshd; /usr/sbin/sshd;
                  mpiexec --allow-run-as-root --host ${MPI_HOST} -np 3 mpi_hello_world;
              image: docker.m.daocloud.io/volcanosh/example-mpi:0.0.1
              name: mpimaster
              ports:
                - containerPort: 22
                  name: mpijob-port
              workingDir: /home
              resources:
                requests:
                  cpu: "500m"
                limits:
                  cpu: "500m"
          restartPolicy: OnFailure
          imagePullSecrets:
            - name: default-secret
    - replicas: 3
      name: mpiworker
      template:
        spec:
          containers:
            - command:
                - /bin/sh
                - -c
                - |
                  mkdir -p /var/run/sshd; /usr/sbin/sshd -D;
              image: docker.m.daocloud.io/volcanosh/example-mpi:0.0.1
              name: mpiworker
              ports:
                - containerPort: 22
                  name: mpijob-port
              workingDir: /home
              resources:
                requests:
                  cpu: "1000m"
                limits:
                  cpu: "1000m"
          restartPolicy: OnFailure
          imagePullSecrets:
            - name: default-secret
"""


# --- helpers ------------------------------------------------------------------------


def task(name: str = "worker", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
    }
    t.update(extra)
    return t


def make_job(name: str = "job1", tasks: list[dict[str, Any]] | None = None, **spec: Any) -> Job:
    doc = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"tasks": [task()] if tasks is None else tasks, **spec},
    }
    return Job.model_validate(doc)


def check(job: Job, queues: dict[str, Queue] | None = None) -> list[Problem]:
    """Default then validate, as the loader does."""
    default_job(job)
    return validate_job(job, queues)


def make_queue(name: str, parent: str = "", state: str = "", default: bool = True, **spec: Any) -> Queue:
    doc: dict[str, Any] = {"metadata": {"name": name}, "spec": dict(spec)}
    if parent:
        doc["spec"]["parent"] = parent
    q = Queue.model_validate(doc)
    q.status.state = state
    if default:
        default_queue(q)
    return q


def queue_map(*queues: Queue) -> dict[str, Queue]:
    base = [make_queue("root"), make_queue("default")]
    return {q.name: q for q in base + list(queues)}


def assert_problem(problems: list[Problem], path: str, *fragments: str) -> Problem:
    for p in problems:
        if p.path == path and all(f in p.message for f in fragments):
            return p
    raise AssertionError(f"no problem at {path!r} containing {fragments!r}; got {problems!r}")


def assert_no_problem_at(problems: list[Problem], path: str) -> None:
    assert not [p for p in problems if p.path == path], problems


# --- parse_duration -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10),
        ("5m", 300),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("300ms", 0.3),
        ("2us", 2e-6),
        ("2\u00b5s", 2e-6),
        ("2\u03bcs", 2e-6),
        ("100ns", 1e-7),
        ("1h2m3.5s", 3723.5),
        (".5s", 0.5),
        ("1.s", 1),
        ("30", 30),
        ("0.25", 0.25),
        ("0", 0),
        ("-1m", -60),
        ("+2s", 2),
        ("1m1m", 120),
    ],
)
def test_parse_duration_valid(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "s", "abc", "1x", "1d", "1h 30m", " 5s", "--1s", "1.5.5s", "h1", "-", "5S", "1e3s"]
)
def test_parse_duration_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


# --- Job defaults ---------------------------------------------------------------------


def test_default_job_queue() -> None:
    job = make_job()
    default_job(job)
    assert job.spec.queue == "default"
    job = make_job(queue="research")
    default_job(job)
    assert job.spec.queue == "research"


def test_default_job_scheduler_name() -> None:
    job = make_job()
    default_job(job)
    assert job.spec.scheduler_name == "volcano"
    job = make_job()
    default_job(job, scheduler_name="vc2")
    assert job.spec.scheduler_name == "vc2"
    job = make_job(schedulerName="mine")
    default_job(job)
    assert job.spec.scheduler_name == "mine"


def test_default_job_max_retry() -> None:
    job = make_job()
    default_job(job)
    assert job.spec.max_retry == 3
    job = make_job(maxRetry=5)
    default_job(job)
    assert job.spec.max_retry == 5


def test_default_task_name_uses_index() -> None:
    job = make_job(tasks=[task("ps", 1), task("", 2), task("", 1)])
    default_job(job)
    assert [t.name for t in job.spec.tasks] == ["ps", "default1", "default2"]


def test_default_task_min_available_and_max_retry() -> None:
    job = make_job(tasks=[task("a", 3), task("b", 4, minAvailable=1, maxRetry=7)])
    default_job(job)
    a, b = job.spec.tasks
    assert (a.min_available, a.max_retry) == (3, 3)
    assert (b.min_available, b.max_retry) == (1, 7)


def test_default_task_min_available_from_partition_policy() -> None:
    pp = {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2}
    job = make_job(tasks=[task("w", 6, partitionPolicy=pp)])
    default_job(job)
    assert job.spec.tasks[0].min_available == 4


def test_default_job_min_available_is_sum_of_task_min_available() -> None:
    job = make_job(tasks=[task("a", 3, minAvailable=2), task("b", 1)])
    default_job(job)
    assert job.spec.min_available == 3
    job = make_job(tasks=[task("a", 3), task("b", 1)], minAvailable=2)
    default_job(job)
    assert job.spec.min_available == 2


@pytest.mark.parametrize("framework", ["tensorflow", "mpi", "pytorch", "ray"])
def test_default_plugins_add_svc(framework: str) -> None:
    job = make_job(tasks=[task("master", 1), task("worker", 2)], plugins={framework: []})
    default_job(job)
    assert job.spec.plugins["svc"] == []
    assert ("ssh" in job.spec.plugins) == (framework == "mpi")


def test_default_plugins_keep_existing_args() -> None:
    job = make_job(plugins={"mpi": ["--port=23"], "svc": ["--publish-not-ready-addresses=false"], "ssh": ["-x"]})
    default_job(job)
    assert job.spec.plugins == {
        "mpi": ["--port=23"],
        "svc": ["--publish-not-ready-addresses=false"],
        "ssh": ["-x"],
    }


def test_default_plugins_untouched_without_frameworks() -> None:
    job = make_job(plugins={"env": []})
    default_job(job)
    assert job.spec.plugins == {"env": []}
    job = make_job()
    default_job(job)
    assert job.spec.plugins == {}


def test_default_template_scheduler_name() -> None:
    own = task("b", 1)
    own["template"]["spec"]["schedulerName"] = "other"
    job = make_job(tasks=[task("a", 1), own], schedulerName="vc")
    default_job(job)
    assert job.spec.tasks[0].template.spec.scheduler_name == "vc"
    assert job.spec.tasks[1].template.spec.scheduler_name == "other"


def test_default_template_priority_class_name() -> None:
    own = task("b", 1)
    own["template"]["spec"]["priorityClassName"] = "low"
    job = make_job(tasks=[task("a", 1), own], priorityClassName="high")
    default_job(job)
    assert job.spec.tasks[0].template.spec.priority_class_name == "high"
    assert job.spec.tasks[1].template.spec.priority_class_name == "low"
    job = make_job()
    default_job(job)
    assert job.spec.tasks[0].template.spec.priority_class_name is None


def test_default_job_is_idempotent() -> None:
    job = make_job(tasks=[task("", 2), task("x", 3)], plugins={"mpi": []})
    default_job(job)
    once = job.model_dump()
    default_job(job)
    assert job.model_dump() == once


# --- Job validation: the happy path ------------------------------------------------------


def test_simple_job_is_valid() -> None:
    assert check(make_job(), queue_map()) == []


def test_job_without_defaults_reports_missing_task_name() -> None:
    job = make_job(tasks=[task("", 1)])
    assert_problem(validate_job(job, None), "spec.tasks[0].name", "no name")


# --- Job validation: tasks -------------------------------------------------------------


def test_no_tasks() -> None:
    assert_problem(check(make_job(tasks=[])), "spec.tasks", "no tasks")


def test_duplicated_task_names() -> None:
    problems = check(make_job(tasks=[task("w", 1), task("w", 2)]))
    assert_problem(problems, "spec.tasks[1].name", "'w'", "already used by spec.tasks[0]")


@pytest.mark.parametrize("name", ["Worker", "work_er", "-w", "w-", "a.b", "x" * 64])
def test_task_name_not_dns_label(name: str) -> None:
    problems = check(make_job(tasks=[task(name, 1)]))
    assert_problem(problems, "spec.tasks[0].name", repr(name), "DNS-1123 label")


def test_task_replicas_negative() -> None:
    problems = check(make_job(tasks=[task("w", -1, minAvailable=0)]))
    assert_problem(problems, "spec.tasks[0].replicas", "-1", "negative")


def test_task_min_available_greater_than_replicas() -> None:
    problems = check(make_job(tasks=[task("w", 2, minAvailable=3)], minAvailable=1))
    assert_problem(problems, "spec.tasks[0].minAvailable", "(3)", "replicas (2)")


def test_task_min_available_negative() -> None:
    problems = check(make_job(tasks=[task("w", 2, minAvailable=-1)], minAvailable=1))
    assert_problem(problems, "spec.tasks[0].minAvailable", "-1", "negative")


def test_task_max_retry_below_minus_one() -> None:
    problems = check(make_job(tasks=[task("w", 1, maxRetry=-2)]))
    assert_problem(problems, "spec.tasks[0].maxRetry", "-2")
    assert check(make_job(tasks=[task("w", 1, maxRetry=-1)])) == []


def test_task_topology_policy_unknown() -> None:
    problems = check(make_job(tasks=[task("w", 1, topologyPolicy="tight")]))
    assert_problem(problems, "spec.tasks[0].topologyPolicy", "'tight'", "single-numa-node")
    assert check(make_job(tasks=[task("w", 1, topologyPolicy="best-effort")])) == []


# --- Job validation: job-level numbers ------------------------------------------------------


def test_job_min_available_negative() -> None:
    assert_problem(check(make_job(minAvailable=-1)), "spec.minAvailable", "-1", "negative")


def test_job_min_available_greater_than_total_replicas() -> None:
    problems = check(make_job(tasks=[task("a", 1), task("b", 2)], minAvailable=4))
    assert_problem(problems, "spec.minAvailable", "(4)", "total replicas", "(3)")


def test_job_max_retry_negative() -> None:
    assert_problem(check(make_job(maxRetry=-1)), "spec.maxRetry", "-1")


def test_job_ttl_negative() -> None:
    assert_problem(check(make_job(ttlSecondsAfterFinished=-5)), "spec.ttlSecondsAfterFinished", "-5")
    assert check(make_job(ttlSecondsAfterFinished=0)) == []


def test_job_min_success_below_one() -> None:
    assert_problem(check(make_job(minSuccess=0)), "spec.minSuccess", "at least 1")
    assert check(make_job(minSuccess=1)) == []


def test_job_running_estimate_not_a_duration() -> None:
    assert_problem(check(make_job(runningEstimate="two hours")), "spec.runningEstimate", "'two hours'")
    assert check(make_job(runningEstimate="2h")) == []


# --- Job validation: names -----------------------------------------------------------------


def test_job_name_not_dns_subdomain() -> None:
    problems = check(make_job(name="My_Job"))
    assert_problem(problems, "metadata.name", "'My_Job'", "DNS-1123 subdomain")


def test_pod_name_too_long() -> None:
    job_name = "j" * 60
    problems = check(make_job(name=job_name, tasks=[task("worker", 10)]))
    p = assert_problem(problems, "spec.tasks[0].name", "63", "shorten")
    assert f"{job_name}-worker-9" in p.message


def test_pod_name_length_uses_last_index() -> None:
    # job-task-9 fits exactly; job-task-10 does not.
    job_name = "j" * (63 - len("-w-9"))
    assert check(make_job(name=job_name, tasks=[task("w", 10)])) == []
    problems = check(make_job(name=job_name, tasks=[task("w", 11)]))
    assert_problem(problems, "spec.tasks[0].name", "-w-10")


def test_pod_name_not_dns_label_when_job_name_has_dots() -> None:
    problems = check(make_job(name="my.job"))
    assert_problem(problems, "metadata.name", "'my.job-worker-1'", "DNS-1123 label")


# --- Job validation: lifecycle policies -------------------------------------------------------


def test_policy_with_event_and_exit_code() -> None:
    problems = check(make_job(policies=[{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0]", "both", "exitCode 3")


def test_policy_with_events_list_and_exit_code_in_task() -> None:
    problems = check(
        make_job(tasks=[task("w", 1, policies=[{"events": ["PodFailed"], "exitCode": 3, "action": "RestartJob"}])])
    )
    assert_problem(problems, "spec.tasks[0].policies[0]", "both")


def test_policy_with_neither_event_nor_exit_code() -> None:
    problems = check(make_job(policies=[{"action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0]", "nothing to react to", "PodEvicted")


def test_unknown_event_lists_valid_events() -> None:
    problems = check(make_job(policies=[{"event": "PodExploded", "action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0].event", "'PodExploded'", "PodFailed", "TaskCompleted")


def test_unknown_event_in_events_list_points_at_entry() -> None:
    problems = check(make_job(policies=[{"events": ["PodFailed", "OutOfSync"], "action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0].events[1]", "'OutOfSync'")


def test_unknown_action_lists_valid_actions() -> None:
    problems = check(make_job(policies=[{"event": "PodFailed", "action": "SyncJob"}]))
    assert_problem(problems, "spec.policies[0].action", "'SyncJob'", "RestartJob", "CompleteJob")


def test_missing_action() -> None:
    problems = check(make_job(policies=[{"event": "PodFailed"}]))
    assert_problem(problems, "spec.policies[0].action", "no action", "AbortJob")


def test_same_event_in_two_policies() -> None:
    pols = [
        {"event": "PodFailed", "action": "RestartJob"},
        {"events": ["PodEvicted", "PodFailed"], "action": "AbortJob"},
    ]
    problems = check(make_job(policies=pols))
    assert_problem(problems, "spec.policies[1].events[1]", "'PodFailed'", "spec.policies[0]")


def test_same_event_twice_in_one_policy() -> None:
    problems = check(make_job(policies=[{"events": ["PodFailed", "PodFailed"], "action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0].events[1]", "twice")


def test_same_event_at_job_and_task_level_is_fine() -> None:
    pol = [{"event": "PodFailed", "action": "RestartJob"}]
    assert check(make_job(tasks=[task("w", 1, policies=pol)], policies=pol)) == []


def test_exit_code_zero() -> None:
    problems = check(make_job(policies=[{"exitCode": 0, "action": "RestartJob"}]))
    assert_problem(problems, "spec.policies[0].exitCode", "exitCode 0", "non-zero")


def test_duplicated_exit_code() -> None:
    pols = [{"exitCode": 137, "action": "RestartJob"}, {"exitCode": 137, "action": "AbortJob"}]
    problems = check(make_job(policies=pols))
    assert_problem(problems, "spec.policies[1].exitCode", "137", "spec.policies[0]")


def test_star_with_other_policies() -> None:
    pols = [{"event": "*", "action": "RestartJob"}, {"exitCode": 2, "action": "AbortJob"}]
    assert_problem(check(make_job(policies=pols)), "spec.policies", "'*'", "only")
    pols = [{"events": ["*", "PodFailed"], "action": "RestartJob"}]
    assert_problem(check(make_job(policies=pols)), "spec.policies", "'*'")


def test_star_alone_is_fine() -> None:
    assert check(make_job(policies=[{"event": "*", "action": "RestartJob"}])) == []


def test_policy_timeout_not_a_duration() -> None:
    problems = check(make_job(policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "ten minutes"}]))
    assert_problem(problems, "spec.policies[0].timeout", "'ten minutes'", "duration")


def test_policy_timeout_negative() -> None:
    problems = check(make_job(policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": "-5s"}]))
    assert_problem(problems, "spec.policies[0].timeout", "negative")


@pytest.mark.parametrize("timeout", ["10s", "5m", "1h30m", "1.5h", "500ms"])
def test_policy_timeout_valid(timeout: str) -> None:
    assert check(make_job(policies=[{"event": "PodFailed", "action": "RestartJob", "timeout": timeout}])) == []


def test_exit_code_policy_is_valid() -> None:
    assert check(make_job(policies=[{"exitCode": 1, "action": "RestartTask"}])) == []


# --- Job validation: plugins ---------------------------------------------------------------


def test_unknown_plugin_lists_valid_plugins() -> None:
    problems = check(make_job(plugins={"horovod": []}))
    assert_problem(problems, "spec.plugins[horovod]", "'horovod'", "tensorflow", "hcclrank")


def test_mpi_plugin_needs_master_task() -> None:
    problems = check(make_job(tasks=[task("launcher", 1), task("worker", 2)], plugins={"mpi": []}))
    assert_problem(problems, "spec.plugins[mpi]", "'master'", "'launcher'", "--master")


def test_mpi_plugin_with_default_master() -> None:
    assert check(make_job(tasks=[task("master", 1), task("worker", 2)], plugins={"mpi": []})) == []


def test_mpi_plugin_with_named_master() -> None:
    tasks = [task("mpimaster", 1), task("mpiworker", 2)]
    assert check(make_job(tasks=tasks, plugins={"mpi": ["--master=mpimaster", "--worker=mpiworker"]})) == []
    problems = check(make_job(tasks=tasks, plugins={"mpi": ["--master=head"]}))
    assert_problem(problems, "spec.plugins[mpi]", "'head'")


# --- Job validation: volumes --------------------------------------------------------------


def test_volume_without_mount_path() -> None:
    problems = check(make_job(volumes=[{"volumeClaimName": "data"}]))
    assert_problem(problems, "spec.volumes[0].mountPath", "mountPath")


def test_volume_duplicated_mount_path() -> None:
    vols = [{"mountPath": "/data", "volumeClaimName": "a"}, {"mountPath": "/data", "volumeClaimName": "b"}]
    problems = check(make_job(volumes=vols))
    assert_problem(problems, "spec.volumes[1].mountPath", "'/data'", "spec.volumes[0]")


def test_volume_with_neither_claim() -> None:
    problems = check(make_job(volumes=[{"mountPath": "/data"}]))
    assert_problem(problems, "spec.volumes[0]", "either volumeClaimName", "volumeClaim")


def test_volume_with_both_claims() -> None:
    vol = {"mountPath": "/data", "volumeClaimName": "data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}
    problems = check(make_job(volumes=[vol]))
    assert_problem(problems, "spec.volumes[0]", "both", "'data'")


def test_volume_claim_name_invalid() -> None:
    problems = check(make_job(volumes=[{"mountPath": "/data", "volumeClaimName": "Bad_Name"}]))
    assert_problem(problems, "spec.volumes[0].volumeClaimName", "'Bad_Name'")


def test_valid_volumes() -> None:
    vols = [
        {"mountPath": "/data", "volumeClaimName": "data"},
        {"mountPath": "/scratch", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
    ]
    assert check(make_job(volumes=vols)) == []


# --- Job validation: queues ------------------------------------------------------------------


def test_queue_missing() -> None:
    problems = check(make_job(queue="gpu"), queue_map())
    assert_problem(problems, "spec.queue", "'gpu'", "does not exist", "'default'")


def test_queue_not_open() -> None:
    problems = check(make_job(queue="q1"), queue_map(make_queue("q1", state="Closed")))
    assert_problem(problems, "spec.queue", "'q1'", "Closed", "Open")


def test_queue_state_unset_or_open_is_fine() -> None:
    q = make_queue("q1", default=False)
    assert q.status.state == ""
    assert check(make_job(queue="q1"), queue_map(q)) == []
    assert check(make_job(queue="q2"), queue_map(make_queue("q2", state="Open"))) == []


def test_queue_root() -> None:
    problems = check(make_job(queue="root"), queue_map())
    assert_problem(problems, "spec.queue", "root queue")


def test_queue_not_leaf() -> None:
    queues = queue_map(make_queue("eng"), make_queue("eng-ml", parent="eng"))
    problems = check(make_job(queue="eng"), queues)
    assert_problem(problems, "spec.queue", "'eng'", "'eng-ml'", "leaf")
    assert check(make_job(queue="eng-ml"), queues) == []


def test_queue_checks_skipped_without_queues() -> None:
    assert check(make_job(queue="nowhere"), None) == []


# --- Job validation: dependsOn ----------------------------------------------------------------


def test_depends_on_unknown_task() -> None:
    problems = check(make_job(tasks=[task("a", 1, dependsOn={"name": ["ghost"]})]))
    assert_problem(problems, "spec.tasks[0].dependsOn.name[0]", "'ghost'", "'a'")


def test_depends_on_self() -> None:
    problems = check(make_job(tasks=[task("a", 1, dependsOn={"name": ["a"]})]))
    assert_problem(problems, "spec.tasks[0].dependsOn.name[0]", "itself")


def test_depends_on_cycle() -> None:
    tasks = [
        task("a", 1, dependsOn={"name": ["c"]}),
        task("b", 1, dependsOn={"name": ["a"]}),
        task("c", 1, dependsOn={"name": ["b"]}),
    ]
    problems = check(make_job(tasks=tasks))
    p = assert_problem(problems, "spec.tasks[0].dependsOn", "cycle", "acyclic")
    assert "a -> c -> b -> a" in p.message
    assert len([x for x in problems if "cycle" in x.message]) == 1


def test_depends_on_dag_is_fine() -> None:
    tasks = [
        task("a", 1),
        task("b", 1, dependsOn={"name": ["a"]}),
        task("c", 1, dependsOn={"name": ["a", "b"], "iteration": "any"}),
    ]
    assert check(make_job(tasks=tasks)) == []


def test_depends_on_unknown_iteration() -> None:
    tasks = [task("a", 1), task("b", 1, dependsOn={"name": ["a"], "iteration": "some"})]
    assert_problem(check(make_job(tasks=tasks)), "spec.tasks[1].dependsOn.iteration", "'some'", "any, all")


# --- Job validation: partitionPolicy -----------------------------------------------------------


def test_partition_replicas_mismatch() -> None:
    pp = {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 3}
    problems = check(make_job(tasks=[task("w", 5, partitionPolicy=pp)]))
    assert_problem(problems, "spec.tasks[0].replicas", "replicas is 5", "set replicas to 6")


def test_partition_min_available_mismatch() -> None:
    pp = {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2}
    problems = check(make_job(tasks=[task("w", 6, minAvailable=5, partitionPolicy=pp)]))
    assert_problem(problems, "spec.tasks[0].minAvailable", "minAvailable is 5", "set minAvailable to 4")


def test_partition_valid() -> None:
    pp = {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2}
    assert check(make_job(tasks=[task("w", 6, partitionPolicy=pp)])) == []
    assert check(make_job(tasks=[task("w", 6, minAvailable=4, partitionPolicy=pp)])) == []


def test_partition_bad_numbers() -> None:
    pp = {"totalPartitions": 0, "partitionSize": 2}
    assert_problem(
        check(make_job(tasks=[task("w", 0, partitionPolicy=pp)])),
        "spec.tasks[0].partitionPolicy.totalPartitions",
        "at least 1",
    )
    pp = {"totalPartitions": 2, "partitionSize": 0}
    assert_problem(
        check(make_job(tasks=[task("w", 0, partitionPolicy=pp)])),
        "spec.tasks[0].partitionPolicy.partitionSize",
        "at least 1",
    )
    pp = {"totalPartitions": 2, "partitionSize": 1, "minPartitions": 3}
    problems = check(make_job(tasks=[task("w", 2, minAvailable=2, partitionPolicy=pp)]))
    assert_problem(problems, "spec.tasks[0].partitionPolicy.minPartitions", "(3)", "(2)")


# --- Job validation: seed jobs ----------------------------------------------------------------


@pytest.mark.parametrize("text", [TF_JOB_YAML, MPI_JOB_YAML], ids=["tensorflow", "mpi"])
def test_seed_job_is_valid(text: str) -> None:
    job = Job.model_validate(yaml.safe_load(text))
    default_job(job)
    assert validate_job(job, None) == []
    assert validate_job(job, queue_map()) == []


def test_seed_tensorflow_defaults_add_nothing_unexpected() -> None:
    job = Job.model_validate(yaml.safe_load(TF_JOB_YAML))
    before = job.model_dump()
    default_job(job)
    spec = job.spec
    assert spec.plugins == {"env": [], "svc": []}
    assert spec.min_available == 3
    assert spec.scheduler_name == "volcano"
    assert spec.queue == "default"
    assert spec.max_retry == 3
    assert [(t.name, t.replicas, t.min_available, t.max_retry) for t in spec.tasks] == [
        ("ps", 1, 1, 3),
        ("worker", 2, 2, 3),
    ]
    assert all(t.template.spec.scheduler_name == "volcano" for t in spec.tasks)
    assert all(t.template.spec.priority_class_name is None for t in spec.tasks)
    assert [len(t.policies) for t in spec.tasks] == [0, 1]
    assert len(spec.policies) == 1
    assert spec.volumes == []
    _assert_only_expected_changes(before, job.model_dump())


def test_seed_mpi_defaults_add_nothing_unexpected() -> None:
    job = Job.model_validate(yaml.safe_load(MPI_JOB_YAML))
    before = job.model_dump()
    default_job(job)
    spec = job.spec
    assert spec.plugins == {"ssh": [], "svc": []}
    assert spec.min_available == 4
    assert [(t.name, t.min_available) for t in spec.tasks] == [("mpimaster", 1), ("mpiworker", 3)]
    assert all(t.depends_on is None for t in spec.tasks)
    _assert_only_expected_changes(before, job.model_dump())


def _assert_only_expected_changes(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Undo the documented defaults on ``after``; what remains must equal ``before``."""
    after = copy.deepcopy(after)
    spec_b, spec_a = before["spec"], after["spec"]
    for key in ("queue", "scheduler_name", "max_retry", "min_available"):
        if spec_b[key] != spec_a[key]:
            spec_a[key] = spec_b[key]
    for tb, ta in zip(spec_b["tasks"], spec_a["tasks"]):
        for key in ("min_available", "max_retry", "name"):
            ta[key] = tb[key]
        for key in ("scheduler_name", "priority_class_name"):
            ta["template"]["spec"][key] = tb["template"]["spec"][key]
    assert after == before


# --- Job update ------------------------------------------------------------------------------------


def _pair(**spec: Any) -> tuple[Job, Job]:
    old = make_job(tasks=[task("ps", 1), task("worker", 4)], **spec)
    default_job(old)
    return old, old.model_copy(deep=True)


def test_update_unchanged_is_fine() -> None:
    old, new = _pair()
    assert validate_job_update(old, new) == []


def test_update_allowed_fields() -> None:
    old, new = _pair()
    new.spec.min_available = 3
    new.spec.priority_class_name = "high"
    new.spec.tasks[1].replicas = 6
    new.spec.tasks[1].min_available = 2
    assert validate_job_update(old, new) == []


def test_update_replicas_negative() -> None:
    old, new = _pair()
    new.spec.tasks[0].replicas = -1
    new.spec.tasks[0].min_available = 0
    new.spec.min_available = 1
    assert_problem(validate_job_update(old, new), "spec.tasks[0].replicas", "-1")


def test_update_task_min_available_out_of_range() -> None:
    old, new = _pair()
    new.spec.tasks[1].min_available = 5
    assert_problem(validate_job_update(old, new), "spec.tasks[1].minAvailable", "(5)", "replicas (4)")
    new.spec.tasks[1].min_available = -1
    assert_problem(validate_job_update(old, new), "spec.tasks[1].minAvailable", "negative")


def test_update_job_min_available_out_of_range() -> None:
    old, new = _pair()
    new.spec.min_available = 6
    assert_problem(validate_job_update(old, new), "spec.minAvailable", "(6)", "(5)")
    new.spec.min_available = -1
    assert_problem(validate_job_update(old, new), "spec.minAvailable", "negative")


def test_update_tasks_added_or_removed() -> None:
    old, new = _pair()
    new.spec.tasks.pop()
    new.spec.min_available = 1
    assert_problem(validate_job_update(old, new), "spec.tasks", "added or removed", "had 2", "has 1")


def test_update_task_renamed() -> None:
    old, new = _pair()
    new.spec.tasks[1].name = "workers"
    assert_problem(validate_job_update(old, new), "spec.tasks[1].name", "'worker'", "'workers'")


def test_update_other_job_field() -> None:
    old, new = _pair()
    new.spec.queue = "other"
    new.spec.max_retry = 9
    problems = validate_job_update(old, new)
    assert_problem(problems, "spec.queue", "cannot be changed", "minAvailable")
    assert_problem(problems, "spec.maxRetry", "cannot be changed")


def test_update_other_task_field() -> None:
    old, new = _pair()
    new.spec.tasks[0].template.spec.containers[0].image = "nginx"
    assert_problem(validate_job_update(old, new), "spec.tasks[0].template", "'ps'", "cannot be changed")


def test_update_ignores_controller_filled_claim_name() -> None:
    old, new = _pair(volumes=[{"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}])
    new.spec.volumes[0].volume_claim_name = "job1-volume-abcde"
    assert validate_job_update(old, new) == []


# --- PodGroup ------------------------------------------------------------------------------------


def make_pg(queue: str = "", **spec: Any) -> PodGroup:
    return PodGroup.model_validate({"metadata": {"name": "pg1", "namespace": "ns"}, "spec": {"queue": queue, **spec}})


def test_default_podgroup_queue() -> None:
    pg = make_pg()
    default_podgroup(pg)
    assert pg.spec.queue == "default"
    pg = make_pg("gpu")
    default_podgroup(pg)
    assert pg.spec.queue == "gpu"


def test_default_podgroup_namespace_queue() -> None:
    pg = make_pg()
    default_podgroup(pg, namespace_queue="team-a")
    assert pg.spec.queue == "team-a"
    pg = make_pg("default")
    default_podgroup(pg, namespace_queue="team-a")
    assert pg.spec.queue == "team-a"
    pg = make_pg("gpu")
    default_podgroup(pg, namespace_queue="team-a")
    assert pg.spec.queue == "gpu"


def test_podgroup_valid() -> None:
    pg = make_pg(minMember=2, minTaskMember={"w": 2})
    default_podgroup(pg)
    assert validate_podgroup(pg, queue_map()) == []
    assert validate_podgroup(make_pg("nowhere"), None) == []


def test_podgroup_queue_missing() -> None:
    assert_problem(validate_podgroup(make_pg("gpu"), queue_map()), "spec.queue", "'gpu'", "does not exist")


def test_podgroup_queue_not_open() -> None:
    queues = queue_map(make_queue("q1", state="Closed"))
    assert_problem(validate_podgroup(make_pg("q1"), queues), "spec.queue", "'q1'", "Closed")


def test_podgroup_min_member_negative() -> None:
    assert_problem(validate_podgroup(make_pg("default", minMember=-1), None), "spec.minMember", "-1")


def test_podgroup_min_task_member_negative() -> None:
    pg = make_pg("default", minTaskMember={"w": 1, "ps": -2})
    assert_problem(validate_podgroup(pg, None), "spec.minTaskMember[ps]", "'ps'", "-2")


# --- Queue ---------------------------------------------------------------------------------------


def test_default_queue_fields() -> None:
    q = make_queue("q1", default=False)
    default_queue(q)
    assert (q.spec.reclaimable, q.spec.weight, q.spec.parent, q.status.state) == (True, 1, "root", "Open")


def test_default_queue_keeps_explicit_values() -> None:
    q = make_queue("q1", parent="eng", state="Closed", default=False, reclaimable=False, weight=7)
    default_queue(q)
    assert (q.spec.reclaimable, q.spec.weight, q.spec.parent, q.status.state) == (False, 7, "eng", "Closed")


def test_default_root_queue_has_no_parent() -> None:
    q = make_queue("root")
    assert q.spec.parent == ""


def test_queue_valid() -> None:
    q = make_queue("q1", guarantee={"resource": {"cpu": "1"}}, deserved={"cpu": "2"}, capability={"cpu": "4"})
    assert validate_queue(q, queue_map()) == []
    assert validate_queue(make_queue("root"), queue_map()) == []


@pytest.mark.parametrize("weight", [0, -1, 65536])
def test_queue_weight_out_of_range(weight: int) -> None:
    q = make_queue("q1", default=False, weight=weight)
    assert_problem(validate_queue(q, queue_map()), "spec.weight", str(weight), "65535")


def test_queue_weight_max_is_fine() -> None:
    assert validate_queue(make_queue("q1", weight=65535), queue_map()) == []


def test_queue_state_unknown() -> None:
    q = make_queue("q1", state="Closing")
    assert_problem(validate_queue(q, queue_map()), "status.state", "'Closing'", "Open, Closed")


def test_queue_guarantee_above_deserved() -> None:
    q = make_queue("q1", guarantee={"resource": {"cpu": "3"}}, deserved={"cpu": "2"})
    assert_problem(validate_queue(q, queue_map()), "spec.guarantee.resource[cpu]", "guarantee cpu (3)", "deserved (2)")


def test_queue_deserved_above_capability() -> None:
    q = make_queue("q1", deserved={"memory": "8Gi"}, capability={"memory": "4Gi"})
    assert_problem(validate_queue(q, queue_map()), "spec.deserved[memory]", "8Gi", "4Gi")


def test_queue_guarantee_above_capability_without_deserved() -> None:
    q = make_queue("q1", guarantee={"resource": {"cpu": "3"}}, capability={"cpu": "2"})
    assert_problem(validate_queue(q, queue_map()), "spec.guarantee.resource[cpu]", "capability (2)")


def test_queue_order_only_for_shared_resources() -> None:
    q = make_queue(
        "q1", guarantee={"resource": {"memory": "1Gi"}}, deserved={"cpu": "8"}, capability={"nvidia.com/gpu": "1"}
    )
    assert validate_queue(q, queue_map()) == []


def test_queue_own_parent() -> None:
    q = make_queue("q1", parent="q1")
    assert_problem(validate_queue(q, queue_map()), "spec.parent", "'q1'", "own parent")


def test_queue_parent_not_found() -> None:
    q = make_queue("q1", parent="eng")
    assert_problem(validate_queue(q, queue_map()), "spec.parent", "'eng'", "does not exist")
    # root need not be present in the map.
    assert validate_queue(make_queue("q2"), {}) == []


def test_queue_parent_loop() -> None:
    a = make_queue("a", parent="b")
    b = make_queue("b", parent="a")
    assert_problem(validate_queue(a, queue_map(b)), "spec.parent", "loop")


def test_queue_children_guarantee_exceeds_parent() -> None:
    eng = make_queue("eng", guarantee={"resource": {"cpu": "4"}})
    sib = make_queue("eng-a", parent="eng", guarantee={"resource": {"cpu": "3"}})
    q = make_queue("eng-b", parent="eng", guarantee={"resource": {"cpu": "2"}})
    assert_problem(validate_queue(q, queue_map(eng, sib)), "spec.guarantee.resource[cpu]", "'eng'", "5", "4")
    ok = make_queue("eng-b", parent="eng", guarantee={"resource": {"cpu": "1"}})
    assert validate_queue(ok, queue_map(eng, sib)) == []


def test_queue_children_deserved_exceeds_parent() -> None:
    eng = make_queue("eng", deserved={"memory": "8Gi"})
    sib = make_queue("eng-a", parent="eng", deserved={"memory": "6Gi"})
    q = make_queue("eng-b", parent="eng", deserved={"memory": "4Gi"})
    assert_problem(validate_queue(q, queue_map(eng, sib)), "spec.deserved[memory]", "10Gi", "8Gi")


def test_queue_update_replaces_itself_in_sums() -> None:
    eng = make_queue("eng", deserved={"cpu": "4"})
    old = make_queue("eng-a", parent="eng", deserved={"cpu": "3"})
    new = make_queue("eng-a", parent="eng", deserved={"cpu": "4"})
    assert validate_queue(new, queue_map(eng, old)) == []


def test_queue_capability_above_parent() -> None:
    eng = make_queue("eng", capability={"cpu": "10"})
    q = make_queue("eng-a", parent="eng", capability={"cpu": "12", "memory": "1Ti"})
    problems = validate_queue(q, queue_map(eng))
    assert_problem(problems, "spec.capability[cpu]", "12", "'eng'", "10")
    assert_no_problem_at(problems, "spec.capability[memory]")


def test_queue_parent_checks_only_resources_parent_sets() -> None:
    eng = make_queue("eng", guarantee={"resource": {"cpu": "1"}})
    q = make_queue("eng-a", parent="eng", guarantee={"resource": {"memory": "100Gi"}}, deserved={"memory": "100Gi"})
    assert validate_queue(q, queue_map(eng)) == []


def test_queue_as_parent_must_cover_children() -> None:
    a = make_queue("eng-a", parent="eng", guarantee={"resource": {"cpu": "3"}}, capability={"cpu": "8"})
    b = make_queue("eng-b", parent="eng", deserved={"cpu": "5"})
    eng = make_queue("eng", guarantee={"resource": {"cpu": "2"}}, deserved={"cpu": "4"}, capability={"cpu": "6"})
    problems = validate_queue(eng, queue_map(a, b))
    assert_problem(problems, "spec.guarantee.resource[cpu]", "'eng-a'", "3")
    assert_problem(problems, "spec.deserved[cpu]", "'eng-b'", "5")
    assert_problem(problems, "spec.capability[cpu]", "'eng-a'")


# --- Queue delete --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "root"])
def test_queue_delete_builtin(name: str) -> None:
    assert_problem(validate_queue_delete(name, queue_map(), []), "", f"'{name}'", "cannot be deleted")


def test_queue_delete_with_children() -> None:
    queues = queue_map(make_queue("eng"), make_queue("eng-a", parent="eng"))
    assert_problem(validate_queue_delete("eng", queues, []), "", "'eng-a'", "child queues")


def test_queue_delete_with_podgroups() -> None:
    queues = queue_map(make_queue("gpu"))
    pgs = [make_pg("gpu"), make_pg("default")]
    assert_problem(validate_queue_delete("gpu", queues, pgs), "", "1 PodGroup", "ns/pg1")


def test_queue_delete_ok_and_missing() -> None:
    queues = queue_map(make_queue("gpu"))
    assert validate_queue_delete("gpu", queues, [make_pg("default")]) == []
    assert_problem(validate_queue_delete("nope", queues, []), "", "does not exist")


# --- Pod -----------------------------------------------------------------------------------------


def make_pod(annotations: dict[str, str], scheduler: str = "volcano") -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]},
        }
    )


MIN = "volcano.sh/jdb-min-available"
MAX = "volcano.sh/jdb-max-unavailable"


@pytest.mark.parametrize("key", [MIN, MAX])
@pytest.mark.parametrize("value", ["1", "3", "1%", "50%", "99%"])
def test_pod_jdb_valid(key: str, value: str) -> None:
    assert validate_pod(make_pod({key: value})) == []


@pytest.mark.parametrize("key", [MIN, MAX])
@pytest.mark.parametrize("value", ["0", "-1", "0%", "100%", "abc", "1.5", "%", " 2"])
def test_pod_jdb_invalid(key: str, value: str) -> None:
    assert_problem(validate_pod(make_pod({key: value})), f"metadata.annotations[{key}]", repr(value))


def test_pod_jdb_both() -> None:
    assert_problem(validate_pod(make_pod({MIN: "1", MAX: "1"})), "metadata.annotations", "not both")


def test_pod_without_jdb_annotations() -> None:
    assert validate_pod(make_pod({})) == []


def test_pod_of_other_scheduler_not_checked() -> None:
    pod = make_pod({MIN: "0"}, scheduler="default-scheduler")
    assert validate_pod(pod, scheduler_names=["volcano"]) == []
    assert validate_pod(make_pod({MIN: "0"}), scheduler_names=["volcano"]) != []
