"""Kubernetes selector, affinity, taint and pod-request semantics."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, strategies as st

from lavaflow.api.core import (
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
from lavaflow.api.selectors import (
    container_requests,
    count_intolerable_prefer_no_schedule,
    first_untolerated_taint,
    label_selector_matches,
    label_selector_requirement_matches,
    node_field_requirement_matches,
    node_selector_matches,
    node_selector_requirement_matches,
    node_selector_term_matches,
    pod_fits_node_labels,
    pod_requests,
    preferred_node_affinity_score,
    tolerates,
    tolerations_tolerate_taint,
)

NODE = {"zone": "a", "disk": "ssd", "gpus": "4", "kubernetes.io/hostname": "n1", "empty": ""}


def lsel(**kw: Any) -> LabelSelector:
    return LabelSelector.model_validate(kw)


def lreq(key: str, op: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement.model_validate({"key": key, "operator": op, "values": list(values)})


def nreq(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement.model_validate({"key": key, "operator": op, "values": list(values)})


def term(
    exprs: Sequence[NodeSelectorRequirement] = (), fields: Sequence[NodeSelectorRequirement] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=list(exprs), match_fields=list(fields))


def spec(data: dict[str, Any]) -> PodSpec:
    return PodSpec.model_validate(data)


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": kw.pop("name", "c"), "resources": res, **kw}


# --- label selectors -------------------------------------------------------


class TestLabelSelector:
    def test_none_matches_nothing(self) -> None:
        assert not label_selector_matches(None, {})
        assert not label_selector_matches(None, NODE)

    def test_empty_matches_everything(self) -> None:
        assert label_selector_matches(LabelSelector(), {})
        assert label_selector_matches(LabelSelector(), NODE)
        assert label_selector_matches(lsel(matchLabels={}, matchExpressions=[]), NODE)

    def test_match_labels(self) -> None:
        assert label_selector_matches(lsel(matchLabels={"zone": "a"}), NODE)
        assert label_selector_matches(lsel(matchLabels={"zone": "a", "disk": "ssd"}), NODE)
        assert not label_selector_matches(lsel(matchLabels={"zone": "b"}), NODE)
        assert not label_selector_matches(lsel(matchLabels={"zone": "a", "disk": "hdd"}), NODE)
        assert not label_selector_matches(lsel(matchLabels={"missing": "x"}), NODE)
        assert not label_selector_matches(lsel(matchLabels={"zone": "a"}), {})

    def test_match_labels_empty_value(self) -> None:
        assert label_selector_matches(lsel(matchLabels={"empty": ""}), NODE)
        assert not label_selector_matches(lsel(matchLabels={"missing": ""}), NODE)

    @pytest.mark.parametrize(
        ("req", "expected"),
        [
            (lreq("zone", "In", "a", "b"), True),
            (lreq("zone", "In", "b", "c"), False),
            (lreq("missing", "In", "a"), False),
            (lreq("empty", "In", ""), True),
            (lreq("zone", "NotIn", "b"), True),
            (lreq("zone", "NotIn", "a", "b"), False),
            (lreq("missing", "NotIn", "a"), True),  # absent key matches NotIn
            (lreq("zone", "Exists"), True),
            (lreq("empty", "Exists"), True),
            (lreq("missing", "Exists"), False),
            (lreq("zone", "DoesNotExist"), False),
            (lreq("missing", "DoesNotExist"), True),
        ],
    )
    def test_requirement(self, req: LabelSelectorRequirement, expected: bool) -> None:
        assert label_selector_requirement_matches(req, NODE) is expected
        assert label_selector_matches(LabelSelector(match_expressions=[req]), NODE) is expected

    @pytest.mark.parametrize(
        "req",
        [
            lreq("zone", "In"),
            lreq("missing", "NotIn"),
            lreq("zone", "Exists", "a"),
            lreq("missing", "DoesNotExist", "a"),
        ],
    )
    def test_invalid_requirement_matches_nothing(self, req: LabelSelectorRequirement) -> None:
        assert not label_selector_requirement_matches(req, NODE)
        assert not label_selector_matches(LabelSelector(match_expressions=[req]), NODE)

    def test_unknown_operator_matches_nothing(self) -> None:
        req = LabelSelectorRequirement.model_construct(key="missing", operator="Gt", values=["1"])
        assert not label_selector_requirement_matches(req, NODE)

    def test_labels_and_expressions_are_anded(self) -> None:
        sel = lsel(
            matchLabels={"zone": "a"},
            matchExpressions=[{"key": "disk", "operator": "In", "values": ["ssd"]}],
        )
        assert label_selector_matches(sel, NODE)
        assert not label_selector_matches(sel, {"zone": "a", "disk": "hdd"})
        assert not label_selector_matches(sel, {"zone": "b", "disk": "ssd"})
        sel2 = LabelSelector(match_expressions=[lreq("zone", "Exists"), lreq("gpu-type", "DoesNotExist")])
        assert label_selector_matches(sel2, NODE)
        assert not label_selector_matches(sel2, {**NODE, "gpu-type": "a100"})

    def test_mapping_not_dict(self) -> None:
        from types import MappingProxyType

        assert label_selector_matches(lsel(matchLabels={"zone": "a"}), MappingProxyType(NODE))


# --- node selectors --------------------------------------------------------


class TestNodeSelectorRequirement:
    @pytest.mark.parametrize(
        ("req", "expected"),
        [
            (nreq("zone", "In", "a"), True),
            (nreq("zone", "In", "x", "a"), True),
            (nreq("zone", "In", "x"), False),
            (nreq("missing", "In", "a"), False),
            (nreq("zone", "NotIn", "x"), True),
            (nreq("zone", "NotIn", "a"), False),
            (nreq("missing", "NotIn", "a"), True),
            (nreq("zone", "Exists"), True),
            (nreq("missing", "Exists"), False),
            (nreq("zone", "DoesNotExist"), False),
            (nreq("missing", "DoesNotExist"), True),
            (nreq("gpus", "Gt", "3"), True),
            (nreq("gpus", "Gt", "4"), False),  # strictly greater
            (nreq("gpus", "Gt", "5"), False),
            (nreq("gpus", "Lt", "5"), True),
            (nreq("gpus", "Lt", "4"), False),  # strictly less
            (nreq("gpus", "Lt", "3"), False),
            (nreq("gpus", "Gt", "-1"), True),
            (nreq("gpus", "Gt", "+3"), True),
            (nreq("gpus", "Lt", "05"), True),
            (nreq("missing", "Gt", "0"), False),  # absent label never matches Gt
            (nreq("missing", "Lt", "100"), False),  # ... nor Lt
            (nreq("zone", "Gt", "0"), False),  # non-integer label
            (nreq("zone", "Lt", "100"), False),
            (nreq("empty", "Lt", "100"), False),
        ],
    )
    def test_operators(self, req: NodeSelectorRequirement, expected: bool) -> None:
        assert node_selector_requirement_matches(req, NODE) is expected

    @pytest.mark.parametrize(
        "label",
        ["1.5", "1e3", " 5", "5 ", "1_000", "0x10", "", "+", "-", "٣", "9223372036854775808"],
    )
    def test_gt_lt_non_integer_label(self, label: str) -> None:
        labels = {"n": label}
        assert not node_selector_requirement_matches(nreq("n", "Gt", "-100"), labels)
        assert not node_selector_requirement_matches(nreq("n", "Lt", "100"), labels)

    def test_gt_lt_int64_range(self) -> None:
        big = str(2**63 - 1)
        small = str(-(2**63))
        assert node_selector_requirement_matches(nreq("n", "Gt", "0"), {"n": big})
        assert node_selector_requirement_matches(nreq("n", "Lt", "0"), {"n": small})
        assert node_selector_requirement_matches(nreq("n", "Lt", big), {"n": "0"})
        assert not node_selector_requirement_matches(nreq("n", "Gt", str(2**63)), {"n": "0"})
        assert not node_selector_requirement_matches(nreq("n", "Lt", "0"), {"n": str(-(2**63) - 1)})

    @pytest.mark.parametrize(
        "req",
        [
            nreq("gpus", "Gt", "1.5"),  # non-integer value
            nreq("gpus", "Lt", "ten"),
            nreq("gpus", "Gt", ""),
            nreq("gpus", "Gt"),  # no value
            nreq("gpus", "Lt", "1", "2"),  # more than one value
            nreq("zone", "In"),  # In/NotIn need values
            nreq("missing", "NotIn"),
            nreq("zone", "Exists", "a"),  # Exists/DoesNotExist take no values
            nreq("missing", "DoesNotExist", "a"),
        ],
    )
    def test_invalid_requirement_matches_nothing(self, req: NodeSelectorRequirement) -> None:
        assert not node_selector_requirement_matches(req, NODE)
        assert not node_selector_term_matches(term([req]), NODE, "n1")

    def test_unknown_operator(self) -> None:
        req = NodeSelectorRequirement.model_construct(key="zone", operator="Equals", values=["a"])
        assert not node_selector_requirement_matches(req, NODE)


class TestNodeFieldRequirement:
    @pytest.mark.parametrize(
        ("req", "expected"),
        [
            (nreq("metadata.name", "In", "n1"), True),
            (nreq("metadata.name", "In", "n2"), False),
            (nreq("metadata.name", "NotIn", "n2"), True),
            (nreq("metadata.name", "NotIn", "n1"), False),
        ],
    )
    def test_name(self, req: NodeSelectorRequirement, expected: bool) -> None:
        assert node_field_requirement_matches(req, "n1") is expected

    @pytest.mark.parametrize(
        "req",
        [
            nreq("metadata.name", "In", "n1", "n2"),  # exactly one value
            nreq("metadata.name", "In"),
            nreq("metadata.name", "NotIn", "n2", "n3"),
            nreq("metadata.name", "Exists"),
            nreq("metadata.name", "DoesNotExist"),
            nreq("metadata.name", "Gt", "1"),
            nreq("metadata.namespace", "NotIn", "x"),  # only metadata.name
            nreq("zone", "In", "a"),
        ],
    )
    def test_unsupported(self, req: NodeSelectorRequirement) -> None:
        assert not node_field_requirement_matches(req, "n1")
        assert not node_selector_term_matches(term(fields=[req]), NODE, "n1")


class TestNodeSelectorTerm:
    def test_empty_term_matches_nothing(self) -> None:
        assert not node_selector_term_matches(NodeSelectorTerm(), NODE, "n1")
        assert not node_selector_term_matches(NodeSelectorTerm(), {}, "")

    def test_expressions_anded(self) -> None:
        t = term([nreq("zone", "In", "a"), nreq("disk", "In", "ssd")])
        assert node_selector_term_matches(t, NODE, "n1")
        t = term([nreq("zone", "In", "a"), nreq("disk", "In", "hdd")])
        assert not node_selector_term_matches(t, NODE, "n1")

    def test_expressions_and_fields_anded(self) -> None:
        t = term([nreq("zone", "In", "a")], [nreq("metadata.name", "In", "n1")])
        assert node_selector_term_matches(t, NODE, "n1")
        assert not node_selector_term_matches(t, NODE, "n2")
        assert not node_selector_term_matches(t, {"zone": "b"}, "n1")

    def test_fields_only(self) -> None:
        t = term(fields=[nreq("metadata.name", "NotIn", "n2")])
        assert node_selector_term_matches(t, {}, "n1")
        assert not node_selector_term_matches(t, {}, "n2")

    def test_from_yaml_aliases(self) -> None:
        t = NodeSelectorTerm.model_validate(
            {
                "matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["2"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            }
        )
        assert node_selector_term_matches(t, NODE, "n1")


class TestNodeSelector:
    def test_none_is_no_constraint(self) -> None:
        assert node_selector_matches(None, {}, "n1")
        assert node_selector_matches(None, NODE, "n1")

    def test_empty_term_list_matches_nothing(self) -> None:
        assert not node_selector_matches(NodeSelector(), NODE, "n1")
        assert not node_selector_matches(NodeSelector(node_selector_terms=[]), {}, "n1")

    def test_only_empty_terms_match_nothing(self) -> None:
        sel = NodeSelector(node_selector_terms=[NodeSelectorTerm(), NodeSelectorTerm()])
        assert not node_selector_matches(sel, NODE, "n1")

    def test_terms_ored(self) -> None:
        sel = NodeSelector(
            node_selector_terms=[
                term([nreq("zone", "In", "b")]),
                NodeSelectorTerm(),
                term([nreq("zone", "In", "x"), nreq("gpus", "Gt", "1")]),
                term([nreq("gpus", "Gt", "1")]),
            ]
        )
        assert node_selector_matches(sel, NODE, "n1")
        assert node_selector_matches(sel, {"zone": "b"}, "n1")
        assert not node_selector_matches(sel, {"zone": "c", "gpus": "1"}, "n1")

    def test_invalid_term_does_not_spoil_valid_ones(self) -> None:
        sel = NodeSelector(node_selector_terms=[term([nreq("gpus", "Gt", "x")]), term([nreq("zone", "In", "a")])])
        assert node_selector_matches(sel, NODE, "n1")
        assert not node_selector_matches(sel, {"zone": "b"}, "n1")


# --- pod / node fit --------------------------------------------------------


def affinity_spec(required: Any = None, preferred: Any = None, node_selector: Any = None) -> PodSpec:
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred is not None:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    data: dict[str, Any] = {"affinity": {"nodeAffinity": node_affinity}}
    if node_selector is not None:
        data["nodeSelector"] = node_selector
    return spec(data)


def pref(weight: int, exprs: Any = None, fields: Any = None) -> dict[str, Any]:
    preference: dict[str, Any] = {}
    if exprs is not None:
        preference["matchExpressions"] = exprs
    if fields is not None:
        preference["matchFields"] = fields
    return {"weight": weight, "preference": preference}


class TestPodFitsNodeLabels:
    def test_no_constraints(self) -> None:
        assert pod_fits_node_labels(PodSpec(), {}, "n1")
        assert pod_fits_node_labels(spec({"affinity": {}}), {}, "n1")
        assert pod_fits_node_labels(spec({"affinity": {"nodeAffinity": {}}}), {}, "n1")
        assert pod_fits_node_labels(spec({"affinity": {"podAffinity": {}}}), {}, "n1")

    def test_node_selector(self) -> None:
        s = spec({"nodeSelector": {"zone": "a", "disk": "ssd"}})
        assert pod_fits_node_labels(s, NODE, "n1")
        assert not pod_fits_node_labels(s, {"zone": "a"}, "n1")
        assert not pod_fits_node_labels(s, {"zone": "a", "disk": "hdd"}, "n1")
        assert pod_fits_node_labels(spec({"nodeSelector": {"empty": ""}}), NODE, "n1")
        assert not pod_fits_node_labels(spec({"nodeSelector": {"missing": ""}}), NODE, "n1")

    def test_required_affinity(self) -> None:
        s = affinity_spec(
            required={
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
            }
        )
        assert pod_fits_node_labels(s, NODE, "n1")
        assert not pod_fits_node_labels(s, {"zone": "c"}, "n1")

    def test_required_affinity_empty_terms(self) -> None:
        s = affinity_spec(required={"nodeSelectorTerms": []})
        assert not pod_fits_node_labels(s, NODE, "n1")
        s = affinity_spec(required={"nodeSelectorTerms": [{}]})
        assert not pod_fits_node_labels(s, NODE, "n1")

    def test_selector_and_affinity_anded(self) -> None:
        s = affinity_spec(
            required={
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            },
            node_selector={"zone": "a"},
        )
        assert pod_fits_node_labels(s, NODE, "n1")
        assert not pod_fits_node_labels(s, NODE, "n2")
        assert not pod_fits_node_labels(s, {"zone": "b"}, "n1")

    def test_preferred_only_does_not_filter(self) -> None:
        s = affinity_spec(
            preferred=[
                pref(10, [{"key": "zone", "operator": "In", "values": ["x"]}]),
            ]
        )
        assert pod_fits_node_labels(s, NODE, "n1")


class TestPreferredScore:
    def test_no_affinity(self) -> None:
        assert preferred_node_affinity_score(PodSpec(), NODE, "n1") == 0
        assert preferred_node_affinity_score(spec({"affinity": {}}), NODE, "n1") == 0
        assert preferred_node_affinity_score(affinity_spec(), NODE, "n1") == 0

    def test_sum_of_matching_weights(self) -> None:
        s = affinity_spec(
            preferred=[
                pref(10, [{"key": "zone", "operator": "In", "values": ["a"]}]),
                pref(5, [{"key": "disk", "operator": "In", "values": ["hdd"]}]),
                pref(7, [{"key": "gpus", "operator": "Gt", "values": ["2"]}]),
                pref(3, fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]),
                {"weight": 100, "preference": {}},  # empty preference never matches
            ]
        )
        assert preferred_node_affinity_score(s, NODE, "n1") == 20
        assert preferred_node_affinity_score(s, NODE, "n2") == 17
        assert preferred_node_affinity_score(s, {}, "n9") == 0

    def test_zero_weight_and_invalid_terms(self) -> None:
        s = affinity_spec(
            preferred=[
                pref(0, [{"key": "zone", "operator": "Exists"}]),
                pref(4, [{"key": "gpus", "operator": "Gt", "values": ["x"]}]),
                pref(2, [{"key": "zone", "operator": "Exists"}]),
            ]
        )
        assert preferred_node_affinity_score(s, NODE, "n1") == 2


# --- taints and tolerations ------------------------------------------------


def tol(**kw: Any) -> Toleration:
    return Toleration.model_validate(kw)


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> Taint:
    return Taint(key=key, value=value, effect=effect)  # type: ignore[arg-type]


class TestTolerates:
    @pytest.mark.parametrize(
        ("toleration", "t", "expected"),
        [
            # Equal (explicit and default) compares key and value
            (tol(key="k", operator="Equal", value="v"), taint("k", value="v"), True),
            (tol(key="k", value="v", effect="NoSchedule"), taint("k", value="v"), True),
            (tol(key="k", value="v"), taint("k", value="w"), False),
            (tol(key="k", value=""), taint("k", value=""), True),
            (tol(key="k", value="v"), taint("k", value=""), False),
            (tol(key="other", value="v"), taint("k", value="v"), False),
            # Exists ignores the value
            (tol(key="k", operator="Exists"), taint("k", value="anything"), True),
            (tol(key="k", operator="Exists", value="ignored"), taint("k", value="v"), True),
            (tol(key="other", operator="Exists"), taint("k"), False),
            # empty key + Exists tolerates every taint
            (tol(operator="Exists"), taint("k", value="v"), True),
            (tol(operator="Exists"), taint("x", "NoExecute"), True),
            (tol(operator="Exists"), taint("y", "PreferNoSchedule"), True),
            (tol(operator="Exists", effect="NoSchedule"), taint("k", "NoSchedule"), True),
            (tol(operator="Exists", effect="NoSchedule"), taint("k", "NoExecute"), False),
            # empty key skips the key check; Equal still compares values
            (tol(operator="Equal", value="v"), taint("any", value="v"), True),
            (tol(operator="Equal", value="v"), taint("any", value="w"), False),
            # empty effect matches every effect
            (tol(key="k", operator="Exists"), taint("k", "NoExecute"), True),
            (tol(key="k", operator="Exists"), taint("k", "PreferNoSchedule"), True),
            (tol(key="k", value="v", effect=""), taint("k", "NoExecute", "v"), True),
            # a set effect must be equal
            (tol(key="k", operator="Exists", effect="NoExecute"), taint("k", "NoSchedule"), False),
            (tol(key="k", operator="Exists", effect="PreferNoSchedule"), taint("k"), False),
            (tol(key="k", operator="Exists", effect="NoExecute"), taint("k", "NoExecute"), True),
        ],
    )
    def test_tolerates(self, toleration: Toleration, t: Taint, expected: bool) -> None:
        assert tolerates(toleration, t) is expected

    def test_empty_and_unknown_operator(self) -> None:
        empty_op = Toleration.model_construct(key="k", operator="", value="v", effect="")
        assert tolerates(empty_op, taint("k", value="v"))
        assert not tolerates(empty_op, taint("k", value="w"))
        bad = Toleration.model_construct(key="k", operator="Gt", value="1", effect="")
        assert not tolerates(bad, taint("k", value="2"))

    def test_toleration_seconds_irrelevant(self) -> None:
        t = tol(key="k", operator="Exists", tolerationSeconds=30)
        assert tolerates(t, taint("k", "NoExecute"))

    def test_any(self) -> None:
        assert not tolerations_tolerate_taint([], taint("k"))
        tols = [tol(key="x", operator="Exists"), tol(key="k", operator="Exists")]
        assert tolerations_tolerate_taint(tols, taint("k"))
        assert not tolerations_tolerate_taint([tol(key="x", operator="Exists")], taint("k"))


class TestUntoleratedTaints:
    def test_no_taints(self) -> None:
        assert first_untolerated_taint([], []) is None

    def test_first_in_node_order(self) -> None:
        taints = [taint("a"), taint("b", "NoExecute"), taint("c")]
        assert first_untolerated_taint([], taints) is taints[0]
        assert first_untolerated_taint([tol(key="a", operator="Exists")], taints) is taints[1]
        tols = [tol(key="a", operator="Exists"), tol(key="b", operator="Exists")]
        assert first_untolerated_taint(tols, taints) is taints[2]
        assert first_untolerated_taint([tol(operator="Exists")], taints) is None

    def test_prefer_no_schedule_never_blocks(self) -> None:
        taints = [taint("soft", "PreferNoSchedule"), taint("soft2", "PreferNoSchedule")]
        assert first_untolerated_taint([], taints) is None
        taints.append(taint("hard"))
        assert first_untolerated_taint([], taints) is taints[2]

    def test_effect_mismatch_blocks(self) -> None:
        taints = [taint("k", "NoExecute")]
        tols = [tol(key="k", operator="Exists", effect="NoSchedule")]
        assert first_untolerated_taint(tols, taints) is taints[0]

    def test_custom_effects(self) -> None:
        taints = [taint("a", "NoSchedule"), taint("b", "NoExecute")]
        assert first_untolerated_taint([], taints, effects=("NoExecute",)) is taints[1]
        assert first_untolerated_taint([], taints, effects=()) is None
        soft = [taint("s", "PreferNoSchedule")]
        assert first_untolerated_taint([], soft, effects=("PreferNoSchedule",)) is soft[0]

    def test_count_prefer_no_schedule(self) -> None:
        taints = [
            taint("a", "PreferNoSchedule"),
            taint("b", "PreferNoSchedule", "v"),
            taint("c", "NoSchedule"),
            taint("d", "NoExecute"),
        ]
        assert count_intolerable_prefer_no_schedule([], taints) == 2
        assert count_intolerable_prefer_no_schedule([], []) == 0
        assert count_intolerable_prefer_no_schedule([tol(key="a", operator="Exists")], taints) == 1
        tols = [tol(key="b", value="v", effect="PreferNoSchedule")]
        assert count_intolerable_prefer_no_schedule(tols, taints) == 1
        assert count_intolerable_prefer_no_schedule([tol(key="b", value="w")], taints) == 2
        # a toleration bound to another effect does not help
        tols = [tol(operator="Exists", effect="NoSchedule")]
        assert count_intolerable_prefer_no_schedule(tols, taints) == 2
        assert count_intolerable_prefer_no_schedule([tol(operator="Exists")], taints) == 0


# --- pod requests ----------------------------------------------------------

GI = float(2**30)
MI = float(2**20)


class TestPodRequests:
    def test_empty(self) -> None:
        assert pod_requests(PodSpec()) == {}
        assert pod_requests(spec({"containers": [container()]})) == {}

    def test_sum_of_containers(self) -> None:
        s = spec(
            {
                "containers": [
                    container({"cpu": "500m", "memory": "1Gi"}),
                    container({"cpu": "1500m", "memory": "512Mi", "nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1}),
                ]
            }
        )
        assert pod_requests(s) == {"cpu": 2.0, "memory": 1.5 * GI, "nvidia.com/gpu": 1.0}

    def test_sums_are_exact(self) -> None:
        s = spec({"containers": [container({"cpu": "100m"})] * 3})
        assert pod_requests(s) == {"cpu": 0.3}

    def test_limits_default_requests(self) -> None:
        s = spec({"containers": [container(limits={"cpu": "2", "memory": "1Gi"})]})
        assert pod_requests(s) == {"cpu": 2.0, "memory": GI}

    def test_limits_fill_only_missing_requests(self) -> None:
        s = spec({"containers": [container({"cpu": "500m"}, {"cpu": "2", "memory": "1Gi"})]})
        assert pod_requests(s) == {"cpu": 0.5, "memory": GI}
        c = Container.model_validate(container({"cpu": "500m"}, {"cpu": "2"}))
        assert container_requests(c) == {"cpu": Decimal("0.5")}

    def test_explicit_zero_request_is_kept_over_limit(self) -> None:
        s = spec({"containers": [container({"cpu": "0"}, {"cpu": "2", "memory": "1Gi"})]})
        assert pod_requests(s) == {"memory": GI}

    def test_zero_amounts_omitted(self) -> None:
        s = spec({"containers": [container({"cpu": "1", "nvidia.com/gpu": 0}, {"nvidia.com/gpu": 0})]})
        assert pod_requests(s) == {"cpu": 1.0}
        assert "pods" not in pod_requests(s)

    def test_init_container_larger_than_containers(self) -> None:
        s = spec(
            {
                "initContainers": [container({"cpu": "4", "memory": "128Mi"}, name="init")],
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
            }
        )
        assert pod_requests(s) == {"cpu": 4.0, "memory": GI}

    def test_init_containers_take_max_not_sum(self) -> None:
        s = spec(
            {
                "initContainers": [
                    container({"cpu": "3"}, name="i1"),
                    container({"cpu": "2", "memory": "2Gi"}, name="i2"),
                ],
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
            }
        )
        assert pod_requests(s) == {"cpu": 3.0, "memory": 2 * GI}

    def test_init_container_only_resource(self) -> None:
        s = spec(
            {
                "initContainers": [container({"example.com/dongle": 1}, {"example.com/dongle": 1}, name="init")],
                "containers": [container({"cpu": "1"})],
            }
        )
        assert pod_requests(s) == {"cpu": 1.0, "example.com/dongle": 1.0}

    def test_init_container_limits_default_requests(self) -> None:
        s = spec(
            {
                "initContainers": [container(limits={"cpu": "3"}, name="init")],
                "containers": [container({"cpu": "1"})],
            }
        )
        assert pod_requests(s) == {"cpu": 3.0}

    def test_sidecars_add_to_containers(self) -> None:
        s = spec(
            {
                "initContainers": [container({"cpu": "500m", "memory": "64Mi"}, name="proxy", restartPolicy="Always")],
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
            }
        )
        assert pod_requests(s) == {"cpu": 1.5, "memory": GI + 64 * MI}

    def test_sidecars_before_regular_init_count_for_it(self) -> None:
        # sidecar(1) -> init(4) -> sidecar(2); containers 1
        # steady state: 1 + 1 + 2 = 4; while "init" runs: 4 + 1 (earlier sidecar) = 5
        s = spec(
            {
                "initContainers": [
                    container({"cpu": "1"}, name="s1", restartPolicy="Always"),
                    container({"cpu": "4"}, name="init"),
                    container({"cpu": "2"}, name="s2", restartPolicy="Always"),
                ],
                "containers": [container({"cpu": "1"})],
            }
        )
        assert pod_requests(s) == {"cpu": 5.0}

    def test_sidecars_after_regular_init_do_not_count_for_it(self) -> None:
        s = spec(
            {
                "initContainers": [
                    container({"cpu": "4"}, name="init"),
                    container({"cpu": "2"}, name="s1", restartPolicy="Always"),
                ],
                "containers": [container({"cpu": "1"})],
            }
        )
        # max(1 + 2, 4) = 4
        assert pod_requests(s) == {"cpu": 4.0}

    def test_sidecar_only_pod(self) -> None:
        s = spec({"initContainers": [container({"cpu": "1"}, name="s", restartPolicy="Always")]})
        assert pod_requests(s) == {"cpu": 1.0}

    def test_other_restart_policy_is_not_sidecar(self) -> None:
        s = spec(
            {
                "initContainers": [container({"cpu": "1"}, name="i", restartPolicy="OnFailure")],
                "containers": [container({"cpu": "1"})],
            }
        )
        assert pod_requests(s) == {"cpu": 1.0}

    def test_overhead_added(self) -> None:
        s = spec(
            {
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            }
        )
        assert pod_requests(s) == {"cpu": 1.25, "memory": GI + 120 * MI}

    def test_overhead_added_after_init_max(self) -> None:
        s = spec(
            {
                "initContainers": [container({"cpu": "4"}, name="init")],
                "containers": [container({"cpu": "1"})],
                "overhead": {"cpu": "100m", "example.com/x": 2},
            }
        )
        assert pod_requests(s) == {"cpu": 4.1, "example.com/x": 2.0}

    def test_does_not_mutate_spec(self) -> None:
        s = spec(
            {
                "initContainers": [
                    container({"cpu": "1"}, name="s", restartPolicy="Always"),
                    container({"cpu": "3"}, name="i"),
                ],
                "containers": [container({"cpu": "1"}, {"cpu": "2", "memory": "1Gi"})],
                "overhead": {"cpu": "1"},
            }
        )
        before = s.model_dump()
        first = pod_requests(s)
        assert pod_requests(s) == first
        assert s.model_dump() == before


# --- properties ------------------------------------------------------------

_RESOURCES = ["cpu", "memory", "nvidia.com/gpu"]
_amount = st.integers(min_value=0, max_value=10**6)
_resource_list = st.dictionaries(st.sampled_from(_RESOURCES), _amount, max_size=3)


def _valid_limits(req: dict[str, int], lim: dict[str, int]) -> dict[str, int]:
    """Limits the API server accepts with these requests: none below its request, and an extended
    resource's (nvidia.com/gpu) equal to it."""
    out = dict(lim)
    for name, amount in req.items():
        if "/" in name:
            out[name] = amount
        elif name in out:
            out[name] = max(out[name], amount)
    return out


_container = st.builds(
    lambda req, lim, sidecar: {
        "name": "c",
        "resources": {"requests": req, "limits": _valid_limits(req, lim)},
        **({"restartPolicy": "Always"} if sidecar else {}),
    },
    _resource_list,
    _resource_list,
    st.booleans(),
)


def _effective(c: dict[str, Any]) -> dict[str, int]:
    return {**c["resources"]["limits"], **c["resources"]["requests"]}


@given(
    st.lists(_container, max_size=4),
    st.lists(_container, max_size=4),
    _resource_list,
)
def test_pod_requests_properties(
    containers: list[dict[str, Any]], inits: list[dict[str, Any]], overhead: dict[str, int]
) -> None:
    s = spec({"containers": containers, "initContainers": inits, "overhead": overhead})
    got = pod_requests(s)
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    for name in _RESOURCES:
        total = got.get(name, 0.0)
        extra = overhead.get(name, 0)
        # every regular container, and the steady state, fit inside the request
        for c in containers:
            assert total >= _effective(c).get(name, 0) + extra
        steady = sum(_effective(c).get(name, 0) for c in containers + sidecars)
        assert total >= steady + extra
        # every init container, with the sidecars started before it, fits too
        running = 0
        expected = steady
        for c in inits:
            amount = _effective(c).get(name, 0)
            if c.get("restartPolicy") == "Always":
                running += amount
            else:
                assert total >= amount + running + extra
                expected = max(expected, amount + running)
        # and the request is exactly the largest of those phases
        assert total == expected + extra
        assert (name in got) == (total != 0)


_values = st.sampled_from(["x", "y", ""])


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _values, max_size=4),
)
def test_match_labels_is_subset(selector_labels: dict[str, str], labels: dict[str, str]) -> None:
    expected = all(labels.get(k) == v for k, v in selector_labels.items())
    assert label_selector_matches(LabelSelector(match_labels=selector_labels), labels) is expected
    # matchLabels and the equivalent single-value In expressions agree
    exprs = [lreq(k, "In", v) for k, v in selector_labels.items()]
    assert label_selector_matches(LabelSelector(match_expressions=exprs), labels) is expected


@given(
    st.sampled_from(["a", "b", "c"]),
    st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]), max_size=2),
)
def test_in_and_notin_are_complements(key: str, values: list[str], labels: dict[str, str]) -> None:
    lmatch = label_selector_requirement_matches
    nmatch = node_selector_requirement_matches
    assert lmatch(lreq(key, "In", *values), labels) != lmatch(lreq(key, "NotIn", *values), labels)
    assert nmatch(nreq(key, "In", *values), labels) != nmatch(nreq(key, "NotIn", *values), labels)
    assert lmatch(lreq(key, "Exists"), labels) != lmatch(lreq(key, "DoesNotExist"), labels)
    assert nmatch(nreq(key, "Exists"), labels) != nmatch(nreq(key, "DoesNotExist"), labels)


_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(_int64, _int64)
def test_gt_lt_agree_with_integer_order(label: int, bound: int) -> None:
    labels = {"n": str(label)}
    assert node_selector_requirement_matches(nreq("n", "Gt", str(bound)), labels) is (label > bound)
    assert node_selector_requirement_matches(nreq("n", "Lt", str(bound)), labels) is (label < bound)
