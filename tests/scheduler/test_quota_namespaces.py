"""resourcequota (ResourceQuota caps admission) and drf enableNamespaceOrder, through the simulator."""

from __future__ import annotations

import json

from test_network_topology import CONF, conf

from conftest import node_group, simulate

RQ_CONF = CONF.replace("  - name: network-topology-aware\n", "  - name: resourcequota\n")
PLAIN_CONF = CONF.replace("  - name: network-topology-aware\n", "")
NS_CONF = PLAIN_CONF.replace("  - name: drf\n", "  - name: drf\n    enableNamespaceOrder: true\n")


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


def job(name: str, ns: str, replicas: int = 1, cpu: str = "1", creation: int = 0) -> str:
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


def test_job_over_quota_waits_with_a_reason_naming_the_quota_then_runs():
    text = (
        node_group("n", 2, cpu="8", memory="32Gi")
        + quota("team", {"requests.cpu": "4", "pods": "10"})
        + job("a", "team", 3)
        + job("b", "team", 3)
        + job("c", "other", 3)
    )
    r = simulate(conf(RQ_CONF) + text, until=1000)
    js = jobs_by(r)
    assert js["team/a"]["startTime"] < 10 and js["other/c"]["startTime"] < 10
    assert js["team/b"]["startTime"] >= js["team/a"]["finishTime"]  # 3 + 3 CPUs > quota of 4
    # While it waited, its PodGroup said why.
    free = simulate(conf(RQ_CONF) + text, until=50)
    pg = next(p for p in free["podGroups"] if p["name"].startswith("b-"))
    msg = " ".join(c.get("message", "") for c in pg["conditions"])
    assert "resource quota team/q insufficient: requests.cpu: requested 3, used 3, limited 4" in msg


def test_without_the_plugin_the_api_server_still_holds_pods_to_the_quota():
    # Volcano's plugin would keep b Pending at enqueue; without it b is admitted, but the API
    # server's quota admission refuses its pods until a's finish (issue 35, item 12).
    text = (
        node_group("n", 2, cpu="8", memory="32Gi")
        + quota("team", {"cpu": "4"})
        + job("a", "team", 3)
        + job("b", "team", 3)
    )
    js = jobs_by(simulate(conf(PLAIN_CONF) + text, until=1000))
    assert js["team/b"]["startTime"] >= js["team/a"]["finishTime"]


def test_quota_on_pods_count():
    text = (
        node_group("n", 1, cpu="8", memory="32Gi")
        + quota("team", {"pods": "2"})
        + job("a", "team", 2)
        + job("b", "team", 1)
    )
    js = jobs_by(simulate(conf(RQ_CONF) + text, until=1000))
    assert js["team/b"]["startTime"] >= js["team/a"]["finishTime"]


def _first_wave(conf_text: str, extra: str = "") -> list[str]:
    # One 4-CPU node; namespace a submits four 1-CPU jobs, then namespace b four, all at t=0.
    text = node_group("n", 1, cpu="4", memory="16Gi") + extra
    text += "".join(job(f"a{i}", "a", creation=0) for i in range(4)) + "".join(job(f"b{i}", "b") for i in range(4))
    r = simulate(conf(conf_text) + text, until=1000)
    return sorted(k.split("/")[0] for k, j in jobs_by(r).items() if j["startTime"] is not None and j["startTime"] < 50)


def test_namespace_order_shares_a_queue_between_namespaces_by_weight():
    assert _first_wave(PLAIN_CONF) == ["a", "a", "a", "a"]  # job order alone: first come first served
    assert _first_wave(NS_CONF) == ["a", "a", "b", "b"]
    weighted = quota("a", {"volcano.sh/namespace.weight": "3"}, name="weight")
    assert _first_wave(NS_CONF, weighted) == ["a", "a", "a", "b"]
