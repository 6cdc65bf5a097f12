"""How long `lavaflow dashboard` takes to render its pages over a large cluster (issue 38: the queue
page of a 5,000-node, 50,000-pod cluster in < 1 s).

Builds the objects an API server would send (Nodes, a tree of Queues, Volcano Jobs with their
PodGroups and pods, most running and some pending with an Unschedulable condition), feeds each to
the dashboard's live state through the handlers its watches call (the same conversion as on a
cluster, without a server), then renders each page several times and prints, per page, the median
and the worst CPU and wall time of one render (the HTML string, as the server sends it).

    .venv/bin/python benchmarks/dashboard_render.py --nodes 5000 --pods 50000 [--http]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from lavaflow.dashboard import pages
from lavaflow.dashboard.forecast_column import ForecastColumn
from lavaflow.dashboard.live import LiveState
from lavaflow.kube.client import ClientConfig, KubeClient

GPU_TYPES = ("a100", "h100", "v100")


def node(i: int) -> dict:
    gpu = i % 5 == 0  # one node in five has 8 GPUs
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": f"node-{i}"}
    if gpu:
        alloc["nvidia.com/gpu"] = "8"
        labels["lavaflow.io/accelerator"] = GPU_TYPES[i % 3]
    return {
        "metadata": {"name": f"node-{i}", "uid": f"n{i}", "labels": labels},
        "spec": {},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def queues(parents: int, children: int) -> list[dict]:
    out = [{"metadata": {"name": "root", "uid": "q-root"}, "spec": {"weight": 1}, "status": {"state": "Open"}}]
    for p in range(parents):
        out.append(
            {
                "metadata": {"name": f"org-{p}", "uid": f"q{p}"},
                "spec": {"weight": 1 + p % 3, "parent": "root", "capability": {"cpu": "40000"}},
                "status": {"state": "Open"},
            }
        )
        for c in range(children):
            out.append(
                {
                    "metadata": {"name": f"team-{p}-{c}", "uid": f"q{p}-{c}"},
                    "spec": {"weight": 1 + c % 4, "parent": f"org-{p}", "guarantee": {"resource": {"cpu": "100"}}},
                    "status": {"state": "Open", "allocated": {"cpu": "500", "memory": "1000Gi"}},
                }
            )
    return out


def job_objects(j: int, size: int, queue: str, running: bool, nodes: int) -> tuple[dict, dict, list[dict]]:
    name, uid = f"job-{j}", f"j{j}"
    created = "2026-11-29T06:00:00Z"
    job = {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "creationTimestamp": created},
        "spec": {"queue": queue, "minAvailable": size},
        "status": {"state": {"phase": "Running" if running else "Pending"}},
    }
    conds = (
        []
        if running
        else [
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": f"{size}/{size} tasks in gang unschedulable: 0/{nodes} nodes are available: "
                f"{nodes} Insufficient cpu.",
            }
        ]
    )
    pg = {
        "metadata": {
            "name": f"{name}-{uid}",
            "namespace": "default",
            "uid": f"pg{j}",
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": uid}],
        },
        "spec": {"minMember": size, "queue": queue},
        "status": {"phase": "Running" if running else "Pending", "conditions": conds},
    }
    pods = []
    for t in range(size):
        pods.append(
            {
                "metadata": {
                    "name": f"{name}-worker-{t}",
                    "namespace": "default",
                    "uid": f"p{j}-{t}",
                    "creationTimestamp": created,
                    "labels": {"volcano.sh/job-name": name},
                    "annotations": {"volcano.sh/task-spec": "worker", "scheduling.k8s.io/group-name": f"{name}-{uid}"},
                },
                "spec": {
                    "nodeName": f"node-{(j * size + t) % nodes}" if running else None,
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}],
                },
                "status": {"phase": "Running" if running else "Pending"},
            }
        )
    return job, pg, pods


def timed(fn, repeat: int) -> tuple[list[float], list[float], int]:
    cpu, wall, size = [], [], 0
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        size = len(fn())
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--pods-per-job", type=int, default=10)
    ap.add_argument("--pending", type=float, default=0.2, help="share of jobs pending")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--http", action="store_true", help="also time GET /queues from the dashboard's server")
    args = ap.parse_args()

    live = LiveState(KubeClient(ClientConfig(server="https://unused.invalid")), "benchmark")
    st = live.state
    t0 = time.perf_counter()
    for q in queues(5, 10):
        live._on_Queue(q["metadata"]["name"], q)
    for i in range(args.nodes):
        live._on_Node(f"node-{i}", node(i))
    leaves = [n for n in st.queues if n.startswith("team-")]
    jobs = args.pods // args.pods_per_job
    pending_every = max(1, round(1 / args.pending)) if args.pending > 0 else 0
    for j in range(jobs):
        running = not (pending_every and j % pending_every == 0)
        job, pg, pods = job_objects(j, args.pods_per_job, leaves[j % len(leaves)], running, args.nodes)
        live._on_Job(f"default/job-{j}", job)
        live._on_PodGroup(f"default/{pg['metadata']['name']}", pg)
        for p in pods:
            live._on_Pod(f"default/{p['metadata']['name']}", p)
    build = time.perf_counter() - t0
    fc = ForecastColumn(entry=None).text
    load = os.getloadavg()
    print(
        f"state: {len(st.nodes)} nodes, {len(st.pods)} pods, {len(st.jobs)} jobs, {len(st.queues)} queues "
        f"(built from watch events in {build:.2f}s); {os.cpu_count()} CPUs, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    first = next(iter(st.jobs))
    for label, fn in (
        ("queues", lambda: pages.page(st, "Queues", pages.queues_page(st, fc), "queues", "Queue", True)),
        ("jobs (first 500)", lambda: pages.page(st, "Jobs", pages.jobs_page(st, fc, {}), "jobs", "Job", True)),
        ("nodes (first 500)", lambda: pages.page(st, "Nodes", pages.nodes_page(st, {}), "nodes", "Node", True)),
        ("one job", lambda: pages.page(st, first, pages.job_page(st, first, fc) or "", "jobs", "Job", True)),
    ):
        cpu, wall, size = timed(fn, args.repeat)
        print(
            f"{label:18s} {size / 1024:8.0f} KiB  CPU median {statistics.median(cpu) * 1000:7.1f} ms, "
            f"max {max(cpu) * 1000:7.1f} ms; wall median {statistics.median(wall) * 1000:7.1f} ms, "
            f"max {max(wall) * 1000:7.1f} ms"
        )
    if args.http:
        over_http(st, args.repeat)


def over_http(st, repeat: int) -> None:
    """GET /queues from the dashboard's own server (Starlette on uvicorn, 127.0.0.1), wall time
    from the request's start to the last byte of the answer."""
    import asyncio
    import socket
    import threading
    import urllib.request

    from lavaflow.dashboard.app import Dashboard, make_app, server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = server(make_app(Dashboard(st, live=True)), "127.0.0.1", port)
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve()), daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    walls = []
    for _ in range(repeat):
        w0 = time.perf_counter()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/queues", timeout=30).read()
        walls.append(time.perf_counter() - w0)
    srv.should_exit = True
    thread.join(10)
    print(
        f"GET /queues        {len(body) / 1024:8.0f} KiB  wall median {statistics.median(walls) * 1000:7.1f} ms, "
        f"max {max(walls) * 1000:7.1f} ms (server and client in this process, over 127.0.0.1)"
    )


if __name__ == "__main__":
    main()
