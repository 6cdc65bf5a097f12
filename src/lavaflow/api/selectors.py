"""Kubernetes matching semantics: label and node selectors, taints, pod requests.

Every function here is pure and mirrors what the Kubernetes scheduler does:

* label selectors follow ``metav1.LabelSelectorAsSelector`` and
  ``labels.Requirement.Matches``;
* node selectors and node affinity follow ``k8s.io/component-helpers``
  (``nodeaffinity.LazyErrorNodeSelector``, ``RequiredNodeAffinity`` and
  ``PreferredSchedulingTerms``);
* tolerations follow ``Toleration.ToleratesTaint`` and the TaintToleration
  plugin;
* :func:`pod_requests` follows ``resourcehelper.PodRequests`` applied to a
  pod after API defaulting (a missing request defaults to the limit).

Structurally invalid requirements that Kubernetes refuses to turn into a
selector (``In``/``NotIn`` without values, ``Exists``/``DoesNotExist`` with
values, ``Gt``/``Lt`` without exactly one integer value, a ``matchFields``
requirement on anything but ``metadata.name`` or with an operator other than
``In``/``NotIn`` or without exactly one value) match nothing, as the scheduler
treats the parse error as "no match".  The syntax of label keys and values is
left to API validation and is not re-checked here.

These functions run per pod and per node in the simulator, so they avoid
building intermediate objects on their hot paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from .core import (
    Container,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSpec,
    Taint,
    Toleration,
)

__all__ = [
    "label_selector_matches",
    "label_selector_requirement_matches",
    "node_selector_requirement_matches",
    "node_field_requirement_matches",
    "node_selector_term_matches",
    "node_selector_matches",
    "pod_fits_node_labels",
    "preferred_node_affinity_score",
    "tolerates",
    "tolerations_tolerate_taint",
    "first_untolerated_taint",
    "count_intolerable_prefer_no_schedule",
    "container_requests",
    "pod_requests",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NODE_NAME_FIELD = "metadata.name"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def _parse_int64(text: str) -> int | None:
    """Parse like Go's ``strconv.ParseInt(text, 10, 64)``; ``None`` on error.

    Accepts an optional sign followed by ASCII digits only (no whitespace, no
    underscores), within the signed 64-bit range.
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value


# --- label selectors -------------------------------------------------------


def label_selector_requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Whether one ``matchExpressions`` entry of a LabelSelector matches ``labels``.

    ``In``: the key is present and its value is listed.  ``NotIn``: the key is
    absent or its value is not listed.  ``Exists`` / ``DoesNotExist``: the key
    is present / absent.  An invalid requirement (``In``/``NotIn`` with no
    values, ``Exists``/``DoesNotExist`` with values, unknown operator) matches
    nothing.
    """
    op = req.operator
    values = req.values
    if op == "In":
        if not values:
            return False
        value = labels.get(req.key)
        return value is not None and value in values
    if op == "NotIn":
        if not values:
            return False
        value = labels.get(req.key)
        return value is None or value not in values
    if op == "Exists":
        return not values and req.key in labels
    if op == "DoesNotExist":
        return not values and req.key not in labels
    return False


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether a ``metav1.LabelSelector`` selects an object with ``labels``.

    ``None`` selects nothing; a selector with neither ``matchLabels`` nor
    ``matchExpressions`` selects everything.  Otherwise every ``matchLabels``
    pair must be present with an equal value AND every expression must match
    (see :func:`label_selector_requirement_matches`).
    """
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        if not label_selector_requirement_matches(req, labels):
            return False
    return True


# --- node selectors --------------------------------------------------------


def node_selector_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Whether one ``matchExpressions`` entry of a NodeSelectorTerm matches node ``labels``.

    ``In``, ``NotIn``, ``Exists`` and ``DoesNotExist`` behave as in label
    selectors.  ``Gt`` / ``Lt`` need exactly one value that parses as a 64-bit
    integer; they match when the label is present, parses as a 64-bit integer,
    and is strictly greater / less than that value.  Invalid requirements match
    nothing.
    """
    op = req.operator
    values = req.values
    if op == "In":
        if not values:
            return False
        value = labels.get(req.key)
        return value is not None and value in values
    if op == "NotIn":
        if not values:
            return False
        value = labels.get(req.key)
        return value is None or value not in values
    if op == "Exists":
        return not values and req.key in labels
    if op == "DoesNotExist":
        return not values and req.key not in labels
    if op == "Gt" or op == "Lt":
        if len(values) != 1:
            return False
        bound = _parse_int64(values[0])
        if bound is None:
            return False
        value = labels.get(req.key)
        if value is None:
            return False
        number = _parse_int64(value)
        if number is None:
            return False
        return number > bound if op == "Gt" else number < bound
    return False


def node_field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """Whether one ``matchFields`` entry of a NodeSelectorTerm matches the node.

    Only the ``metadata.name`` field is supported, with ``In`` or ``NotIn`` and
    exactly one value (``In``: the name equals it; ``NotIn``: it differs).
    Anything else is invalid and matches nothing.
    """
    if req.key != _NODE_NAME_FIELD or len(req.values) != 1:
        return False
    op = req.operator
    if op == "In":
        return node_name == req.values[0]
    if op == "NotIn":
        return node_name != req.values[0]
    return False


def node_selector_term_matches(term: NodeSelectorTerm, node_labels: Mapping[str, str], node_name: str) -> bool:
    """Whether a NodeSelectorTerm matches a node.

    All ``matchExpressions`` (on labels) AND all ``matchFields`` (on the node
    name) must match.  A term with neither expressions nor fields matches
    nothing.
    """
    exprs = term.match_expressions
    fields = term.match_fields
    if not exprs and not fields:
        return False
    for req in exprs:
        if not node_selector_requirement_matches(req, node_labels):
            return False
    for req in fields:
        if not node_field_requirement_matches(req, node_name):
            return False
    return True


def node_selector_matches(selector: NodeSelector | None, node_labels: Mapping[str, str], node_name: str) -> bool:
    """Whether a NodeSelector (the OR of its terms) matches a node.

    ``None`` means no constraint and matches every node; a selector whose term
    list is empty matches nothing.
    """
    if selector is None:
        return True
    for term in selector.node_selector_terms:
        if node_selector_term_matches(term, node_labels, node_name):
            return True
    return False


def pod_fits_node_labels(spec: PodSpec, node_labels: Mapping[str, str], node_name: str) -> bool:
    """The NodeAffinity filter: ``spec.nodeSelector`` AND required node affinity.

    Every ``nodeSelector`` pair must be a node label with an equal value, and
    ``requiredDuringSchedulingIgnoredDuringExecution`` (when set) must match.
    """
    for key, value in spec.node_selector.items():
        if node_labels.get(key) != value:
            return False
    affinity = spec.affinity
    if affinity is None:
        return True
    node_affinity = affinity.node_affinity
    if node_affinity is None:
        return True
    return node_selector_matches(
        node_affinity.required_during_scheduling_ignored_during_execution, node_labels, node_name
    )


def preferred_node_affinity_score(spec: PodSpec, node_labels: Mapping[str, str], node_name: str) -> int:
    """Raw NodeAffinity score: the sum of weights of matching preferred terms.

    Terms with weight 0 or an empty preference are ignored, as Kubernetes
    does; invalid preferences never match.  The result is not normalised.
    """
    affinity = spec.affinity
    if affinity is None:
        return 0
    node_affinity = affinity.node_affinity
    if node_affinity is None:
        return 0
    score = 0
    for pref in node_affinity.preferred_during_scheduling_ignored_during_execution:
        weight = pref.weight
        if weight and node_selector_term_matches(pref.preference, node_labels, node_name):
            score += weight
    return score


# --- taints and tolerations ------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: whether one toleration tolerates one taint.

    An empty effect matches every effect, an empty key matches every key;
    operator ``Exists`` ignores the value, ``Equal`` (or an empty operator)
    requires equal values.
    """
    effect = toleration.effect
    if effect and effect != taint.effect:
        return False
    key = toleration.key
    if key and key != taint.key:
        return False
    op = toleration.operator
    if op == "Exists":
        return True
    if op == "Equal" or not op:
        return toleration.value == taint.value
    return False


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    for toleration in tolerations:
        if tolerates(toleration, taint):
            return True
    return False


def first_untolerated_taint(
    tolerations: Sequence[Toleration],
    taints: Iterable[Taint],
    effects: Sequence[str] = _BLOCKING_EFFECTS,
) -> Taint | None:
    """The first taint, in node order, whose effect is in ``effects`` and that
    no toleration tolerates; ``None`` when the pod tolerates them all.

    With the default ``effects`` this is the TaintToleration filter:
    ``PreferNoSchedule`` taints never block.
    """
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


def count_intolerable_prefer_no_schedule(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> int:
    """How many ``PreferNoSchedule`` taints the pod does not tolerate.

    This is the raw TaintToleration score (lower is better).  Only tolerations
    whose effect is empty or ``PreferNoSchedule`` can tolerate such a taint.
    """
    count = 0
    for taint in taints:
        if taint.effect == "PreferNoSchedule" and not tolerations_tolerate_taint(tolerations, taint):
            count += 1
    return count


# --- resource requests -----------------------------------------------------


# kube-scheduler's request for a container that asks for no cpu or no memory, in its scoring
# (scheduler/util DefaultMilliCPURequest and DefaultMemoryRequest: 0.1 core, 200 MiB)
NONZERO_DEFAULTS: Mapping[str, Decimal] = {"cpu": Decimal("0.1"), "memory": Decimal(200 * 1024 * 1024)}


def container_requests(container: Container) -> Mapping[str, Decimal]:
    """A container's requests after API defaulting: a missing request is its limit.

    Returns one of the container's own mappings when no merge is needed; do
    not mutate the result.
    """
    resources = container.resources
    limits = resources.limits
    requests = resources.requests
    if not limits:
        return requests
    if not requests:
        return limits
    if limits.keys() <= requests.keys():
        return requests
    merged = dict(limits)
    merged.update(requests)
    return merged


def _add(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        current = total.get(name)
        total[name] = amount if current is None else current + amount


def _max_into(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        current = total.get(name)
        if current is None or amount > current:
            total[name] = amount


def pod_requests(
    spec: PodSpec, missing: Mapping[str, Decimal] | None = None, defaulted: bool = True
) -> dict[str, float]:
    """The effective resource request the scheduler uses for a pod.

    Amounts are floats in base units (cpu in cores, memory in bytes); zero
    amounts are omitted and no ``pods`` entry is added.  Per container a
    missing request defaults to its limit.  The result is, per resource::

        max(sum(containers) + sum(sidecars),
            max over init containers i of
                request(i) + sum(sidecars declared before i))   # regular init
                sum(sidecars up to and including i)              # sidecar init
        ) + overhead

    where sidecars are init containers with ``restartPolicy: Always``.  Sums
    are exact (Decimal) and converted to float once at the end.

    With ``missing``, a container (or init container) that requests none of one of these
    resources is taken to request the amount given there: kube-scheduler's non-zero requests
    (``NONZERO_DEFAULTS``), which its LeastAllocated and MostAllocated scores read.

    ``defaulted=False``: the requests as written, before the API server's defaulting (a limit
    does not stand for a missing request): what a controller reads from a template that is no
    Pod, such as a Volcano Job's task (its calcPGMinResources).
    """
    total: dict[str, Decimal] = {}

    def requests_of(container: Container) -> Mapping[str, Decimal]:
        given = container_requests(container) if defaulted else container.resources.requests
        if missing is None or missing.keys() <= given.keys():
            return given
        return {**missing, **given}

    for container in spec.containers:
        _add(total, requests_of(container))

    init_containers = spec.init_containers
    if init_containers:
        sidecars: dict[str, Decimal] = {}
        init_max: dict[str, Decimal] = {}
        for container in init_containers:
            requests = requests_of(container)
            if container.restart_policy == "Always":
                _add(total, requests)
                _add(sidecars, requests)
                _max_into(init_max, sidecars)
            elif sidecars:
                during = dict(sidecars)
                _add(during, requests)
                _max_into(init_max, during)
            else:
                _max_into(init_max, requests)
        _max_into(total, init_max)

    overhead = spec.overhead
    if overhead:
        _add(total, overhead)

    return {name: float(amount) for name, amount in total.items() if amount}
