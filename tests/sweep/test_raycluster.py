"""examples/sweeps/raycluster.yaml: the Ray cluster docs/sweeps.md runs sweeps on is gang-scheduled
by lavaflow, as KubeRay's Volcano integration hands it over (a PodGroup of head + workers, pods
with schedulerName volcano in that group)."""

from __future__ import annotations

import yaml

from conftest import ROOT, node_group, simulate

MANIFEST = ROOT / "examples" / "sweeps" / "raycluster.yaml"


def _kuberay_objects(rc: dict, duration: str = "1h") -> list[dict]:
    """What KubeRay's Volcano batch scheduler makes of a RayCluster: a PodGroup
    ``ray-<name>-pg`` (minMember = head + the workers' minReplicas, minResources = their requests,
    the queue from ``volcano.sh/queue-name``), and pods that name it and schedulerName volcano."""
    name, ns = rc["metadata"]["name"], rc["metadata"].get("namespace", "default")
    labels = rc["metadata"]["labels"]
    assert labels["ray.io/scheduler-name"] == "volcano"
    groups = [("head", 1, rc["spec"]["headGroupSpec"]["template"])]
    groups += [(g["groupName"], g["minReplicas"], g["template"]) for g in rc["spec"]["workerGroupSpecs"]]
    pg = f"ray-{name}-pg"
    total: dict[str, float] = {}
    pods = []
    for group, count, template in groups:
        requests = template["spec"]["containers"][0]["resources"]["requests"]
        for i in range(count):
            for k, v in requests.items():
                total[k] = total.get(k, 0.0) + (float(v[:-2]) * 2**30 if str(v).endswith("Gi") else float(v))
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{group}-{i}",
                        "namespace": ns,
                        "annotations": {"scheduling.k8s.io/group-name": pg, "sim.lavaflow.io/duration": duration},
                        "labels": {"ray.io/cluster": name, "ray.io/group": group},
                    },
                    "spec": {"schedulerName": "volcano", **template["spec"]},
                }
            )
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": pg, "namespace": ns},
        "spec": {
            "minMember": len(pods),
            "queue": labels["volcano.sh/queue-name"],
            "minResources": {k: (f"{v / 2**30:g}Gi" if k == "memory" else f"{v:g}") for k, v in total.items()},
        },
    }
    return [podgroup, *pods]


def _run(nodes: int) -> dict:
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    queue = next(d for d in docs if d["kind"] == "Queue")
    rc = next(d for d in docs if d["kind"] == "RayCluster")
    text = node_group(count=nodes, cpu="16", memory="64Gi") + "---\n" + yaml.safe_dump(queue)
    text += "".join("---\n" + yaml.safe_dump(d) for d in _kuberay_objects(rc))
    return simulate(text, until=600)


def test_the_ray_cluster_starts_whole_or_not_at_all():
    # head 1 CPU + 8 workers x 4 CPUs = 33 CPUs
    short = _run(nodes=2)  # 32 CPUs: one worker short
    assert not [p for p in short["pods"] if p["node"]], "no pod of the Ray cluster may start without the rest"
    assert short["stuck"]
    whole = _run(nodes=3)
    assert len([p for p in whole["pods"] if p["node"]]) == 9
    starts = {p["startTime"] for p in whole["pods"]}
    assert len(starts) == 1  # bound together, in one session
