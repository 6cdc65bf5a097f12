"""The node-choice options `lavaflow simulate` and `lavaflow scheduler` share: lavaflow's node
choice, or Volcano's sampling under vc-scheduler's flag names and defaults
(scheduler/framework/node_choice.py). Kept apart from common.py, whose imports the simulator's
start-up does not need."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from ..scheduler.framework.node_choice import NodeChoice

NodeChoiceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--node-choice",
        help="lavaflow: score every feasible node (default); volcano: score a sample of them as vc-scheduler does "
        "(implied by any of the three options below)",
    ),
]
MinimumFeasibleNodesOpt = Annotated[
    Optional[int],
    typer.Option(
        "--minimum-feasible-nodes",
        help="volcano node choice: the minimum number of feasible nodes to find and score (100)",
    ),
]
MinimumPercentageOpt = Annotated[
    Optional[int],
    typer.Option(
        "--minimum-percentage-nodes-to-find",
        help="volcano node choice: the minimum percentage of nodes to find and score (5)",
    ),
]
PercentageOpt = Annotated[
    Optional[int],
    typer.Option(
        "--percentage-nodes-to-find",
        help="volcano node choice: the percentage of nodes to find and score; 0: adaptive, 50 - nodes/125 (0)",
    ),
]


def node_choice_from_options(
    mode: str | None,
    minimum: int | None,
    minimum_percentage: int | None,
    percentage: int | None,
    seed: int = 0,
) -> tuple[NodeChoice, list[str]]:
    """The NodeChoice the options ask for, and one message per option that cannot be used."""
    from ..scheduler.framework import node_choice as nc

    sampling = {
        "--minimum-feasible-nodes": minimum,
        "--minimum-percentage-nodes-to-find": minimum_percentage,
        "--percentage-nodes-to-find": percentage,
    }
    given = [flag for flag, value in sampling.items() if value is not None]
    problems: list[str] = []
    if mode is None:
        mode = "volcano" if given else "lavaflow"
    elif mode == "lavaflow" and given:
        problems.append(
            f"{', '.join(given)}: Volcano's sampling options apply only with --node-choice volcano "
            "(lavaflow's node choice scores every feasible node)"
        )
    choice = nc.NodeChoice(
        mode=mode,
        minimum_feasible_nodes=nc.DEFAULT_MINIMUM_FEASIBLE_NODES if minimum is None else minimum,
        minimum_percentage_nodes_to_find=nc.DEFAULT_MINIMUM_PERCENTAGE
        if minimum_percentage is None
        else minimum_percentage,
        percentage_nodes_to_find=nc.DEFAULT_PERCENTAGE if percentage is None else percentage,
        seed=seed,
    )
    problems += [f"--{name}: {msg}" for name, msg in choice.problems()]
    return choice, problems
