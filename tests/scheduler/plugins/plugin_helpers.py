"""Helpers that tests of more than one plugin share (each plugin's tests are in test_<plugin>.py)."""

from __future__ import annotations

import json

from conftest import resources
from scheduler_helpers import make_cache, make_node, make_pg, make_pod


# ---------------------------------------------------------------- nodeorder, binpack
def scoring_cache(pods=()):
    return make_cache(
        [make_node("empty", 8, "16Gi"), make_node("half", 8, "16Gi", labels={"zone": "b"})],
        pgs=[make_pg("bg", 1), make_pg("j", 1)],
        pods=[make_pod("bg-0", "bg", cpu=4, mem="8Gi", node="half", phase="Running"), *pods],
    )


# ---------------------------------------------------------------- nodegroup, resource-strategy-fit
def queue_job(
    name: str,
    queue_name: str,
    replicas: int = 2,
    cpu: str = "1",
    gpu: str | None = None,
    annotations: dict | None = None,
) -> str:
    req = {"cpu": cpu}
    if gpu:
        req["nvidia.com/gpu"] = gpu
    tmpl_ann = {"sim.lavaflow.io/duration": "100", **(annotations or {})}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "minAvailable": replicas,
                    "schedulerName": "volcano",
                    "queue": queue_name,
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"annotations": tmpl_ann},
                                "spec": {"containers": [{"name": "c", "resources": resources(req)}]},
                            },
                        }
                    ],
                },
            }
        )
        + "\n"
    )


# ---------------------------------------------------------------- resourcequota, drf (namespace order)
def quota(ns: str, hard: dict, name: str = "q") -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"hard": hard},
            }
        )
        + "\n"
    )


def namespace_job(name: str, ns: str, replicas: int = 1, cpu: str = "1", creation: int = 0) -> str:
    ann = {"sim.lavaflow.io/submit-at": str(creation)} if creation else {}
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": ns, "annotations": ann},
                "spec": {
                    "minAvailable": replicas,
                    "schedulerName": "volcano",
                    "tasks": [
                        {
                            "name": "t",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"annotations": {"sim.lavaflow.io/duration": "100"}},
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                            },
                        }
                    ],
                },
            }
        )
        + "\n"
    )


def jobs_by(result: dict) -> dict[str, dict]:
    return {f"{j['namespace']}/{j['name']}": j for j in result["jobs"]}
