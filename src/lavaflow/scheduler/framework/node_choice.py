"""How a node is chosen for a task: lavaflow's way, or Volcano's (sampling, kube-scheduler scores).

lavaflow's default scores every feasible node and takes the best, ties to the lowest node index.

Volcano's vc-scheduler (``--minimum-feasible-nodes``, ``--minimum-percentage-nodes-to-find``,
``--percentage-nodes-to-find``) stops predicating once it has found a *sample* of feasible nodes
and scores only those:

- how many: every node up to ``minimum_feasible_nodes``; beyond, ``percentage_nodes_to_find`` %
  of the nodes, or when that is 0 an adaptive percentage, 50 − nodes/125 (integer division), not
  below ``minimum_percentage_nodes_to_find``; never fewer than ``minimum_feasible_nodes``
  (:func:`nodes_to_find`);
- where: the search walks the node list from a start index kept across tasks, actions and
  sessions; after each search the index moves past the last node examined (the one that would
  have been one too many), so that the next task looks further on. A search that examined every
  node leaves it where it was;
- the best of the sample wins, a tie going to one of the tied nodes at random.

Volcano checks nodes on 16 goroutines, so its search may examine a few nodes past that point and
which of the tied nodes wins is not reproducible; here the search is sequential and the random
choice comes from a generator seeded once (``seed``), so that a run is deterministic.

Under ``mode="volcano"`` the ``nodeorder`` plugin also scores as kube-scheduler does, in integer
arithmetic (see plugins/nodeorder.py): Volcano's placements follow from where those integer
scores step down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("lavaflow", "volcano")

#: Volcano's defaults (cmd/scheduler/app/options).
DEFAULT_MINIMUM_FEASIBLE_NODES = 100
DEFAULT_MINIMUM_PERCENTAGE = 5
DEFAULT_PERCENTAGE = 0


@dataclass(frozen=True)
class NodeChoice:
    """The node-choice settings: ``mode`` and Volcano's three sampling options (used in volcano mode)."""

    mode: str = "lavaflow"
    minimum_feasible_nodes: int = DEFAULT_MINIMUM_FEASIBLE_NODES
    minimum_percentage_nodes_to_find: int = DEFAULT_MINIMUM_PERCENTAGE
    percentage_nodes_to_find: int = DEFAULT_PERCENTAGE
    seed: int = 0

    @property
    def volcano(self) -> bool:
        return self.mode == "volcano"

    def problems(self) -> list[tuple[str, str]]:
        """(option, message) for each setting that cannot be used."""
        out: list[tuple[str, str]] = []
        if self.mode not in MODES:
            out.append(("node-choice", f"{self.mode!r} is not one of {', '.join(MODES)}"))
        if self.minimum_feasible_nodes < 0:
            out.append(("minimum-feasible-nodes", f"{self.minimum_feasible_nodes} is negative; give 0 or more"))
        for name, value in (
            ("minimum-percentage-nodes-to-find", self.minimum_percentage_nodes_to_find),
            ("percentage-nodes-to-find", self.percentage_nodes_to_find),
        ):
            if not 0 <= value <= 100:
                out.append((name, f"{value} is not a percentage from 0 to 100"))
        return out

    def nodes_to_find(self, nodes: int) -> int:
        return nodes_to_find(
            nodes, self.minimum_feasible_nodes, self.minimum_percentage_nodes_to_find, self.percentage_nodes_to_find
        )


def nodes_to_find(nodes: int, minimum: int, minimum_percentage: int, percentage: int) -> int:
    """How many feasible nodes Volcano looks for before scoring, out of ``nodes``; at least 1 (with
    ``minimum`` 0 and a small cluster Volcano's own figure can be 0, and then no task is placed)."""
    if nodes <= minimum or percentage >= 100:
        return nodes
    share = percentage
    if share <= 0:
        share = max(50 - nodes // 125, minimum_percentage)
    return max(nodes * share // 100, minimum, min(nodes, 1))


class NodeSampler:
    """Volcano's sampling state, kept by the scheduler across sessions: the start index of the
    next search and the generator that breaks ties."""

    def __init__(self, choice: NodeChoice) -> None:
        self.choice = choice
        self.start = 0
        self.rng = np.random.default_rng(choice.seed)

    def sample(self, feasible: np.ndarray, nodes: int) -> np.ndarray:
        """The feasible nodes (``feasible``: sorted node indices) a search from the start index
        finds, in the order it finds them, and the start index moved on past that search."""
        found = len(feasible)
        if not found:
            self.start = 0 if nodes == 0 else self.start % nodes
            return feasible
        want = self.choice.nodes_to_find(nodes)
        start = self.start % nodes if nodes else 0
        pos = int(np.searchsorted(feasible, start))
        if found <= want:
            # Every node examined: all feasible ones are scored, the index stays.
            self.start = start
            return feasible if pos == 0 else np.concatenate((feasible[pos:], feasible[:pos]))
        ahead = found - pos
        if ahead > want:
            order = feasible[pos : pos + want + 1]
        else:
            order = np.concatenate((feasible[pos:], feasible[: want + 1 - ahead]))
        # The search stops at the first feasible node beyond the sample, counted as examined.
        self.start = (int(order[want]) + 1) % nodes
        return order[:want]

    def pick(self, candidates: np.ndarray, scores: np.ndarray) -> int:
        """The best-scoring candidate, a tie going to one of the tied at random (Volcano's
        SelectBestNodeAndScore)."""
        best = scores.max()
        tied = np.flatnonzero(scores == best)
        if len(tied) == 0:  # (NaN scores: the first candidate, as argmax would)
            return int(candidates[int(np.argmax(scores))])
        if len(tied) == 1:
            return int(candidates[int(tied[0])])
        return int(candidates[int(tied[int(self.rng.integers(len(tied)))])])
