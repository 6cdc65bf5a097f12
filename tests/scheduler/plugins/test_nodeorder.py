"""The nodeorder plugin: the callbacks it registers, what they decide, and kube-scheduler's integer
scores it gives in Volcano's node choice."""

from __future__ import annotations

import numpy as np
from plugin_helpers import scoring_cache

from lavaflow.scheduler.plugins.nodeorder import kube_balanced_allocation, kube_least_requested
from lavaflow.scheduler.resources import CPU, MEMORY
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
    run_cycle,
)

GI = 2.0**30
MI = 2.0**20


def test_nodeorder_least_requested_prefers_emptier_node():
    cache = scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    ssn = open_session(cache, only("predicates", "nodeorder"))
    scores = fn(ssn, "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert scores[0] > scores[1]
    _, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    assert d.binds == [("default/p", "empty")]


def test_nodeorder_preferred_node_affinity():
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}
            ]
        }
    }
    cache = scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi", affinity=pref)])
    _, d = run_cycle(cache, only("gang", "predicates", "nodeorder"))
    assert d.binds == [("default/p", "half")]


def test_nodeorder_prefer_no_schedule_taint():
    cache = make_cache(
        [make_node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), make_node("clean")],
        pgs=[make_pg("j", 1)],
        pods=[make_pod("p", "j")],
    )
    ssn = open_session(cache, only("nodeorder"))
    scores = fn(ssn, "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] > scores[0]


def test_nodeorder_sees_a_prefer_no_schedule_taint_added_between_sessions():
    # whether any node has such a taint is kept across sessions, under the nodes' version
    cache = make_cache([make_node("a"), make_node("b")], pgs=[make_pg("j", 1)], pods=[make_pod("p", "j")])
    first = fn(open_session(cache, only("nodeorder")), "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert first[0] == first[1]
    cache.on_node(make_node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}]))
    then = fn(open_session(cache, only("nodeorder")), "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(2))
    assert then[1] > then[0]


def test_kube_scores_are_integers_that_step_down_as_pods_land():
    # 32 cpu / 128 Gi nodes holding k pods of 100m / 128 Mi, scoring one more.
    k = np.arange(12)
    alloc = np.zeros((12, 3))
    alloc[:, CPU], alloc[:, MEMORY] = 32.0, 128 * GI
    used = np.zeros((12, 3))
    used[:, CPU], used[:, MEMORY] = 0.1 * k, 128 * MI * k
    req = np.array([0.1, 128 * MI, 1.0])
    least = kube_least_requested(alloc, used, req)
    balanced = kube_balanced_allocation(alloc, used, req)
    # cpu (32000 - 100(k+1)) * 100 // 32000 and memory (1024 - (k+1)) * 100 // 1024, averaged in integers
    assert least.tolist() == [99, 99, 99, 98, 98, 98, 98, 98, 98, 97, 97, 97]
    # Kubernetes 1.36 scores the change in balance, 50 + (50 + with - without) // 2, where a balance
    # is 1 - |cpu fraction - memory fraction| / 2 truncated to an integer: 100 on an empty node, 99
    # with 1 to 9 pods, 98 with 10 to 18. The first pod and the tenth cost a point (74), the others
    # none (75).
    assert balanced.tolist() == [74] + [75] * 8 + [74] + [75] * 2


def test_kube_balance_rewards_a_pod_that_evens_a_node_out():
    # Half the cpu used and no memory (balance 75); a pod asking for half the memory and no cpu
    # evens it out (balance 100): 50 + (50 + 100 - 75) // 2 = 87. On an empty node it unbalances it
    # (100 -> 75): 50 + (50 + 75 - 100) // 2 = 62.
    alloc = np.zeros((2, 3))
    alloc[:, CPU], alloc[:, MEMORY] = 32.0, 128 * GI
    used = np.zeros((2, 3))
    used[0, CPU] = 16.0
    req = np.array([0.0, 64 * GI, 1.0])
    assert kube_balanced_allocation(alloc, used, req).tolist() == [87, 62]
