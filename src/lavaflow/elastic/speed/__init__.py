"""Throughput models for elastic training jobs: the simulator's true speeds.

One module per source of measurements, and what they share:

* :mod:`.pollux`: jobs of the Pollux applications, from the Pollux traces (step times per
  placement and batch, work from gradient statistics; fixed or adaptive batch), with
  :mod:`.interpolation` for the step times of placements the traces did not measure;
* :mod:`.gavel`: jobs of Gavel's model configurations, from Gavel's throughputs (also the GPU-type
  factors of the Pollux applications);
* :mod:`.tabulated`: jobs with measured (workers -> rate) points;
* :mod:`.common`: placements in canonical form, rate curves, and progress over time for rates
  that change with the work done.

All curves are exposed as *rates* (work units per second) so the simulator and the policies need
not know which source a job uses.  The names below are the package's interface; module-level
settings (such as :data:`.pollux.DEFAULT_PHASES`) are changed in their own module.
"""

from .common import (
    advance,
    canonical_placement,
    consolidated_placement,
    next_bound,
    phase_bounds,
    rate_at,
    rate_curve,
    time_to,
)
from .gavel import GavelJobSpeed, GavelTable, gavel_table
from .pollux import (
    POLLUX_APPS,
    POLLUX_TO_GAVEL,
    REFERENCE_ALIASES,
    REFERENCE_TYPE,
    PolluxApp,
    PolluxJobSpeed,
    pollux_app,
    type_factor,
)
from .tabulated import TabulatedJobSpeed

__all__ = [
    "POLLUX_APPS",
    "POLLUX_TO_GAVEL",
    "REFERENCE_ALIASES",
    "REFERENCE_TYPE",
    "GavelJobSpeed",
    "GavelTable",
    "PolluxApp",
    "PolluxJobSpeed",
    "TabulatedJobSpeed",
    "advance",
    "canonical_placement",
    "consolidated_placement",
    "gavel_table",
    "next_bound",
    "phase_bounds",
    "pollux_app",
    "rate_at",
    "rate_curve",
    "time_to",
    "type_factor",
]
