"""HTML reports: one page per run, charts embedded inline by :mod:`.charts`.

- :mod:`.simulation` — a simulation (or a --compare): Gantt chart of pods per node, allocation,
  queue shares, JCT distribution, jobs;
- :mod:`.elastic` — elastic policy runs (--compare-policies): JCT CDFs, GPU allocation, workers
  per job.
"""


def available() -> bool:
    """Whether the report extra (matplotlib) is installed: ``pip install 'lavaflow[report]'``."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
