"""Tests for the self-contained HTML simulation report."""

from __future__ import annotations

import re

import pytest

from lavaflow.report.simulation import write_report

STUCK_REASON = "gang unschedulable: 4/8 pods fit, minMember=8"


def _kube_default_result() -> dict:
    """Run with a stuck gang job and pods that never finished."""
    jobs = [
        {
            "namespace": "default",
            "name": "<b>x</b>",
            "queue": "default",
            "phase": "Completed",
            "submitTime": 0.0,
            "startTime": 1.0,
            "finishTime": 31.0,
        },
        {
            "namespace": "default",
            "name": "train-a",
            "queue": "q1",
            "phase": "Failed",
            "submitTime": 0.0,
            "startTime": 2.0,
            "finishTime": 12.5,
        },
        {
            "namespace": "ml",
            "name": "gang-b",
            "queue": "q1",
            "phase": "Pending",
            "submitTime": 5.0,
            "startTime": 10.0,
            "finishTime": None,
        },
    ]
    pods = [
        {
            "namespace": "default",
            "name": "<b>x</b>-0",
            "job": "<b>x</b>",
            "task": "w",
            "node": "node-10",
            "phase": "Succeeded",
            "createTime": 0.0,
            "startTime": 1.0,
            "finishTime": 31.0,
            "exitCode": 0,
        },
        {
            "namespace": "default",
            "name": "train-a-0",
            "job": "train-a",
            "task": "w",
            "node": "node-2",
            "phase": "Failed",
            "createTime": 0.0,
            "startTime": 2.0,
            "finishTime": 12.5,
            "exitCode": 1,
        },
        # started but never finished -> bar until endTime
        {
            "namespace": "ml",
            "name": "gang-b-0",
            "job": "gang-b",
            "task": "w",
            "node": "node-1",
            "phase": "Running",
            "createTime": 5.0,
            "startTime": 10.0,
            "finishTime": None,
            "exitCode": None,
        },
        # never placed -> not drawn
        {
            "namespace": "ml",
            "name": "gang-b-1",
            "job": "gang-b",
            "task": "w",
            "node": None,
            "phase": "Pending",
            "createTime": 5.0,
            "startTime": None,
            "finishTime": None,
            "exitCode": None,
        },
    ]
    timeline = [
        {
            "time": t,
            "allocated": {"cpu": a, "memory": 2.0 * a},
            "capacity": {"cpu": 8.0, "memory": 32.0, "nvidia.com/gpu": 0.0},
            "runningPods": r,
            "pendingPods": p,
        }
        for t, a, r, p in [(0.0, 0.0, 0, 3), (1.0, 2.0, 1, 2), (10.0, 6.0, 3, 1), (31.0, 2.0, 1, 1)]
    ]
    return {
        "scheduler": "kube-default",
        "stalled": True,
        "endTime": 60.0,
        "jobs": jobs,
        "podGroups": [
            {
                "namespace": "ml",
                "name": "gang-b",
                "queue": "q1",
                "phase": "Inqueue",
                "minMember": 8,
                "conditions": [
                    {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": STUCK_REASON}
                ],
            }
        ],
        "pods": pods,
        "stuck": [{"namespace": "ml", "name": "gang-b", "reason": STUCK_REASON}],
        "summary": {
            "completed": 1,
            "failed": 1,
            "stuck": 1,
            "makespan": None,
            "jctMean": 21.25,
            "jctP50": 21.25,
            "jctP95": 30.0,
            "waitMean": 1.5,
            "waitP50": 1.5,
            "waitP95": 1.95,
            "cpuAllocationMean": 0.31,
            "gpuAllocationMean": None,
        },
        "timeline": timeline,
        "someExtraKey": {"ignored": True},
    }


def _lavaflow_result() -> dict:
    """Run with GPUs in the timeline; all jobs complete."""
    jobs, pods = [], []
    for j in range(3):
        sub, start = float(j), float(j) + 0.5
        fin = start + 10.0 * (j + 1)
        jobs.append(
            {
                "namespace": "ml",
                "name": f"job-{j}",
                "queue": "gpu",
                "phase": "Completed",
                "submitTime": sub,
                "startTime": start,
                "finishTime": fin,
            }
        )
        for k in range(2):
            pods.append(
                {
                    "namespace": "ml",
                    "name": f"job-{j}-{k}",
                    "job": f"job-{j}",
                    "task": "worker",
                    "node": f"gpu-node-{(j + k) % 3}",
                    "phase": "Succeeded",
                    "createTime": sub,
                    "startTime": start,
                    "finishTime": fin,
                    "exitCode": 0,
                }
            )
    cap = {"cpu": 96.0, "memory": 768.0, "nvidia.com/gpu": 24.0}
    timeline = [
        {
            "time": t,
            "allocated": {"cpu": c, "memory": 8.0 * c, "nvidia.com/gpu": g},
            "capacity": dict(cap),
            "runningPods": r,
            "pendingPods": 0,
        }
        for t, c, g, r in [
            (0.0, 0.0, 0.0, 0),
            (0.5, 16.0, 4.0, 2),
            (1.5, 32.0, 8.0, 4),
            (2.5, 48.0, 12.0, 6),
            (10.5, 32.0, 8.0, 4),
            (32.5, 0.0, 0.0, 0),
        ]
    ]
    return {
        "scheduler": "lavaflow",
        "stalled": False,
        "endTime": 32.5,
        "jobs": jobs,
        "podGroups": [],
        "pods": pods,
        "stuck": [],
        "summary": {
            "completed": 3,
            "failed": 0,
            "stuck": 0,
            "makespan": 32.5,
            "jctMean": 20.5,
            "jctP50": 20.5,
            "jctP95": 30.5,
            "waitMean": 0.5,
            "waitP50": 0.5,
            "waitP95": 0.5,
            "cpuAllocationMean": 0.25,
            "gpuAllocationMean": 0.25,
        },
        "timeline": timeline,
    }


def _check_self_contained(text: str) -> None:
    assert "<script" not in text.lower()
    assert not re.search(r"<link[^>]*href=", text, re.IGNORECASE)
    assert not re.search(r"<script[^>]*src=", text, re.IGNORECASE)
    allowed = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", text))
    assert urls <= allowed, urls - allowed


def test_write_report_two_schedulers(tmp_path):
    out = tmp_path / "report.html"
    write_report([_kube_default_result(), _lavaflow_result()], out)
    assert out.exists()
    text = out.read_text(encoding="utf-8")

    assert text.startswith("<!DOCTYPE html>")
    assert text.count("<svg") >= 4
    assert "kube-default" in text and "lavaflow" in text
    assert "Comparison" in text
    assert STUCK_REASON in text  # stuck job reason (no characters needing escaping)
    # user strings are escaped, never injected as markup
    assert "<b>x</b>" not in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text
    # durations / times are formatted with one decimal
    assert '<td class="num">31.0</td>' in text
    assert '<td class="num">32.5</td>' in text
    _check_self_contained(text)


def test_single_result_has_no_comparison(tmp_path):
    out = tmp_path / "single.html"
    write_report([_lavaflow_result()], out, title="only <lavaflow>")
    text = out.read_text(encoding="utf-8")
    assert "Comparison" not in text
    assert "only &lt;lavaflow&gt;" in text
    assert text.count("<svg") >= 3
    _check_self_contained(text)


def test_svg_ids_unique_across_figures(tmp_path):
    out = tmp_path / "ids.html"
    write_report([_kube_default_result(), _lavaflow_result()], out)
    text = out.read_text(encoding="utf-8")
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    # every local reference points at an id that exists
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', text))
    assert refs <= set(ids)


def test_empty_result_does_not_crash(tmp_path):
    empty = {
        "scheduler": "empty",
        "stalled": False,
        "endTime": 0.0,
        "jobs": [],
        "podGroups": [],
        "pods": [],
        "stuck": [],
        "summary": {},
        "timeline": [],
    }
    out = tmp_path / "empty.html"
    write_report([empty], out)
    text = out.read_text(encoding="utf-8")
    assert "empty" in text
    assert "No completed or failed jobs" in text
    _check_self_contained(text)

    # also alongside a real run, and with keys missing entirely
    write_report([empty, {"scheduler": "bare"}, _lavaflow_result()], out)
    text = out.read_text(encoding="utf-8")
    assert "bare" in text and "Comparison" in text

    write_report([], tmp_path / "none.html")
    assert (tmp_path / "none.html").exists()


def test_jobs_table_collapses_and_weird_names(tmp_path):
    res = _lavaflow_result()
    res["scheduler"] = "price $5 & _hidden"
    res["jobs"] = [
        {
            "namespace": "ns",
            "name": f"j{i}",
            "queue": "q",
            "phase": "Completed",
            "submitTime": 0.0,
            "startTime": 1.0,
            "finishTime": 2.0 + i,
        }
        for i in range(60)
    ]
    res["pods"] = [
        {
            "namespace": "ns",
            "name": f"j{i}-0",
            "job": f"j{i}",
            "task": "t",
            "node": f"n{i % 7}",
            "phase": "Succeeded",
            "createTime": 0.0,
            "startTime": 1.0,
            "finishTime": 2.0 + i,
            "exitCode": 0,
        }
        for i in range(60)
    ]
    out = tmp_path / "many.html"
    write_report([res], out)
    text = out.read_text(encoding="utf-8")
    assert "<details>" in text
    assert "price $5 &amp; _hidden" in text
    assert "legend omitted" in text  # > 20 jobs


@pytest.mark.parametrize("n_pods", [20_001])
def test_gantt_skipped_for_huge_runs(tmp_path, n_pods):
    res = {
        "scheduler": "huge",
        "endTime": 10.0,
        "jobs": [],
        "timeline": [],
        "pods": [
            {"namespace": "ns", "name": f"p{i}", "job": "j", "node": f"n{i % 250}", "startTime": 0.0, "finishTime": 1.0}
            for i in range(n_pods)
        ],
    }
    out = tmp_path / "huge.html"
    write_report([res], out)
    assert "Gantt chart skipped" in out.read_text(encoding="utf-8")


def test_both_reports_embed_charts_the_same_way_with_ids_unique_per_page():
    """The elastic report goes through report.charts like the simulation report: one SVG per
    chart, matplotlib's page-wide <style> dropped, and no element id used twice on the page."""
    import re

    from lavaflow.elastic.results import JobResult, SimResult
    from lavaflow.report.elastic import render_report

    def run(policy: str, jct: float) -> SimResult:
        job = JobResult(
            "j0",
            "bert",
            0.0,
            10.0,
            10.0 + jct,
            10.0 + jct,
            1,
            0,
            0,
            4 * jct,
            [(10.0, 2, "v100"), (20.0, 4, "v100"), (10.0 + jct, 0, None)],
        )
        return SimResult(
            policy,
            [job],
            {"v100": 8},
            [(10.0, {"v100": 2}), (20.0, {"v100": 4}), (10.0 + jct, {"v100": 0})],
            2,
            0.1,
            10.0 + jct,
        )

    page = render_report([run("FIFO", 300.0), run("Lavaflow", 200.0)])
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert page.count("<svg") == 4 and ids
    assert len(ids) == len(set(ids))
    assert page.count("<style") == 1  # the page's own
