"""predicates: topology spread constraints and host ports, through the simulator."""

from __future__ import annotations

import json

from conftest import node_group, simulate


def pods(n: int, spread: list | None = None, host_port: int | None = None, cpu: str = "1") -> str:
    out = ""
    for i in range(n):
        c: dict = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        if host_port:
            c["ports"] = [{"containerPort": 80, "hostPort": host_port}]
        spec: dict = {"schedulerName": "volcano", "containers": [c]}
        if spread:
            spec["topologySpreadConstraints"] = spread
        out += (
            "---\n"
            + json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"p{i}",
                        "labels": {"app": "web"},
                        "annotations": {"sim.lavaflow.io/duration": "100"},
                    },
                    "spec": spec,
                }
            )
            + "\n"
        )
    return out


def zones() -> str:
    return node_group("za", 2, cpu="8", memory="32Gi", labels={"zone": "a"}) + node_group(
        "zb", 2, cpu="8", memory="32Gi", labels={"zone": "b"}
    )


def node_of(result: dict) -> dict[str, str]:
    return {p["name"]: p.get("node") for p in result["pods"]}


def test_topology_spread_keeps_zone_skew_within_max_skew():
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    got = node_of(simulate(zones() + pods(6, spread), until=50))
    per_zone = {"a": 0, "b": 0}
    for node in got.values():
        per_zone[node[1]] += 1
    assert per_zone == {"a": 3, "b": 3}
    packed = node_of(simulate(zones() + pods(6), until=50))
    assert len({n[1] for n in packed.values()}) == 1  # without the constraint binpack fills one zone


def test_topology_spread_on_hostname_and_missing_key():
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]
    got = node_of(simulate(zones() + pods(4, spread), until=50))
    assert len(set(got.values())) == 4
    nokey = [{"maxSkew": 1, "topologyKey": "rack", "labelSelector": {"matchLabels": {"app": "web"}}}]
    r = simulate(zones() + pods(1, nokey), until=50)
    assert node_of(r)["p0"] is None


def test_host_ports_conflict_on_a_node():
    r = simulate(node_group("n", 2, cpu="8", memory="32Gi") + pods(3, host_port=8080), until=50)
    got = node_of(r)
    placed = [v for v in got.values() if v]
    assert len(placed) == 2 and len(set(placed)) == 2  # one per node; the third waits
    msgs = json.dumps(r["podGroups"])
    assert "didn't have free ports for the requested pod ports" in msgs


def volume_objects(zone: str = "b") -> str:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "claimRef": {"namespace": "default", "name": "data"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"volumeName": "pv-1"},
    }
    return "---\n" + json.dumps(pv) + "\n---\n" + json.dumps(pvc) + "\n"


def pod_with_claim(name: str, claim: str) -> str:
    return (
        "---\n"
        + json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "annotations": {"sim.lavaflow.io/duration": "100"}},
                "spec": {
                    "schedulerName": "volcano",
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
        + "\n"
    )


def test_bound_volume_node_affinity_restricts_placement():
    r = simulate(zones() + volume_objects("b") + pod_with_claim("p", "data"), until=50)
    assert node_of(r)["p"].startswith("zb-")
    assert node_of(simulate(zones() + volume_objects("a") + pod_with_claim("p", "data"), until=50))["p"].startswith(
        "za-"
    )


def test_missing_claim_keeps_the_pod_pending_with_reason():
    r = simulate(zones() + pod_with_claim("p", "nope"), until=50)
    assert node_of(r)["p"] is None
    assert 'persistentvolumeclaim \\"nope\\" not found' in json.dumps(r["podGroups"])
