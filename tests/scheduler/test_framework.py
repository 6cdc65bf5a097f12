"""Scheduler framework: configuration, callback combination rules, statements and the cache."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lavaflow.scheduler.framework.conf import (
    DEFAULT_SCHEDULER_CONF,
    PluginOption,
    SchedulerConfError,
    load_scheduler_conf,
)
from lavaflow.scheduler.framework.registry import PLUGINS, Plugin
from lavaflow.scheduler.framework.session import ABSTAIN, PERMIT, REJECT, Session
from lavaflow.scheduler.framework.statement import Statement
from lavaflow.scheduler.model import Eviction, EvictionCause, TaskStatus
from scheduler_helpers import (
    conf_of,
    make_cache,
    make_node,
    make_pg,
    make_pod,
    make_queue,
    open_session,
    tiers_conf,
)

# ---------------------------------------------------------------------------- configuration


def test_default_conf_is_volcanos_shipped_default_plus_elastic():
    conf = load_scheduler_conf()
    assert conf.action_names == ["enqueue", "elastic", "allocate", "backfill"]
    assert [[p.name for p in t.plugins] for t in conf.tiers] == [
        ["priority", "gang", "conformance", "elastic"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    opts = {p.name: p for t in conf.tiers for p in t.plugins}
    assert not opts["gang"].enabled("Preemptable")
    assert not opts["drf"].enabled("Preemptable")
    assert opts["priority"].enabled("Preemptable")
    assert opts["gang"].enabled("JobReady")
    # The text form parses to the same thing.
    assert load_scheduler_conf(DEFAULT_SCHEDULER_CONF) == conf


def test_unknown_action_is_reported_with_its_path():
    with pytest.raises(SchedulerConfError) as err:
        load_scheduler_conf('actions: "enqueue, allocat"\ntiers:\n- plugins:\n  - name: gang\n')
    assert err.value.problems[0][0] == "actions"
    assert "allocat" in err.value.problems[0][1]


def test_unknown_plugins_are_skipped_with_a_warning_naming_their_paths():
    # As Volcano does: a plugin it does not know is logged and skipped, the rest runs.
    text = tiers_conf(["priority", "gangg"], ["drf", "nope"])
    conf = load_scheduler_conf(text)
    assert [p for p, _ in conf.warnings] == ["tiers[0].plugins[1].name", "tiers[1].plugins[1].name"]
    assert "'gangg' skipped" in conf.warnings[0][1] and "'nope' skipped" in conf.warnings[1][1]
    assert conf.skipped_plugins == ["gangg", "nope"]
    assert conf.plugin_names() == ["priority", "drf"]


def test_kube_default_is_not_an_action_of_a_volcano_configuration():
    with pytest.raises(SchedulerConfError) as err:
        load_scheduler_conf(tiers_conf(["priority", "gang"], actions="enqueue, kube-default"))
    assert err.value.problems[0][0] == "actions"
    assert "'kube-default' is not a Volcano action" in err.value.problems[0][1]
    assert (
        "kube-default"
        in load_scheduler_conf(tiers_conf(["priority"], actions="kube-default"), allow_kube_default=True).action_names
    )


@pytest.mark.parametrize("text", ["actions: [", "- just\n- a list\n", "42"])
def test_malformed_conf_is_refused(text):
    with pytest.raises(SchedulerConfError):
        load_scheduler_conf(text)


def test_plugin_switches_accept_both_spellings():
    opt = PluginOption.model_validate({"name": "x", "enablePreemptable": False, "enabledJobOrder": False})
    assert not opt.enabled("Preemptable")
    assert not opt.enabled("JobOrder")
    assert opt.enabled("JobReady")
    assert not opt.enabled("Hierarchy")  # hierarchy is off unless asked for
    assert PluginOption.model_validate({"name": "x", "enableHierarchy": True}).enabled("Hierarchy")
    assert PluginOption.model_validate({"name": "x", "arguments": None}).arguments == {}


def test_drf_hierarchy_with_proportion_in_one_tier_is_refused():
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: proportion\n'
    with pytest.raises(SchedulerConfError) as err:
        load_scheduler_conf(text)
    assert err.value.problems[0][0] == "tiers[0]"
    # Separate tiers, or drf without hierarchy, are fine.
    load_scheduler_conf(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n'
        "- plugins:\n  - name: proportion\n"
    )
    load_scheduler_conf(tiers_conf(["drf", "proportion"], actions="allocate"))


def test_action_arguments():
    conf = load_scheduler_conf(
        tiers_conf(["gang"], actions="allocate")
        + "configurations:\n- name: allocate\n  arguments:\n    predicateErrorCacheEnable: true\n"
    )
    assert conf.action_arguments("allocate") == {"predicateErrorCacheEnable": True}
    assert conf.action_arguments("enqueue") == {}


# ---------------------------------------------------------------------------- fake plugins


def _snake(point: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", point).lower()


@pytest.fixture
def fakes():
    """register(name, Point=fn, ...) adds a plugin registering those callbacks; removed afterwards."""
    saved: dict[str, type[Plugin] | None] = {}

    def register(name: str, **fns):
        def on_session_open(self, ssn):
            for point, fn in fns.items():
                getattr(ssn, f"add_{_snake(point)}_fn")(name, fn)

        saved.setdefault(name, PLUGINS.get(name))
        PLUGINS[name] = type(f"Fake_{name}", (Plugin,), {"name": name, "on_session_open": on_session_open})
        return name

    yield register
    for name, old in saved.items():
        if old is None:
            PLUGINS.pop(name, None)
        else:
            PLUGINS[name] = old


def _small_cache():
    return make_cache(
        [make_node("n1", 4, "8Gi"), make_node("n2", 4, "8Gi")],
        pgs=[make_pg("a", 1, creation=10), make_pg("b", 1, creation=5), make_pg("c", 1, creation=5)],
        pods=[
            make_pod("a-0", "a"),
            make_pod("b-0", "b", node="n1", phase="Running"),
            make_pod("b-1", "b", node="n1", phase="Running"),
            make_pod("c-0", "c", node="n2", phase="Running"),
        ],
    )


def _session(*tiers, cache=None, raw: str | None = None) -> Session:
    text = raw if raw is not None else tiers_conf(*tiers, actions="allocate")
    return open_session(cache or _small_cache(), text)


# ---------------------------------------------------------------------------- order functions


def test_order_first_nonzero_by_tier_wins(fakes):
    fakes("zero", JobOrder=lambda l, r: 0)
    fakes("later", JobOrder=lambda l, r: -1 if l.name == "a" else 1)
    fakes("never", JobOrder=lambda l, r: 1 if l.name == "a" else -1)
    ssn = _session(["zero"], ["later", "never"])
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_order(a, b) == -1
    assert ssn.job_order(b, a) == 1
    # Tier order matters: the first tier's non-zero answer decides.
    ssn = _session(["never"], ["later"])
    assert ssn.job_order(a, b) == 1


def test_order_fallback_is_creation_then_uid(fakes):
    fakes("zero", JobOrder=lambda l, r: 0, QueueOrder=lambda l, r: 0, TaskOrder=lambda l, r: 0)
    ssn = _session(["zero"])
    a, b, c = (ssn.jobs[f"default/{x}"] for x in "abc")
    assert ssn.job_order(b, a) == -1  # created earlier
    assert ssn.job_order(b, c) == -1  # same creation: uid
    assert ssn.job_order(c, b) == 1
    assert sorted([a, c, b], key=ssn.job_key) == [b, c, a]


def test_order_switch_disables_a_plugin(fakes):
    fakes("flip", JobOrder=lambda l, r: 1 if l.name == "b" else -1)
    raw = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: flip\n    enabledJobOrder: false\n'
    ssn = _session(raw=raw)
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_order(b, a) == -1  # fallback (creation), not the disabled plugin


def test_queue_order_fallback_creation_then_name(fakes):
    cache = make_cache(
        [make_node("n1")],
        queues=[make_queue("zq", creation=1), make_queue("aq", creation=1), make_queue("old", creation=0)],
    )
    fakes("none", JobOrder=lambda l, r: 0)
    ssn = open_session(cache, tiers_conf(["none"], actions="allocate"))
    qs = sorted(ssn.queues.values(), key=ssn.queue_key)
    assert [q.name for q in qs] == ["old", "aq", "zq"]


def test_task_order_fallback_role_index_uid():
    cache = make_cache(
        [make_node("n1")],
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("z", "j", role="worker", index=0),
            make_pod("y", "j", role="master", index=1),
            make_pod("x", "j", role="master", index=0),
            make_pod("w", "j", role="worker", index=0),
        ],
    )
    ssn = open_session(cache, tiers_conf([], actions="allocate"))
    tasks = sorted(ssn.jobs["default/j"].tasks.values(), key=ssn.task_key)
    assert [t.name for t in tasks] == ["x", "y", "w", "z"]


# ---------------------------------------------------------------------------- AND / OR


def test_job_ready_and_allocatable_are_and(fakes):
    fakes("fyes", JobReady=lambda j: True, Allocatable=lambda q, t: True)
    fakes("fno", JobReady=lambda j: False, Allocatable=lambda q, t: False)
    ssn = _session(["fyes"], ["fno"])
    job = ssn.jobs["default/a"]
    task = next(iter(job.tasks.values()))
    assert ssn.job_ready(job) is False
    assert ssn.allocatable(ssn.queues["default"], task) is False
    ssn = _session(["fyes"], ["fyes"])
    assert ssn.job_ready(job) is True
    assert ssn.allocatable(ssn.queues["default"], task) is True
    # Nothing registered: true.
    ssn = _session([])
    assert ssn.job_ready(job) is True


def test_overused_is_or(fakes):
    fakes("fyes", Overused=lambda q: True)
    fakes("fno", Overused=lambda q: False)
    q = "default"
    assert _session(["fno"], ["fyes"]).overused(_small_cache().queues[q]) is True
    assert _session(["fno", "fno"]).overused(_small_cache().queues[q]) is False
    assert _session([]).overused(_small_cache().queues[q]) is False


def test_first_answer_hooks_take_the_first_answer_in_tier_order(fakes):
    """OverusedReason, WithinDeserved and DeservedShares: a plugin that keeps no share for a queue
    answers None and the next one in tier order is asked (issue 37: overcommit and allocate ask
    these instead of reading proportion's or capacity's attributes)."""
    fakes("silent", OverusedReason=lambda q: None, WithinDeserved=lambda j: None, DeservedShares=lambda: None)
    fakes("agree", OverusedReason=lambda q: f"{q.name} is full", WithinDeserved=lambda j: True)
    fakes("refuse", OverusedReason=lambda q: "never read", WithinDeserved=lambda j: False)
    fakes("shares", DeservedShares=lambda: {"default": np.array([1.0])})
    ssn = _session(["silent"], ["agree", "refuse"], ["shares"])
    job, queue = ssn.jobs["default/a"], ssn.queues["default"]
    assert ssn.overused_reason(queue) == "default is full"
    assert ssn.within_deserved(job) is True
    assert ssn.deserved_shares()["default"].tolist() == [1.0]
    ssn = _session(["refuse", "agree"])
    assert ssn.within_deserved(job) is False and ssn.overused_reason(queue) == "never read"
    # nobody answers: no reason, not within, no shares
    ssn = _session(["silent"])
    assert ssn.overused_reason(queue) is None and ssn.within_deserved(job) is False and ssn.deserved_shares() == {}


def test_proportion_and_capacity_answer_within_deserved_through_the_session():
    """overcommit asks the session, not a plugin's attributes: proportion and capacity each answer
    from their own accounting (a small gang fits its queue's share, one larger than the cluster not)."""
    for plugin in ("proportion", "capacity"):
        cache = make_cache(
            [make_node("n1", cpu=8)],
            queues=[make_queue("a")],
            pgs=[
                make_pg("small", 1, queue="a", min_resources={"cpu": "1"}, phase="Pending"),
                make_pg("huge", 1, queue="a", min_resources={"cpu": "100"}, phase="Pending"),
            ],
            pods=[make_pod("s0", "small", cpu=1), make_pod("h0", "huge", cpu=100)],
        )
        ssn = open_session(cache, tiers_conf([plugin], actions="enqueue"))
        assert ssn.within_deserved(ssn.jobs["default/small"]) is True, plugin
        assert ssn.within_deserved(ssn.jobs["default/huge"]) is False, plugin
    # without a queue plugin nobody answers: overcommit alone decides
    ssn = open_session(cache, tiers_conf(["overcommit"], actions="enqueue"))
    assert ssn.within_deserved(ssn.jobs["default/small"]) is False


# ---------------------------------------------------------------------------- votes


@pytest.mark.parametrize(
    "tiers,expected",
    [
        ([["abstain"], ["reject"]], False),  # a Reject anywhere refuses
        ([["permit", "reject"]], False),  # even beside a Permit in the same tier
        ([["reject", "permit"]], False),
        ([["permit"], ["reject"]], True),  # a Permit in a tier decides; later tiers not asked
        ([["abstain"], ["permit"], ["reject"]], True),
        ([["abstain"], ["abstain"]], True),  # all abstain
        ([[]], True),  # nobody votes
    ],
)
def test_vote_combination(fakes, tiers, expected):
    fakes("permit", JobPipelined=lambda j: PERMIT, JobEnqueueable=lambda j: PERMIT)
    fakes("abstain", JobPipelined=lambda j: ABSTAIN, JobEnqueueable=lambda j: ABSTAIN)
    fakes("reject", JobPipelined=lambda j: REJECT, JobEnqueueable=lambda j: REJECT)
    ssn = _session(*tiers)
    job = ssn.jobs["default/a"]
    assert ssn.job_pipelined(job) is expected
    assert ssn.job_enqueueable(job) is expected


# ---------------------------------------------------------------------------- starving


@pytest.mark.parametrize(
    "tiers,expected",
    [
        ([["t", "f"]], False),  # AND within the tier
        ([["t", "t"]], True),
        ([["t"], ["f"]], True),  # only the first tier registering any counts
        ([["none"], ["f"]], False),
        ([["none"], ["t"]], True),
        ([["none"]], False),  # none registered
    ],
)
def test_job_starving_first_tier_and(fakes, tiers, expected):
    fakes("t", JobStarving=lambda j: True)
    fakes("f", JobStarving=lambda j: False)
    fakes("none", JobOrder=lambda l, r: 0)
    ssn = _session(*tiers)
    assert ssn.job_starving(ssn.jobs["default/a"]) is expected


# ---------------------------------------------------------------------------- victims


def _victim_fns(fakes):
    def by_names(*names):
        return lambda actor, cands: ([t for t in cands if t.name in names], PERMIT)

    fakes("all", Preemptable=lambda a, c: (list(c), PERMIT), Reclaimable=lambda a, c: (list(c), PERMIT))
    fakes("b0b1", Preemptable=by_names("b-0", "b-1"), Reclaimable=by_names("b-0", "b-1"))
    fakes("b1c0", Preemptable=by_names("b-1", "c-0"), Reclaimable=by_names("b-1", "c-0"))
    fakes("empty", Preemptable=lambda a, c: ([], PERMIT), Reclaimable=lambda a, c: ([], PERMIT))
    fakes("abstain", Preemptable=lambda a, c: ([], ABSTAIN), Reclaimable=lambda a, c: ([], ABSTAIN))
    fakes("abstain_all", Preemptable=lambda a, c: (list(c), ABSTAIN), Reclaimable=lambda a, c: (list(c), ABSTAIN))


@pytest.mark.parametrize(
    "tiers,expected",
    [
        ([["b0b1", "b1c0"]], ["b-1"]),  # intersection within a tier
        ([["all", "b1c0"]], ["b-1", "c-0"]),
        ([["b0b1", "empty"], ["all"]], []),  # an empty list means no victims at all
        ([["empty"], ["all"]], []),
        ([["abstain", "b0b1"]], ["b-0", "b-1"]),  # abstaining plugins are ignored
        ([["abstain_all"], ["b1c0"]], ["b-1", "c-0"]),  # a tier of abstainers passes to the next
        ([["b0b1"], ["b1c0"]], ["b-0", "b-1"]),  # the first tier with an answer decides
        ([["abstain"], ["abstain_all"]], []),  # nobody answers: no victims
    ],
)
def test_victim_selection(fakes, tiers, expected):
    _victim_fns(fakes)
    ssn = _session(*tiers)
    actor = ssn.jobs["default/a"].tasks["default/a-0"]
    cands = [t for j in ("b", "c") for t in ssn.jobs[f"default/{j}"].tasks.values()]
    cands.sort(key=lambda t: t.name)
    assert sorted(t.name for t in ssn.preemptable(actor, cands)) == expected
    assert sorted(t.name for t in ssn.reclaimable(actor, cands)) == expected


def test_victim_switch_turns_a_voter_off(fakes):
    _victim_fns(fakes)
    raw = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: empty\n    enablePreemptable: false\n  - name: b0b1\n'
    ssn = _session(raw=raw)
    actor = ssn.jobs["default/a"].tasks["default/a-0"]
    cands = list(ssn.jobs["default/b"].tasks.values())
    assert sorted(t.name for t in ssn.preemptable(actor, cands)) == ["b-0", "b-1"]
    # Reclaimable has its own switch, still on for "empty".
    assert ssn.reclaimable(actor, cands) == []


# ---------------------------------------------------------------------------- statement


ARRAYS = ("used", "releasing", "pipelined")


def _stmt_cache():
    return make_cache(
        [
            make_node("n1", 8, "16Gi"),
            make_node("n2", 8, "16Gi"),
            make_node("n3", 2, "4Gi", extra={"nvidia.com/gpu": 1}),
        ],
        pgs=[make_pg("run", 2), make_pg("new", 3)],
        pods=[
            make_pod("run-0", "run", cpu=2, node="n1", phase="Running"),
            make_pod("run-1", "run", cpu=1, node="n2", phase="Running"),
            make_pod("run-2", "run", cpu=1, node="n3", phase="Running", extra={"nvidia.com/gpu": 1}),
            make_pod("new-0", "new", cpu=1),
            make_pod("new-1", "new", cpu=2),
            make_pod("new-2", "new", cpu="500m", mem="512Mi"),
            make_pod("new-3", "new", cpu=None, mem=None),
        ],
    )


def _snapshot(ssn):
    arrays = {a: ssn.nodes.view(a).copy() for a in ARRAYS}
    statuses = {uid: (t.status, t.node) for j in ssn.jobs.values() for uid, t in j.tasks.items()}
    counts = {uid: list(j.counts) for uid, j in ssn.jobs.items()}
    node_tasks = [set(d) for d in ssn.nodes.tasks]
    return arrays, statuses, counts, node_tasks


def _assert_same(before, after):
    for a in ARRAYS:
        np.testing.assert_array_equal(before[0][a], after[0][a], err_msg=a)
    assert before[1:] == after[1:]


def test_statement_discard_restores_everything():
    cache = _stmt_cache()
    ssn = open_session(cache)  # default plugins: their event handlers run too
    before = _snapshot(ssn)
    shares_before = dict(ssn.plugins["drf"].share)
    run, new = ssn.jobs["default/run"], ssn.jobs["default/new"]
    stmt = Statement(ssn)
    stmt.evict(run.tasks["default/run-0"], Eviction(EvictionCause.PREEMPT, "preempt"))
    stmt.allocate(new.tasks["default/new-0"], 1)
    stmt.pipeline(new.tasks["default/new-1"], 0)
    stmt.allocate(new.tasks["default/new-2"], 2)
    assert run.tasks["default/run-0"].status == TaskStatus.RELEASING
    assert new.tasks["default/new-1"].status == TaskStatus.PIPELINED
    assert ssn.nodes.pipelined[0][0] == 2
    assert ssn.nodes.releasing[0][0] == 2
    assert len(stmt) == 4
    stmt.discard()
    assert len(stmt) == 0
    _assert_same(before, _snapshot(ssn))
    assert ssn.pipelined == []
    assert ssn.plugins["drf"].share == pytest.approx(shares_before)
    assert not cache.decisions
    cache.check_consistency()


OPS = st.lists(
    st.tuples(st.sampled_from(["allocate", "pipeline", "evict"]), st.integers(0, 6), st.integers(0, 2)),
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_statement_discard_restores_state_for_random_sequences(ops):
    cache = _stmt_cache()
    ssn = open_session(cache)
    before = _snapshot(ssn)
    tasks = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=lambda t: t.name)
    stmt = Statement(ssn)
    for op, ti, node in ops:
        task = tasks[ti]
        if op == "evict":
            if task.status == TaskStatus.RUNNING:
                stmt.evict(task, Eviction(EvictionCause.SHUFFLE, "test"))
        elif task.status == TaskStatus.PENDING:
            getattr(stmt, op)(task, node)
    stmt.discard()
    _assert_same(before, _snapshot(ssn))
    assert ssn.pipelined == []
    cache.check_consistency()


def test_statement_commit_binds_evicts_and_keeps_pipelines_until_close():
    cache = _stmt_cache()
    ssn = open_session(cache)
    run, new = ssn.jobs["default/run"], ssn.jobs["default/new"]
    stmt = Statement(ssn)
    stmt.evict(run.tasks["default/run-0"], Eviction(EvictionCause.PREEMPT, "preempted by new"))
    stmt.allocate(new.tasks["default/new-0"], 1)
    stmt.pipeline(new.tasks["default/new-1"], 0)
    stmt.commit()
    assert len(stmt) == 0
    assert cache.decisions.binds == [("default/new-0", "n2")]
    assert cache.decisions.evictions == [("default/run-0", Eviction(EvictionCause.PREEMPT, "preempted by new"))]
    assert new.tasks["default/new-0"].status == TaskStatus.BINDING
    assert run.tasks["default/run-0"].status == TaskStatus.RELEASING
    pipelined = new.tasks["default/new-1"]
    assert pipelined.status == TaskStatus.PIPELINED and pipelined.node == 0
    assert ssn.nodes.pipelined[0][0] == 2
    ssn.close()
    assert pipelined.status == TaskStatus.PENDING and pipelined.node == -1
    assert not ssn.nodes.view("pipelined").any()
    assert "default/new-1" not in ssn.nodes.tasks[0]
    # Binding and releasing survive the session.
    assert new.tasks["default/new-0"].status == TaskStatus.BINDING
    assert ssn.nodes.releasing[0][0] == 2
    assert new.counts[TaskStatus.PENDING] == 3


def test_session_close_discards_held_statements():
    cache = _stmt_cache()
    ssn = open_session(cache)
    before = _snapshot(ssn)
    new = ssn.jobs["default/new"]
    stmt = Statement(ssn)
    stmt.allocate(new.tasks["default/new-0"], 0)
    stmt.pipeline(new.tasks["default/new-1"], 1)
    ssn.held_statements.append(stmt)
    ssn.close()
    _assert_same(before, _snapshot(ssn))
    assert not cache.decisions.binds


def test_statement_merge():
    ssn = open_session(_stmt_cache())
    new = ssn.jobs["default/new"]
    a, b = Statement(ssn), Statement(ssn)
    a.allocate(new.tasks["default/new-0"], 0)
    b.allocate(new.tasks["default/new-1"], 1)
    a.merge(b)
    assert len(a) == 2 and len(b) == 0
    a.discard()
    assert new.counts[TaskStatus.PENDING] == 4


# ---------------------------------------------------------------------------- cache


def test_cache_widens_when_an_extended_resource_appears():
    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        queues=[make_queue("default", capability={"cpu": 8}, guarantee={"cpu": 1})],
        pgs=[make_pg("j", 1, min_resources={"cpu": 1})],
        pods=[make_pod("a", "j", node="n1", phase="Running")],
    )
    assert cache.index.names == ["cpu", "memory", "pods"]
    cache.on_node(make_node("g1", 8, "32Gi", extra={"nvidia.com/gpu": 4}))
    assert cache.index.names[3] == "nvidia.com/gpu"
    w = len(cache.index)
    assert cache.nodes.allocatable.shape[1] == w and cache.nodes.used.shape[1] == w
    assert cache.nodes.allocatable[cache.nodes.pos["g1"], 3] == 4
    assert cache.nodes.allocatable[cache.nodes.pos["n1"], 3] == 0
    assert len(cache.tasks["default/a"].resreq) == w
    assert len(cache.jobs["default/j"].min_resources) == w
    q = cache.queues["default"]
    assert q.capability[3] == np.inf and q.capability[0] == 8
    assert q.guarantee[3] == 0 and q.guarantee[0] == 1
    # A pod asking for a new resource widens too.
    cache.on_pod(make_pod("b", "j", extra={"example.com/fpga": 1}))
    assert cache.index.names[-1] == "example.com/fpga"
    assert len(cache.tasks["default/a"].resreq) == len(cache.index)
    assert cache.tasks["default/b"].resreq[-1] == 1
    cache.check_consistency()
    # And a session over the widened cache schedules with the new columns.
    cache.on_pod(make_pod("c", "j", cpu=1, extra={"nvidia.com/gpu": 2}))
    ssn = open_session(cache)
    assert ssn.total.shape == (len(cache.index),)


def test_cache_node_update_and_delete():
    cache = make_cache([make_node("n1", 4, "8Gi", labels={"zone": "a"})])
    v = cache.nodes.version
    cache.on_node(make_node("n1", 6, "8Gi", labels={"zone": "b"}))
    assert len(cache.nodes) == 1
    assert cache.nodes.allocatable[0, 0] == 6
    assert cache.nodes.labels[0]["zone"] == "b"
    assert cache.nodes.labels[0]["kubernetes.io/hostname"] == "n1"
    assert cache.nodes.version > v
    cache.on_node(make_node("n1", 6, "8Gi", unschedulable=True))
    assert not cache.nodes.schedulable[0]
    cache.on_node(make_node("n1", 6, "8Gi", ready=False))
    assert not cache.nodes.schedulable[0]
    cache.on_node(make_node("n1", 6, "8Gi"))
    assert cache.nodes.schedulable[0]
    cache.on_node(make_node("n1"), deleted=True)
    assert not cache.nodes.schedulable[0] and cache.nodes.allocatable[0, 0] == 0
    assert cache.nodes.allocatable[0, 2] == 0
    # Default pod capacity when the node does not say.
    cache.on_node(make_node("n2"))
    assert cache.nodes.allocatable[cache.nodes.pos["n2"], 2] == 110


def test_foreign_pods_count_on_nodes():
    cache = make_cache([make_node("n1", 4, "8Gi")])
    other = make_pod("sys", None, cpu=3, node="n1", phase="Running", scheduler="default-scheduler")
    cache.on_pod(other)
    assert cache.tasks == {}
    assert cache.nodes.used[0, 0] == 3 and cache.nodes.used[0, 2] == 1
    cache.check_consistency()
    # Updating replaces (no double count); finishing frees.
    cache.on_pod(other)
    assert cache.nodes.used[0, 0] == 3
    cache.on_pod(make_pod("sys", None, cpu=3, node="n1", phase="Succeeded", scheduler="default-scheduler"))
    assert cache.nodes.used[0, 0] == 0
    cache.on_pod(other)
    cache.on_pod(other, deleted=True)
    assert cache.nodes.used[0, 0] == 0
    # Unscheduled foreign pods take nothing.
    cache.on_pod(make_pod("p", None, cpu=3, scheduler="default-scheduler"))
    assert cache.nodes.used[0, 0] == 0
    cache.check_consistency()


def test_foreign_pod_blocks_scheduling():
    from scheduler_helpers import run_cycle

    cache = make_cache(
        [make_node("n1", 4, "8Gi")],
        pgs=[make_pg("j", 1)],
        pods=[
            make_pod("sys", None, cpu=3, node="n1", phase="Running", scheduler="default-scheduler"),
            make_pod("a", "j", cpu=2),
        ],
    )
    _, d = run_cycle(cache)
    assert d.binds == []


def test_pods_without_group_or_of_other_schedulers_are_not_tasks():
    cache = make_cache(
        [make_node("n1")], pgs=[make_pg("j", 1)], pods=[make_pod("a", None), make_pod("b", "j", scheduler="other")]
    )
    assert cache.tasks == {}
    cache.on_pod(make_pod("c", "j", scheduler="volcano"))
    assert set(cache.tasks) == {"default/c"}


def test_pod_lifecycle_keeps_arrays_consistent():
    cache = make_cache([make_node("n1", 4, "8Gi"), make_node("n2", 4, "8Gi")], pgs=[make_pg("j", 1)])
    steps = [
        (make_pod("a", "j", cpu=2), TaskStatus.PENDING, None),
        (make_pod("a", "j", cpu=2, node="n1"), TaskStatus.BOUND, "n1"),
        (make_pod("a", "j", cpu=2, node="n1", phase="Running"), TaskStatus.RUNNING, "n1"),
        (make_pod("a", "j", cpu=2, node="n1", phase="Running", deleting=True), TaskStatus.RELEASING, "n1"),
        (make_pod("a", "j", cpu=2, node="n1", phase="Running"), TaskStatus.RUNNING, "n1"),
        (make_pod("a", "j", cpu=2, node="n2", phase="Running"), TaskStatus.RUNNING, "n2"),
        (make_pod("a", "j", cpu=2, node="n2", phase="Running", deleting=True), TaskStatus.RELEASING, "n2"),
        (make_pod("a", "j", cpu=2, node="n2", phase="Failed"), TaskStatus.FAILED, None),
        (make_pod("a", "j", cpu=2), TaskStatus.PENDING, None),
        (make_pod("a", "j", cpu=2, node="n1", phase="Succeeded"), TaskStatus.SUCCEEDED, None),
    ]
    job = cache.jobs["default/j"]
    for pod, status, node in steps:
        cache.on_pod(pod)
        task = cache.tasks["default/a"]
        assert task.status == status
        assert task.node == (cache.nodes.pos[node] if node else -1)
        assert sum(job.counts) == 1 and job.counts[status] == 1
        cache.check_consistency()
        expected_rel = 2.0 if status == TaskStatus.RELEASING else 0.0
        assert cache.nodes.view("releasing")[:, 0].sum() == expected_rel
        assert cache.nodes.view("used")[:, 0].sum() == (2.0 if node else 0.0)
    cache.on_pod(make_pod("a", "j", cpu=2, node="n1", phase="Running", deleting=True))
    cache.on_pod(make_pod("a", "j", cpu=2, node="n1", phase="Running", deleting=True), deleted=True)
    assert "default/a" not in cache.tasks
    assert not cache.nodes.view("used").any() and not cache.nodes.view("releasing").any()
    cache.check_consistency()


def test_pod_moving_to_another_group():
    cache = make_cache([make_node("n1")], pgs=[make_pg("j", 1), make_pg("k", 1)])
    cache.on_pod(make_pod("a", "j", node="n1", phase="Running"))
    cache.on_pod(make_pod("a", "k", node="n1", phase="Running"))
    assert "default/a" in cache.jobs["default/k"].tasks
    assert "default/a" not in cache.jobs["default/j"].tasks
    assert cache.jobs["default/j"].counts[TaskStatus.RUNNING] == 0
    cache.check_consistency()


def test_podgroup_delete_and_session_snapshot_rule():
    cache = make_cache(
        [make_node("n1")],
        pgs=[make_pg("j", 1), make_pg("orphan", 1, queue="missing")],
        pods=[make_pod("a", "j"), make_pod("b", "nopg")],
    )
    ssn = open_session(cache)
    # Only jobs with a PodGroup and an existing queue are scheduled.
    assert set(ssn.jobs) == {"default/j"}
    cache.on_podgroup(make_pg("j", 1), deleted=True)
    assert cache.jobs["default/j"].pg is None  # kept while it has tasks
    cache.on_pod(make_pod("a", "j"), deleted=True)
    assert "default/j" not in cache.jobs


def test_priority_classes_set_job_and_task_priority():
    from scheduler_helpers import make_priority_class

    cache = make_cache(
        [make_node("n1")],
        pgs=[make_pg("j", 1, priority_class="high"), make_pg("k", 1)],
        pods=[
            make_pod("a", "j", priority_class="high"),
            make_pod("b", "k"),
            make_pod("c", "k", annotations={"volcano.sh/task-priority": "7"}),
        ],
        priority_classes=[make_priority_class("high", 1000), make_priority_class("low", 5, global_default=True)],
    )
    assert cache.jobs["default/j"].priority == 1000
    assert cache.jobs["default/k"].priority == 5
    assert cache.tasks["default/a"].priority == 1000
    assert cache.tasks["default/b"].priority == 5
    assert cache.tasks["default/c"].priority == 7


def test_task_flags_from_pod():
    cache = make_cache(
        [make_node("n1")],
        pgs=[make_pg("j", 1, namespace="kube-system"), make_pg("k", 1)],
        pods=[
            make_pod("a", "j", namespace="kube-system"),
            make_pod("b", "k", priority_class="system-node-critical"),
            make_pod("c", "k", cpu=None, mem=None, annotations={"volcano.sh/preemptable": "false"}),
        ],
    )
    a, b, c = (cache.tasks[k] for k in ("kube-system/a", "default/b", "default/c"))
    assert a.critical and b.critical and not c.critical
    assert c.best_effort and not a.best_effort
    assert not c.preemptable and a.preemptable
    assert c.resreq[2] == 1  # every pod takes a pod slot


POD_EVENTS = st.lists(
    st.tuples(
        st.integers(0, 3),  # pod
        st.sampled_from([None, "n1", "n2", "gone"]),  # node ("gone" is not a known node)
        st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
        st.booleans(),  # deleting
        st.booleans(),  # deleted
        st.sampled_from(["j", "k", None]),  # group
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(events=POD_EVENTS)
def test_random_pod_events_keep_cache_consistent(events):
    cache = make_cache([make_node("n1", 8, "16Gi"), make_node("n2", 8, "16Gi")], pgs=[make_pg("j", 1), make_pg("k", 1)])
    for p, node, phase, deleting, deleted, group in events:
        # Pod 3 belongs to another scheduler (schedulerName is immutable).
        sched = "default-scheduler" if p == 3 else "lavaflow"
        pod = make_pod(f"p{p}", group, cpu=p + 1, node=node, phase=phase, deleting=deleting, scheduler=sched)
        cache.on_pod(pod, deleted=deleted)
        cache.check_consistency()
        for job in cache.jobs.values():
            assert sum(job.counts) == len(job.tasks)
            for s in TaskStatus:
                assert job.counts[s] == sum(1 for t in job.tasks.values() if t.status == s)
    assert (cache.nodes.view("used") >= -1e-9).all()
    assert (cache.nodes.view("releasing") >= -1e-9).all()


PG_AND_POD_EVENTS = st.lists(
    st.one_of(
        st.tuples(
            st.just("pod"),
            st.integers(0, 3),
            st.sampled_from([None, "n1"]),
            st.sampled_from(["Pending", "Running", "Succeeded"]),
            st.booleans(),
            st.sampled_from(["j", "k", "m"]),
        ),
        st.tuples(st.just("pg"), st.sampled_from(["j", "k", "m"]), st.booleans()),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(events=PG_AND_POD_EVENTS)
def test_jobs_with_a_podgroup_and_orphans_follow_events_in_first_seen_order(events):
    """Sessions read cache.pg_jobs (jobs with a PodGroup) and the queue write-back reads
    cache.orphans (jobs without one that hold resources): both must equal what a scan of
    cache.jobs gives, in its order, whatever the order of PodGroup and pod events."""
    cache = make_cache([make_node("n1", 64, "128Gi")])
    for ev in events:
        if ev[0] == "pod":
            _, p, node, phase, deleted, group = ev
            cache.on_pod(make_pod(f"p{p}", group, node=node, phase=phase), deleted=deleted)
        else:
            _, name, deleted = ev
            cache.on_podgroup(make_pg(name, 1), deleted=deleted)
        cache.check_consistency()
        ssn = open_session(cache)
        assert list(ssn.jobs) == [u for u, j in cache.jobs.items() if j.pg is not None]


def test_pods_bound_to_a_node_seen_later_count_once_the_node_arrives():
    # Informers list pods and nodes concurrently: a bound pod may arrive before its node.
    from lavaflow.scheduler.cache import DEFAULT_MAX_PODS, SchedulerCache
    from scheduler_helpers import make_node, make_pg, make_pod, make_queue

    cache = SchedulerCache(kubelet_max_pods=DEFAULT_MAX_PODS)
    cache.on_queue(make_queue("default"))
    cache.on_podgroup(make_pg("j", 1))
    cache.on_pod(make_pod("ours", "j", cpu=2, node="n1", phase="Running"))
    cache.on_pod(make_pod("theirs", None, cpu=1, node="n1", phase="Running", scheduler="default-scheduler"))
    cache.on_pod(make_pod("gone", "j", cpu=1, node="n1", phase="Running"))
    cache.on_pod(make_pod("gone", "j", cpu=1, node="n1", phase="Running"), deleted=True)
    cache.on_node(make_node("n1", 8, "32Gi"))
    i = cache.nodes.pos["n1"]
    assert cache.nodes.used[i][0] == 3.0  # 2 of ours + 1 of another scheduler; the deleted pod is gone
    cache.check_consistency()


def test_on_bind_receives_each_jobs_binds_as_its_statement_commits():
    """A backend that binds while the session goes on (Kubernetes) sets cache.on_bind: the binds
    reach it, in commit order, before the session ends, and not through decisions.binds."""
    from scheduler_helpers import run_cycle

    cache = make_cache(
        [make_node("n1", 8, "16Gi")],
        pgs=[make_pg("j1", 2), make_pg("j2", 1)],
        pods=[make_pod("a", "j1", cpu=1), make_pod("b", "j1", cpu=1), make_pod("c", "j2", cpu=1)],
    )
    seen: list[tuple[str, str]] = []
    cache.on_bind = lambda key, node: seen.append((key, node))
    _, d = run_cycle(cache)
    assert sorted(seen) == [("default/a", "n1"), ("default/b", "n1"), ("default/c", "n1")]
    order = [k for k, _ in seen]
    assert abs(order.index("default/a") - order.index("default/b")) == 1  # a gang's binds leave together
    assert d.binds == []


def test_pod_signature_is_equal_exactly_when_the_scheduling_constraints_are():
    """The signature keys the static predicate and score caches: pods with the same node selector,
    node affinity and tolerations share it, and any difference in them (a toleration's operator,
    seconds or order included) gives another."""
    cache = make_cache([make_node("n1")], pgs=[make_pg("j", 1)])
    not_ready = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    variants = {
        "plain": {},
        "sel": {"node_selector": {"zone": "a", "disk": "ssd"}},
        "sel-other-order": {"node_selector": {"disk": "ssd", "zone": "a"}},
        "tol": {"tolerations": [not_ready]},
        "tol-seconds": {"tolerations": [{**not_ready, "tolerationSeconds": 300}]},
        "tol-equal": {"tolerations": [{**not_ready, "operator": "Equal"}]},
        "tol-two": {"tolerations": [not_ready, {"key": "gpu", "operator": "Exists"}]},
        "tol-two-swapped": {"tolerations": [{"key": "gpu", "operator": "Exists"}, not_ready]},
        "aff": {"affinity": aff},
        "aff-tol": {"affinity": aff, "tolerations": [not_ready]},
    }
    sig = {}
    for name, kw in variants.items():
        for copy in ("a", "b"):  # two pods each: separate spec objects
            cache.on_pod(make_pod(f"{name}-{copy}", "j", **kw))
        a, b = cache.tasks[f"default/{name}-a"].signature, cache.tasks[f"default/{name}-b"].signature
        assert a == b and hash(a) == hash(b), name
        sig[name] = a
    assert sig["sel"] == sig["sel-other-order"]  # a selector is a map: its order does not matter
    distinct = [n for n in variants if n != "sel-other-order"]
    assert len({sig[n] for n in distinct}) == len(distinct)


def test_a_session_is_freed_without_the_cycle_collector_once_the_next_opens():
    """Plugin callbacks close over their session: the scheduler unties a session when it opens the
    next one, so that reference counting frees it (and its plugins' per-session state) instead of
    leaving it to the collector; what is read after a session (its log, plugins) stays until then."""
    import gc
    import weakref

    from lavaflow.scheduler.scheduler import Scheduler

    cache = make_cache(
        nodes=[make_node("n1", cpu=4)],
        pgs=[make_pg("pg1", min_member=1)],
        pods=[make_pod("p1", group="pg1")],
    )
    sched = Scheduler(cache, conf_of(None), reraise=True)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        first = sched.run_once(0.0)
        assert first.log and "proportion" in first.plugins
        assert first.fns  # the finished session still holds its callbacks until the next one opens
        ref = weakref.ref(first)
        plugin_ref = weakref.ref(first.plugins["gang"])
        del first
        assert ref() is not None  # the scheduler still holds it
        second = sched.run_once(1.0)
        assert ref() is None and plugin_ref() is None
        assert second.fns  # the new session is whole
    finally:
        if was_enabled:
            gc.enable()


def test_jobs_token_stands_only_while_no_job_changes():
    """Session.jobs_token: the same from one session to the next exactly while the session's jobs
    are the same objects at the same versions; what plugins keep under it follows each change."""
    cache = make_cache(
        [make_node("n1", cpu=8)],
        pgs=[make_pg("a", 1), make_pg("b", 1)],
        pods=[make_pod("a0", "a"), make_pod("b0", "b", cpu=2)],
    )
    first = open_session(cache)
    second = open_session(cache)
    assert second.jobs_token == first.jobs_token
    assert "proportion" in second.plugins and "proportion" in first.plugins
    assert (
        second.plugins["proportion"].attrs["default"].request.tolist()
        == first.plugins["proportion"].attrs["default"].request.tolist()
    )
    assert second.plugins["proportion"].attrs["default"].allocated[0] == 0.0

    assert second.jobs_previous_token is None and not second.jobs_changed

    # A task placed (a new version of its job): a new token, and the queue's allocation shows it.
    cache.on_pod(make_pod("b0", "b", cpu=2, node="n1", phase="Running"))
    third = open_session(cache)
    assert third.jobs_token != second.jobs_token
    # the same jobs: the last token and the job that changed since, for plugins to revisit alone
    assert third.jobs_previous_token == second.jobs_token and third.jobs_changed == {"default/b"}
    assert "proportion" in third.plugins
    assert third.plugins["proportion"].attrs["default"].allocated[0] == 2.0
    drf = third.plugins["drf"]
    assert drf.allocated["default/b"][0] == 2.0 and drf.share["default/b"] > 0.0  # type: ignore[attr-defined]
    assert drf.allocated["default/a"][0] == 0.0 and drf.share["default/a"] == 0.0  # type: ignore[attr-defined]
    assert open_session(cache).jobs_token == third.jobs_token

    # A PodGroup status write is a new version too; so is a new job, and a job that goes.
    cache.on_podgroup(make_pg("a", 1, phase="Running"))
    fourth = open_session(cache)
    assert fourth.jobs_token != third.jobs_token
    assert fourth.jobs_changed == {"default/a"}
    cache.on_podgroup(make_pg("c", 1))
    fifth = open_session(cache)
    assert fifth.jobs_token != fourth.jobs_token and "default/c" in fifth.jobs
    assert fifth.jobs_previous_token is None  # other jobs: every plugin visits them all
    cache.on_podgroup(make_pg("c", 1), deleted=True)
    sixth = open_session(cache)
    assert sixth.jobs_token != fifth.jobs_token and "default/c" not in sixth.jobs
