"""The elastic unit's state: what the ``elastic`` plugin opens each session and the ``elastic``
action reads and changes, what is kept between sessions (``ElasticState``, in the cache), and the
configuration resolved once (``ElasticSetup``: the policy and the plugin's arguments).

The plugin (:mod:`.plugin`) and the action (:mod:`.action`) are the two halves of elastic
scheduling; they meet here, and nowhere else in the scheduler is either imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ...elastic import spec as es
from ...elastic.learned import ProfileBook
from ..framework.memo import Kept
from ..model import OCCUPYING, JobInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ...elastic.policies import Policy
    from ..framework.conf import PluginOption, SchedulerConfiguration

ALIVE = frozenset(OCCUPYING - {TaskStatus.RELEASING})


def parse_bool(value: Any) -> bool:
    """A boolean plugin argument (YAML true/false, or the strings "true"/"false")."""
    if isinstance(value, bool):
        return value
    if value is None or value == "":
        return False
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def parse_seconds(value: Any, default: float) -> float:
    if value is None or value == "":
        return default
    if isinstance(value, (int, float)):
        return float(value)
    return es.parse_duration(str(value))


@dataclass
class JobState:
    """What the elastic scheduler remembers about one job between sessions."""

    first_start: float | None = None
    run_start: float | None = None
    last_run_len: float = 0.0
    wait_since: float | None = None
    queue_offset: float = 0.0  # attained service at the last Tiresias promotion
    queue_level: int = 0  # Tiresias queue the job was in at the last session
    queue_entered: float | None = None  # when it entered that queue (arrival, demotion, promotion)
    running_time: float = 0.0
    waiting_time: float = 0.0
    seen_at: float | None = None
    target: dict[str, int] = field(default_factory=dict)  # node name -> workers
    target_type: str | None = None
    reason: str = ""
    stuck_since: float | None = None
    # counters (reported by the backends)
    resizes: int = 0
    halts: int = 0
    migrations: int = 0
    restarts: int = 0  # allocation changes after the first start (the Pollux artifact's count)


class Signature(NamedTuple):
    """What an elastic job's parts are made of besides its annotations, compared whole."""

    pg: int  # id of the PodGroup
    owners: int  # id of its owner references
    min_available: int
    task_ids: tuple[int, ...]  # ids of the job's TaskInfo objects, in order
    task_states: tuple[tuple[TaskStatus, int], ...]  # (status, node) of each task
    col: int  # GPU column
    label: str  # GPU type label


class Parsed(NamedTuple):
    """What a PodGroup's annotations give (``lavaflow.io/*``)."""

    speed: Any  # the speed spec
    knobs: Any
    progress: Any  # the last progress report, or None
    workers: tuple[int, int] | None  # the worker range


class JobParts(NamedTuple):
    """The parts of an elastic job that follow from its annotations and tasks, as a session
    builds its ElasticJob from them."""

    speed: Any  # the speed spec
    knobs: Any
    progress: Any
    workers: list[TaskInfo]  # GPU workers by index
    others: list[TaskInfo]
    gpus_per_worker: float  # as the policy reads it
    min_workers: int
    max_workers: int
    placement: dict[str, int]  # node name -> alive workers
    gpu_type: str | None
    pinned: str | None  # the GPU type its pods are pinned to
    name: str
    shape: tuple[int, ...]  # the placement's worker counts, largest first
    alive: int  # alive workers
    requested: int


@dataclass(slots=True)
class FixedProgress:
    """(remaining work, attained service) of ``parts`` while they do not depend on the time."""

    parts: JobParts
    remaining: float
    attained: float


@dataclass(slots=True, eq=False)
class _Static:
    """What an elastic job's PodGroup and tasks give, kept between sessions under ``sig``."""

    sig: Signature
    job: JobInfo  # the JobInfo and its version at which ``sig`` was last seen to hold
    version: int
    pg: Any  # the PodGroup, a resourceVersion of it with the annotations ``ann`` ``parsed`` was read from
    rv: str | None
    ann: dict[str, str]  # (a copy)
    col: int
    label: str
    parsed: Parsed  # from the annotations
    ids: tuple[int, ...]  # ids of the job's TaskInfo objects, in order, when ``split`` was made
    split: tuple[list[TaskInfo], list[TaskInfo], float]  # (workers by index, other tasks, GPUs per worker)
    tasks_version: int  # the job's tasks_version when ``sig`` was last seen to hold
    parts: JobParts
    # The ElasticJob the last session built from ``parts`` (None before one was): while the job's
    # version, PodGroup and resourceVersion stand, the next session refreshes only what depends
    # on the time (remaining work, attained service) and what actions may have changed.
    ej: ElasticJob | None = None
    # while they do not depend on the time: no worker runs, or no progress report gives a time
    # to extrapolate from (``_progress``).
    fixed: FixedProgress | None = None


# (name, GPUs, type) of every schedulable GPU node: compared between sessions to see nodes change.
GpuNodes = tuple[tuple[str, float, str], ...]


@dataclass(slots=True)
class TiresiasMarks:
    """The policy's Tiresias thresholds and promotion factor, and the thresholds less their
    tolerance as the elastic action compares attained service with them."""

    policy: Any
    thresholds: tuple[float, ...]
    knob: float
    marks: tuple[float, ...]


@dataclass(slots=True)
class GpuRows:
    """The schedulable GPU nodes under ``key`` (NodeSet version, nodes, column, label): their
    node indices and (index, GPUs, name, type) of each."""

    key: tuple[int, int, int, str]
    live: list[int]
    rows: list[tuple[int, float, str, str]]


@dataclass(slots=True)
class CapacityKept:
    """The elastic action's ``_capacity`` answer, and the GPU rows (by identity), elastic usage
    (by identity, or equal) and node usage (bytes) it was made of."""

    rows: GpuRows
    elastic_used: dict[int, float]
    node_used: bytes
    cap: dict[str, int]
    nodes: list[tuple[str, int, str]]


@dataclass
class ElasticState:
    """Kept in ``cache.plugin_memo['elastic']``."""

    last_resched: float = -math.inf
    due: float | None = None  # a reschedule is wanted at this time
    known: frozenset[str] = frozenset()
    known_learned: frozenset[tuple[str, int]] = frozenset()  # (job, most workers measured) at the last reschedule
    node_version: GpuNodes | int = -1  # -1 before the first session
    jobs: dict[str, JobState] = field(default_factory=dict)
    # (id of the speed, type, max workers, GPUs per node, training phase) -> the rates for 0..max
    # workers, kept under the speed (its identity)
    curves: dict[tuple[int, str, int, int, Any], Kept[tuple[float, ...]]] = field(default_factory=dict)
    # the same key (with a worker count for the type) -> its rate: rate_for's answers, as curves
    rates_for: dict[tuple[int, str, int, int, Any], Kept[float]] = field(default_factory=dict)
    reschedules: int = 0
    adopted: bool = False
    profiles: ProfileBook = field(default_factory=ProfileBook)  # profile groups' shared measurements
    static: dict[str, _Static] = field(default_factory=dict)  # job uid -> what its PodGroup and tasks give
    node_types: dict[Any, Any] = field(default_factory=dict)  # node index -> GPU type, and "version"
    gpu_nodes: Kept[GpuNodes] | None = None  # under (NodeSet version, column, label)
    tiresias: TiresiasMarks | None = None
    # placement's Node for each (name, free GPUs, type) a reschedule has seen (they are immutable)
    placement_nodes: dict[tuple[str, int, str], Any] = field(default_factory=dict)
    # place()'s answer (placement, migrations) per (GPU node rows of a type, current placement,
    # requests, mode), as the elastic action asked it
    placements: dict[tuple[Any, ...], tuple[dict[str, dict[str, int]], dict[str, int]]] = field(default_factory=dict)
    gpu_rows: GpuRows | None = None
    jobs_removed: int = -1  # the cache's ``jobs_removed`` when ``jobs`` was last cleared of jobs it lost
    capacity: CapacityKept | None = None
    # (What follows the session's jobs is kept in framework/memo.py's JobsRecords: the plugin's
    # OPENED, the action's ELASTIC_USED and RECONCILE_ORDER.)


@dataclass(slots=True)
class ElasticJob:
    """One elastic job as this session sees it."""

    info: JobInfo
    name: str  # namespace/job name, for the policy (ties are broken by name)
    speed: es.SpeedSpec
    min_workers: int
    max_workers: int
    requested: int
    priority: int
    pinned: str | None
    workers: list[TaskInfo]  # GPU tasks by index
    others: list[TaskInfo]  # the job's other tasks (launcher, master, ...)
    gpus_per_worker: float
    placement: dict[str, int]  # node name -> alive workers
    gpu_type: str | None
    attained: float
    state: JobState
    current: int  # alive workers: the sum of ``placement``, read many times
    placement_seen: dict[str, int] | None = None
    valid: Kept[tuple[bool, str]] | None = None  # job_valid's last answer, under what it says
    # The remaining work (see ``remaining``): ``left`` once known; until then ``left_at`` works it
    # out. Extrapolating a running job's progress to the session's time costs a walk over its
    # training phases, and only a reschedule reads it (most sessions have none).
    left: float | None = None
    left_at: Callable[[], float] | None = None

    @property
    def remaining(self) -> float:
        """Remaining work units at the session's time (worked out when first read)."""
        left = self.left
        if left is None:
            assert self.left_at is not None  # (one of the two is always set)
            left = self.left = self.left_at()
        return left

    def set_placement(self, placement: dict[str, int]) -> None:
        """Replace the placement (never change it in place: ``current`` follows it here)."""
        self.placement = placement
        self.current = sum(placement.values())


class ElasticView(Protocol):
    """What the elastic action reads of the session's elastic plugin (it finds the plugin by name
    in ``ssn.plugins`` and never imports its module): the jobs it opened, the state kept between
    sessions, the resolved configuration, and the speed curves and node types it works out."""

    jobs: dict[str, ElasticJob]
    state: ElasticState | None
    policy: Policy
    interval: float
    gpu_col: int | None
    type_label: str

    def node_type(self, i: int) -> str: ...

    def curves(self, ej: ElasticJob, types: list[str], gpus_per_node: int) -> dict[str, tuple[float, ...]]: ...

    def rate_for(self, ej: ElasticJob, gpu_type: str, n: int, gpus_per_node: int) -> float: ...


@dataclass(frozen=True)
class ElasticSetup:
    """The elastic plugin's arguments, resolved once per distinct set of arguments: the policy
    (policies are stateless, so one serves every session), its interval, the resize cost, the GPU
    type label and resource, the oracle switch and profile sharing. The plugin, the simulator and
    the command line read this one object (:func:`elastic_setup`, :func:`conf_elastic_setup`)."""

    policy_name: str
    resize_cost: float
    type_label: str
    gpu_resource: str
    policy: Policy
    interval: float
    oracle: bool
    shared_profiles: bool

    @property
    def clairvoyant(self) -> bool:
        """Whether the policy reads a job's remaining work (its length known in advance)."""
        return bool(getattr(self.policy, "clairvoyant", self.policy.needs_info))


_SETUPS: dict[tuple[tuple[str, str], ...], ElasticSetup] = {}


def elastic_setup(a: dict[str, Any]) -> ElasticSetup:
    """The :class:`ElasticSetup` of the plugin's arguments ``a`` (resolved on first sight)."""
    key = tuple(sorted((str(k), repr(v)) for k, v in a.items()))
    hit = _SETUPS.get(key)
    if hit is None:
        from ...elastic.policies import make_policy

        name = str(a.get("elastic.policy", "Lavaflow"))
        cost = parse_seconds(a.get("elastic.resizeCost"), 30.0)
        params = {k[len("elastic.policy.") :]: v for k, v in a.items() if k.startswith("elastic.policy.")}
        oracle = parse_bool(a.get("elastic.oracle"))
        policy = make_policy(name, learned=not oracle, resize_cost=cost, **params)
        # The policy's own scheduling tick (60 s for the literature Tiresias) unless configured.
        own = policy.default_interval
        hit = _SETUPS[key] = ElasticSetup(
            policy_name=name,
            resize_cost=cost,
            type_label=str(a.get("elastic.gpuTypeLabel", "lavaflow.io/accelerator")),
            gpu_resource=str(a.get("elastic.gpuResource", es.DEFAULT_GPU_RESOURCE)),
            policy=policy,
            interval=parse_seconds(a.get("elastic.resizeInterval"), own if own is not None else 30.0),
            oracle=oracle,
            shared_profiles=policy.shares_profiles
            if a.get("elastic.sharedProfiles") is None
            else parse_bool(a["elastic.sharedProfiles"]),
        )
    return hit


def elastic_option(conf: SchedulerConfiguration) -> PluginOption | None:
    """The ``elastic`` plugin's entry of a configuration that schedules elastically (the plugin in a
    tier and the action in ``actions``); None otherwise."""
    if "elastic" not in conf.action_names:
        return None
    return next((p for t in conf.tiers for p in t.plugins if p.name == "elastic"), None)


def conf_elastic_setup(conf: SchedulerConfiguration) -> ElasticSetup | None:
    """The :class:`ElasticSetup` of a configuration, None when it does not schedule elastically."""
    opt = elastic_option(conf)
    return None if opt is None else elastic_setup(opt.arguments)
