"""Job plugins ray and hcclrank, through the simulator."""

from __future__ import annotations

import json

from test_lifecycle import run_sim

from conftest import node_group


def job(plugins: dict, tasks: list[tuple[str, int, str]]) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "j"},
                "spec": {
                    "schedulerName": "volcano",
                    "plugins": plugins,
                    "tasks": [
                        {
                            "name": name,
                            "replicas": n,
                            "template": {
                                "metadata": {"annotations": {"sim.lavaflow.io/duration": "5"}},
                                "spec": {
                                    "containers": [
                                        {
                                            "name": container,
                                            "image": "rayproject/ray",
                                            "resources": {"requests": {"cpu": "1"}},
                                        }
                                    ]
                                },
                            },
                        }
                        for name, n, container in tasks
                    ],
                },
            }
        )
        + "\n"
    )


def created_pods(text: str) -> tuple[object, dict]:
    seen: dict = {}
    sim, r = run_sim(
        node_group("n", 2, cpu="8") + text,
        until=100,
        watch={"Pod": lambda ev, p, old: seen.setdefault(p.name, p) if ev == "ADDED" else None},
    )
    return sim, seen


def test_ray_plugin_head_and_worker_commands_and_head_service():
    sim, pods = created_pods(job({"ray": [], "svc": []}, [("head", 1, "head"), ("worker", 2, "worker")]))
    head = pods["j-head-0"].spec.containers[0]
    assert head.command == [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 "
        "--dashboard-port=8265 --ray-client-server-port=10001",
    ]
    assert [(p.name, p.container_port) for p in head.ports] == [
        ("gcs", 6379),
        ("dashboard", 8265),
        ("client-server", 10001),
    ]
    assert pods["j-worker-1"].spec.containers[0].command == ["sh", "-c", "ray start --block --address=j-head-0.j:6379"]
    svc = sim.store.get("Service", "default/j-head-svc")
    assert svc.spec.selector == {
        "volcano.sh/job-name": "j",
        "volcano.sh/job-namespace": "default",
        "volcano.sh/task-spec": "head",
    }
    assert [(p.name, p.port) for p in svc.spec.ports] == [("gcs", 6379), ("dashboard", 8265), ("client-server", 10001)]


def test_ray_plugin_arguments():
    _, pods = created_pods(
        job(
            {"ray": ["--head=h", "--headContainer=main", "--port=7000"], "svc": []},
            [("h", 1, "main"), ("worker", 1, "worker")],
        )
    )
    assert "--port=7000" in pods["j-h-0"].spec.containers[0].command[2]
    assert pods["j-worker-0"].spec.containers[0].command[2] == "ray start --block --address=j-h-0.j:7000"


def test_hcclrank_plugin_ranks_masters_then_workers():
    _, pods = created_pods(job({"hcclrank": []}, [("master", 1, "c"), ("worker", 3, "c")]))
    ranks = {name: p.metadata.annotations.get("hccl/rankIndex") for name, p in pods.items()}
    assert ranks == {"j-master-0": "0", "j-worker-0": "1", "j-worker-1": "2", "j-worker-2": "3"}


def test_hcclrank_takes_the_rank_the_pytorch_plugin_set():
    _, pods = created_pods(job({"pytorch": [], "hcclrank": [], "svc": []}, [("master", 1, "c"), ("worker", 2, "c")]))
    ranks = {name: p.metadata.annotations.get("hccl/rankIndex") for name, p in pods.items()}
    assert ranks == {"j-master-0": "0", "j-worker-0": "1", "j-worker-1": "2"}
