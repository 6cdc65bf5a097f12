"""resourcequota (ResourceQuota caps admission), through the simulator."""

from __future__ import annotations

from plugin_helpers import jobs_by, namespace_job as job, quota
from test_network_topology import CONF, conf

from conftest import node_group, simulate

RQ_CONF = CONF.replace("  - name: network-topology-aware\n", "  - name: resourcequota\n")
PLAIN_CONF = CONF.replace("  - name: network-topology-aware\n", "")


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
