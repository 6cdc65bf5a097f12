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


def test_kube_balance_counts_a_gpu_the_pod_asks_for():
    # Volcano gives BalancedAllocation cpu, memory and nvidia.com/gpu. A pod of 1 cpu, 1 Gi and one
    # of four GPUs on an empty 8 cpu / 8 Gi node: fractions 0.125, 0.125, 0.25; the deviation of the
    # three is 0.0589, a balance of 94 (100 without the pod): 50 + (50 + 94 - 100) // 2 = 72. Left
    # to cpu and memory alone the pod would seem to keep the node balanced (75).
    alloc = np.array([[8.0, 8 * GI, 110.0, 4.0]])
    used = np.zeros((1, 4))
    req = np.array([1.0, 1 * GI, 1.0, 1.0])
    assert kube_balanced_allocation(alloc, used, req, gpu=3).tolist() == [72]
    assert kube_balanced_allocation(alloc, used, req).tolist() == [75]
    # A node without GPUs leaves the GPU out of its balance.
    alloc0 = np.array([[8.0, 8 * GI, 110.0, 0.0]])
    assert kube_balanced_allocation(alloc0, used, req, gpu=3).tolist() == [75]


def test_volcano_scores_count_unasked_cpu_and_memory_as_kube_scheduler_does():
    """A pod asking for 2 cpu and no memory, on an 8 cpu / 8 Gi node and an 8 cpu / 4 Gi one, each
    already holding a pod that asked for nothing. kube-scheduler's LeastAllocated counts 200 MiB for
    every container that asks for no memory and 0.1 core for one that asks for no cpu: cpu
    (8000 - 2100) * 100 // 8000 = 73 on both, memory 95 on the 8 Gi node and 90 on the 4 Gi one.
    BalancedAllocation reads what was asked (the same on both), so the 8 Gi node wins; counting
    only what was asked, the two tie."""
    pods = [
        make_pod("p", "j", cpu=2, mem=None),
        make_pod("be0", "b0", cpu=None, mem=None, node="n0", phase="Running"),
        make_pod("be1", "b1", cpu=None, mem=None, node="n1", phase="Running"),
    ]
    cache = make_cache(
        [make_node("n0", cpu=8, mem="8Gi"), make_node("n1", cpu=8, mem="4Gi")],
        pgs=[make_pg("j", min_member=1), make_pg("b0", min_member=1), make_pg("b1", min_member=1)],
        pods=pods,
    )
    ssn = _volcano_session(cache)
    task = cache.tasks["default/p"]
    scores = fn(ssn, "NodeOrder", "nodeorder")(task, np.arange(2))
    # least 73/95 -> (73*50 + 95*50) // 100 = 84 against (73*50 + 90*50) // 100 = 81; the balance
    # of what was asked (cpu 0.25, memory 0: 87, from 100) 50 + (50 + 87 - 100) // 2 = 68 on both
    assert scores.tolist() == [84 + 68, 81 + 68]
    assert ssn.nodes.nonzero is not None
    assert ssn.nodes.nonzero[:2].tolist() == [[0.1, 200 * MI], [0.1, 200 * MI]]


def test_a_pod_asking_for_nothing_gets_no_balance_score():
    cache = make_cache(
        [make_node("n0", cpu=8, mem="8Gi")],
        pgs=[make_pg("j", min_member=1)],
        pods=[make_pod("p", "j", cpu=None, mem=None)],
    )
    ssn = _volcano_session(cache)
    # least-requested alone: (7900 * 100 // 8000 = 98, memory 97) -> 97; BalancedAllocation gives 0
    assert fn(ssn, "NodeOrder", "nodeorder")(cache.tasks["default/p"], np.arange(1)).tolist() == [97]


def _volcano_session(cache):
    from lavaflow.scheduler.framework.conf import load_scheduler_conf
    from lavaflow.scheduler.framework.node_choice import NodeChoice, NodeSampler
    from lavaflow.scheduler.framework.session import Session

    ssn = Session(
        cache, load_scheduler_conf(only("predicates", "nodeorder")), sampler=NodeSampler(NodeChoice(mode="volcano"))
    )
    ssn.open()
    return ssn


def test_volcano_node_choice_orders_a_jobs_pods_by_index_then_creation_then_uid():
    """Volcano's default task order (its CompareTask): the pods of one Job by their index within
    their task, not grouped by task name; pods of equal index made in the same second by their
    UIDs (random on a cluster). lavaflow's own order groups them by task name."""
    pods = [make_pod(f"j-{role}-{i}", "j", role=role, index=i, extra=None) for role in ("a", "b") for i in range(2)]
    for pod, uid in zip(pods, ("u3", "u1", "u2", "u0"), strict=True):
        pod.metadata.uid = uid
    cache = make_cache([make_node("n0")], pgs=[make_pg("j", min_member=4)], pods=pods)
    volcano = sorted(cache.tasks.values(), key=_volcano_session(cache).task_key)
    # index 0: j-a-0 (u3), j-b-0 (u2) by UID; then index 1: j-a-1 (u1), j-b-1 (u0)
    assert [t.name for t in volcano] == ["j-b-0", "j-a-0", "j-b-1", "j-a-1"]
    ours = sorted(cache.tasks.values(), key=open_session(cache, only("predicates", "nodeorder")).task_key)
    assert [t.name for t in ours] == ["j-a-0", "j-a-1", "j-b-0", "j-b-1"]
