"""`lavaflow train get jobs`: worker counts, resizes and the last reported throughput (issue 32),
from what the API server holds: the Job, its pods, its PodGroup and the Events about it."""

from __future__ import annotations

import json

from lavaflow.cli.tables import format_train_jobs

NOW = 1_800_000_000.0
UID = "u-1"


def job(name: str = "big", uid: str = UID, fewest: int = 2, workers: int = 8, annotations: dict | None = None) -> dict:
    """A Volcano Job with ``workers`` GPU workers, ``fewest`` of them its minimum, Running."""
    worker = {"name": "w", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    meta = {"name": name, "namespace": "default", "uid": uid, "creationTimestamp": "2027-01-15T08:00:00Z"}
    tasks = [{"name": "worker", "replicas": workers, "template": {"spec": {"containers": [worker]}}}]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {**meta, "annotations": annotations or {}},
        "spec": {"schedulerName": "volcano", "minAvailable": fewest, "tasks": tasks},
        "status": {"state": {"phase": "Running"}},
    }


def pod(i: int, node: str, phase: str = "Running", deleting: bool = False, job_name: str = "big") -> dict:
    meta: dict = {"name": f"{job_name}-worker-{i}", "namespace": "default", "labels": {"volcano.sh/job-name": job_name}}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:10:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": phase, "startTime": "2027-01-15T08:01:00Z"},
    }


def podgroup(metrics: dict | None = None, uid: str = UID, name: str = "big") -> dict:
    ann = {"lavaflow.io/metrics": json.dumps(metrics)} if metrics is not None else {}
    return {
        "metadata": {
            "name": f"{name}-{uid}",
            "namespace": "default",
            "annotations": ann,
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": uid}],
        }
    }


def event(reason: str, count: int | None = None, pg: str = f"big-{UID}") -> dict:
    e = {
        "metadata": {"namespace": "default"},
        "involvedObject": {"kind": "PodGroup", "name": pg, "namespace": "default"},
        "reason": reason,
    }
    if count is not None:
        e["count"] = count
    return e


def table(text: str) -> list[dict[str, str]]:
    """Rows as {column: cell}, cut at the header's column starts (cells may hold spaces)."""
    lines = text.splitlines()
    header = lines[0]
    names = header.split()
    starts = [header.index(n) for n in names]
    out = []
    for ln in lines[1:]:
        cells = [ln[a:b].strip() for a, b in zip(starts, starts[1:] + [len(ln) + 1])]
        out.append(dict(zip(names, cells)))
    return out


# Measured on 4 replicas on 2 nodes (the placement below): 4 × 64 samples × (1 + 1 accumulation
# step) per 0.5 s step = 1024 samples/s; an older measurement on 2 replicas on 1 node.
PROFILE = {
    "profile": [["v100", 2, 4, 64, 1, 0.5, 0.1], ["v100", 1, 2, 64, 0, 0.25, 0.05]],
    "batchSize": 512,
}


def test_columns_workers_resizes_and_throughput_of_the_current_configuration():
    pods = [pod(0, "a"), pod(1, "a"), pod(2, "b"), pod(3, "b"), pod(4, "b", deleting=True), pod(5, "", "Pending")]
    events = [event("Resized"), event("Resized", count=2), event("Migrated"), event("Started")]
    out = format_train_jobs([job()], pods, now=NOW, podgroups=[podgroup(PROFILE)], events=events)
    header = out.splitlines()[0].split()
    assert header[:7] == "NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL".split()  # Voda's, as before
    assert header[7:] == ["RESIZES", "THROUGHPUT"]
    (row,) = table(out)
    # 4 running (the one being deleted and the pending one do not count), of 2..8
    assert row["WORKERS"] == "4 (2-8)"
    # Resized Events only (a migration or a start is no resize), each by its count
    assert row["RESIZES"] == "3"
    assert row["THROUGHPUT"] == "1024 samples/s"


def test_throughput_falls_back_to_the_newest_measurement_and_reads_rates():
    # 3 workers on one node: no measurement of that configuration; the newest row is shown
    pods = [pod(0, "a"), pod(1, "a"), pod(2, "a")]
    (row,) = table(format_train_jobs([job()], pods, now=NOW, podgroups=[podgroup(PROFILE)], events=[]))
    assert row["THROUGHPUT"] == "512 samples/s" and row["RESIZES"] == "0"
    # a job without a batch model reports rates (work units per second)
    rates = {"rates": [["v100", 1, 1, 0.5], ["v100", 1, 3, 1.25]]}
    (row,) = table(format_train_jobs([job()], pods, now=NOW, podgroups=[podgroup(rates)], events=[]))
    assert row["THROUGHPUT"] == "1.25 units/s"


def test_report_patched_on_the_job_is_read_when_the_podgroup_has_none():
    j = job(annotations={"lavaflow.io/metrics": json.dumps({"rates": [["v100", 1, 1, 2.0]]})})
    (row,) = table(format_train_jobs([j], [pod(0, "a")], now=NOW, podgroups=[], events=[]))
    assert row["THROUGHPUT"] == "2 units/s"


def test_no_report_unknown_events_and_jobs_that_are_not_elastic():
    rigid = job("rigid", uid="u-2", fewest=2, workers=2)
    jobs = [job(), rigid]
    pods = [pod(0, "a"), pod(0, "a", job_name="rigid"), pod(1, "a", job_name="rigid")]
    bad = podgroup(None)
    bad["metadata"]["annotations"] = {"lavaflow.io/metrics": "{not json"}
    rows = {r["NAME"]: r for r in table(format_train_jobs(jobs, pods, now=NOW, podgroups=[bad], events=None))}
    assert rows["big"]["THROUGHPUT"] == "-"  # a malformed report is no report
    assert rows["big"]["RESIZES"] == "?"  # the Events could not be read
    assert rows["rigid"]["WORKERS"] == "2" and rows["rigid"]["RESIZES"] == "-" and rows["rigid"]["THROUGHPUT"] == "-"
