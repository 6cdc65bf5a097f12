"""Elastic scheduling, one unit: the ``elastic`` plugin (:mod:`.plugin`: which jobs are elastic,
what they learned, their speed curves) and the ``elastic`` action (:mod:`.action`: the policy's
sizes, placement and the evictions and binds that reach them), meeting in :mod:`.state` (what is
kept between sessions, and the configuration resolved once). Both register by name like every
other action and plugin."""
