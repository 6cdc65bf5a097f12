"""Memory of the scheduler's informer cache (python benchmarks/kube_memory.py NODES PODS): events applied directly, no API server."""

import gc
import sys
import time

from lavaflow.api.kinds import kind_info as res_of
from lavaflow.kube.client import ClientConfig, KubeClient
from lavaflow.kube.scheduler_process import KubeScheduler
from lavaflow.testing import fake_node


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024


N, P = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (5000, 150000)
base = rss_mb()
s = KubeScheduler(KubeClient(ClientConfig(server="http://127.0.0.1:1")))
t0 = time.time()
for i in range(N):
    s.store._apply(
        res_of("Node"),
        "ADDED",
        {
            **fake_node(f"node-{i}", cpu="64", memory="256Gi", pods="110"),
            "metadata": {
                "name": f"node-{i}",
                "uid": f"n{i}",
                "resourceVersion": str(i + 1),
                "labels": {"kubernetes.io/hostname": f"node-{i}"},
            },
        },
    )
for g in range(P // 10):
    s.store._apply(
        res_of("PodGroup"),
        "ADDED",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": f"pg-{g}",
                "namespace": "ns",
                "uid": f"g{g}",
                "resourceVersion": str(10**6 + g),
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"minMember": 10, "queue": "default", "minResources": {"cpu": "10"}},
            "status": {"phase": "Running"},
        },
    )
for i in range(P):
    g = i // 10
    s.store._apply(
        res_of("Pod"),
        "ADDED",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{i}",
                "namespace": "ns",
                "uid": f"p{i}",
                "resourceVersion": str(2 * 10**6 + i),
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"volcano.sh/job-name": f"job-{g}", "volcano.sh/task-spec": "worker"},
                "annotations": {
                    "scheduling.k8s.io/group-name": f"pg-{g}",
                    "volcano.sh/task-spec": "worker",
                    "volcano.sh/task-index": str(i % 10),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": f"job-{g}",
                        "uid": f"j{g}",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "schedulerName": "volcano",
                "nodeName": f"node-{i % N}",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/train:1.0",
                        "command": ["python", "train.py"],
                        "env": [{"name": "VC_TASK_INDEX", "value": str(i % 10)}],
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                    }
                ],
                "tolerations": [
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "startTime": "2026-01-01T00:00:01Z",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
            },
        },
    )
gc.collect()
used = rss_mb() - base
print(f"{N} nodes, {P} pods: +{used:.0f} MiB RSS ({used * 1024 / P:.1f} KiB/pod), built in {time.time() - t0:.0f}s")
t1 = time.time()
s.scheduler.run_once(time.time())
print(f"one idle cycle: {time.time() - t1:.2f}s")
