"""predicates: the Kubernetes filters that decide whether a pod may go on a node.

Node-label filters (nodeSelector, required node affinity, taints/tolerations)
depend only on the pod's spec and the nodes' labels and taints, so they are
computed once per distinct pod signature and cached as a boolean array over
nodes until a node changes. Inter-pod affinity and anti-affinity depend on the
pods placed so far and are evaluated per task against the pods on each
topology domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ...api.selectors import (
    first_untolerated_taint,
    label_selector_matches,
    node_selector_matches,
    pod_fits_node_labels,
)
from ..framework.registry import Plugin, register_plugin

if TYPE_CHECKING:  # pragma: no cover
    from ...api.core import PodAffinityTerm, PodSpec
    from ..framework.session import Session
    from ..framework.session_plugins import Explain
    from ..model import NodeSet, TaskInfo


def _term_namespaces(term: PodAffinityTerm, pod_namespace: str) -> set[str] | None:
    if term.namespaces:
        return set(term.namespaces)
    if term.namespace_selector is not None and not (
        term.namespace_selector.match_labels or term.namespace_selector.match_expressions
    ):
        return None  # empty selector: all namespaces
    return {pod_namespace}


def _matches(term: PodAffinityTerm, pod_namespace: str, other: TaskInfo) -> bool:
    namespaces = _term_namespaces(term, pod_namespace)
    if namespaces is not None and other.namespace not in namespaces:
        return False
    return label_selector_matches(term.label_selector, other.labels)


def _domains(nodes: NodeSet, topology_key: str, node_indices: Iterable[int]) -> set[str]:
    out = set()
    for i in node_indices:
        v = nodes.labels[i].get(topology_key)
        if v is not None:
            out.add(v)
    return out


def _in_domains(nodes: NodeSet, topology_key: str, domains: set[str]) -> np.ndarray:
    n = len(nodes)
    return np.fromiter((nodes.labels[i].get(topology_key) in domains for i in range(n)), dtype=bool, count=n)


def _has_key(nodes: NodeSet, topology_key: str) -> np.ndarray:
    n = len(nodes)
    return np.fromiter((topology_key in nodes.labels[i] for i in range(n)), dtype=bool, count=n)


def _host_ports(spec: PodSpec) -> list[tuple[str, str, int]]:
    """(protocol, hostIP, hostPort) of every container port bound on the host."""
    return [
        (p.protocol or "TCP", p.host_ip or "0.0.0.0", p.host_port)
        for c in spec.containers
        for p in c.ports
        if p.host_port
    ]


def _ports_conflict(wanted: list[tuple[str, str, int]], used: list[tuple[str, str, int]]) -> bool:
    for proto, ip, port in wanted:
        for uproto, uip, uport in used:
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


@register_plugin
class PredicatesPlugin(Plugin):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.nodes

        def node_labels_mask(task: TaskInfo) -> np.ndarray:
            spec = task.pod.spec if task.pod is not None else None

            def build() -> np.ndarray:
                n = len(nodes)
                if spec is None:
                    return np.ones(n, dtype=bool)
                out = np.empty(n, dtype=bool)
                for i in range(n):
                    out[i] = pod_fits_node_labels(spec, nodes.labels[i], nodes.names[i]) and (
                        first_untolerated_taint(spec.tolerations, nodes.taints[i]) is None
                    )
                return out

            return ssn.static_mask(task, ("predicates", task.signature), build)

        def placed_tasks() -> Iterator[tuple[int, TaskInfo]]:
            for i, tasks in enumerate(nodes.tasks):
                for t in tasks.values():
                    yield i, t

        def pod_affinity_mask(task: TaskInfo) -> tuple[np.ndarray, np.ndarray]:
            """(affinity ok, anti-affinity ok) over nodes."""
            n = len(nodes)
            aff_ok = np.ones(n, dtype=bool)
            anti_ok = np.ones(n, dtype=bool)
            aff = task.pod.spec.affinity if task.pod is not None else None
            if aff is not None and aff.pod_affinity is not None:
                for term in aff.pod_affinity.required_during_scheduling_ignored_during_execution:
                    hosts = [i for i, t in placed_tasks() if t is not task and _matches(term, task.namespace, t)]
                    if hosts:
                        aff_ok &= _in_domains(nodes, term.topology_key, _domains(nodes, term.topology_key, hosts))
                    elif not _matches(term, task.namespace, task):
                        # No matching pod anywhere: only allowed when the pod matches its own term.
                        aff_ok &= False
                    else:
                        aff_ok &= _has_key(nodes, term.topology_key)
            if aff is not None and aff.pod_anti_affinity is not None:
                for term in aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution:
                    hosts = [i for i, t in placed_tasks() if t is not task and _matches(term, task.namespace, t)]
                    if hosts:
                        anti_ok &= ~_in_domains(nodes, term.topology_key, _domains(nodes, term.topology_key, hosts))
            # Symmetry: existing pods' anti-affinity against this pod (the node set keeps the placed
            # tasks that carry such terms; the order does not matter, each only narrows the mask).
            for holder in nodes.anti.values():
                if holder is task:
                    continue
                i = holder.node
                for term in holder.anti_terms:
                    if _matches(term, holder.namespace, task):
                        key = term.topology_key
                        dom = nodes.labels[i].get(key)
                        if dom is not None:
                            anti_ok &= ~_in_domains(nodes, key, {dom})
            return aff_ok, anti_ok

        def predicate(task: TaskInfo) -> tuple[np.ndarray, Explain]:
            mask = node_labels_mask(task)
            if task.has_pod_affinity or nodes.anti:
                aff_ok, anti_ok = pod_affinity_mask(task)
                mask = mask & aff_ok & anti_ok
            spec = task.pod.spec if task.pod is not None else None
            if spec is not None:
                extra = extras.get(id(spec))
                if extra is None:
                    extra = extras[id(spec)] = (
                        bool(spec.topology_spread_constraints or _host_ports(spec)),
                        bool(spec.volumes),
                    )
                if extra[0]:
                    mask = mask & ports_mask(task) & spread_mask(task, mask)
                if extra[1]:
                    mask = mask & volumes_mask(task)
            return mask, explain

        # Per pod spec (pods of a task share theirs): (spread or host ports, volumes) to check.
        extras: dict[int, tuple[bool, bool]] = {}

        def volume_claims(task: TaskInfo) -> tuple[str, ...]:
            assert task.pod is not None  # only asked for tasks with a pod spec
            return tuple(
                sorted(
                    v.persistent_volume_claim.claim_name
                    for v in task.pod.spec.volumes
                    if v.persistent_volume_claim is not None
                )
            )

        def volume_reason(task: TaskInfo) -> str:
            objects = ssn.cache.objects
            for name in volume_claims(task):
                pvc = objects.get("PersistentVolumeClaim", {}).get(f"{task.namespace}/{name}")
                if pvc is None:
                    return f'persistentvolumeclaim "{name}" not found'
                if pvc.spec.volume_name and pvc.spec.volume_name not in objects.get("PersistentVolume", {}):
                    return f'persistentvolume "{pvc.spec.volume_name}" not found'
            return "node(s) had volume node affinity conflict"

        def volumes_mask(task: TaskInfo) -> np.ndarray:
            """VolumeBinding / VolumeZone: a bound PersistentVolume's nodeAffinity; a missing claim fits nowhere."""
            claims = volume_claims(task)
            n = len(nodes)
            if not claims:
                return np.ones(n, dtype=bool)
            objects = ssn.cache.objects

            def build() -> np.ndarray:
                out = np.ones(n, dtype=bool)
                for name in claims:
                    pvc = objects.get("PersistentVolumeClaim", {}).get(f"{task.namespace}/{name}")
                    if pvc is None:
                        return np.zeros(n, dtype=bool)
                    if not pvc.spec.volume_name:
                        continue  # not bound yet: any node (binding on first consumer is not modelled)
                    pv = objects.get("PersistentVolume", {}).get(pvc.spec.volume_name)
                    if pv is None:
                        return np.zeros(n, dtype=bool)
                    aff = pv.spec.node_affinity.required if pv.spec.node_affinity is not None else None
                    if aff is not None:
                        out &= np.fromiter(
                            (node_selector_matches(aff, nodes.labels[i], nodes.names[i]) for i in range(n)),
                            dtype=bool,
                            count=n,
                        )
                return out

            return ssn.static_mask(task, ("volumes", task.namespace, claims, ssn.cache.objects_version), build)

        def ports_mask(task: TaskInfo) -> np.ndarray:
            """NodePorts: no placed pod on the node uses one of the task's host ports."""
            n = len(nodes)
            assert task.pod is not None  # only asked for tasks with a pod spec
            wanted = _host_ports(task.pod.spec)
            out = np.ones(n, dtype=bool)
            if not wanted:
                return out
            for i, t in placed_tasks():
                if t is not task and t.pod is not None and out[i] and _ports_conflict(wanted, _host_ports(t.pod.spec)):
                    out[i] = False
            return out

        def spread_mask(task: TaskInfo, eligible: np.ndarray) -> np.ndarray:
            """PodTopologySpread (DoNotSchedule): placing the task keeps each constraint's skew ≤ maxSkew."""
            n = len(nodes)
            out = np.ones(n, dtype=bool)
            assert task.pod is not None  # only asked for tasks with a pod spec
            for c in task.pod.spec.topology_spread_constraints:
                if c.when_unsatisfiable != "DoNotSchedule" or not c.topology_key:
                    continue
                key = c.topology_key
                # Domains: the key's values on nodes the pod's node selector/affinity allows.
                counts: dict[str, int] = {}
                for i in np.flatnonzero(eligible).tolist():
                    v = nodes.labels[i].get(key)
                    if v is not None:
                        counts.setdefault(v, 0)
                for i, t in placed_tasks():
                    v = nodes.labels[i].get(key)
                    if (
                        v in counts
                        and t is not task
                        and t.namespace == task.namespace
                        and label_selector_matches(c.label_selector, t.labels)
                    ):
                        counts[v] += 1
                if not counts:
                    out[:] = False
                    continue
                lowest = min(counts.values())
                if c.min_domains is not None and len(counts) < c.min_domains:
                    lowest = 0
                own = 1 if label_selector_matches(c.label_selector, task.labels) else 0
                for i in range(n):
                    v = nodes.labels[i].get(key)
                    if v is None or v not in counts or counts[v] + own - lowest > c.max_skew:
                        out[i] = False
            return out

        def explain(task: TaskInfo, failing: np.ndarray) -> dict[str, int]:
            reasons: dict[str, int] = {}
            spec = task.pod.spec if task.pod is not None else None
            aff_ok = anti_ok = None
            if task.has_pod_affinity or nodes.anti:
                aff_ok, anti_ok = pod_affinity_mask(task)
            for i in np.flatnonzero(failing):
                if spec is not None and not pod_fits_node_labels(spec, nodes.labels[i], nodes.names[i]):
                    r = "node(s) didn't match Pod's node affinity/selector"
                elif spec is not None and (taint := first_untolerated_taint(spec.tolerations, nodes.taints[i])):
                    r = f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
                elif aff_ok is not None and not aff_ok[i]:
                    r = "node(s) didn't match pod affinity rules"
                elif anti_ok is not None and not anti_ok[i]:
                    r = "node(s) didn't match pod anti-affinity rules"
                elif spec is not None and _host_ports(spec) and not ports_mask(task)[i]:
                    r = "node(s) didn't have free ports for the requested pod ports"
                elif (
                    spec is not None
                    and spec.topology_spread_constraints
                    and not spread_mask(task, np.ones(len(nodes), dtype=bool))[i]
                ):
                    r = "node(s) didn't match pod topology spread constraints"
                elif spec is not None and spec.volumes and not volumes_mask(task)[i]:
                    r = volume_reason(task)
                else:
                    r = "node(s) didn't satisfy a predicate"
                reasons[r] = reasons.get(r, 0) + 1
            return reasons

        ssn.add_predicate_fn(self.name, predicate)
