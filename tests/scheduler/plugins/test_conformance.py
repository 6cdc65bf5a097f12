"""The conformance plugin: the callbacks it registers and what they decide."""

from __future__ import annotations

from lavaflow.scheduler.framework.session import PERMIT
from lavaflow.scheduler.model import TaskStatus
from scheduler_helpers import (
    fn,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    only,
    open_session,
)


def test_conformance_protects_system_pods():
    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("sys", 1, namespace="kube-system"), make_pg("app", 1), make_pg("p", 1)],
        pods=[
            make_pod("s", "sys", namespace="kube-system", node="n1", phase="Running"),
            make_pod("c1", "app", priority_class="system-cluster-critical", node="n1", phase="Running"),
            make_pod("c2", "app", priority_class="system-node-critical", node="n1", phase="Running"),
            make_pod("plain", "app", node="n1", phase="Running"),
            make_pod("p-0", "p"),
        ],
    )
    ssn = open_session(cache, only("conformance"))
    actor = ssn.jobs["default/p"].tasks["default/p-0"]
    cands = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.RUNNING]
    assert len(cands) == 4
    for point in ("Preemptable", "Reclaimable"):
        victims, vote = fn(ssn, point, "conformance")(actor, cands)
        assert vote == PERMIT and [t.name for t in victims] == ["plain"]
