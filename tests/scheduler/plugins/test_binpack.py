"""The binpack plugin: it scores fuller nodes higher, by its weights; Volcano's shipped default
includes it."""

from __future__ import annotations

import numpy as np
import pytest
from plugin_helpers import scoring_cache

from scheduler_helpers import fn, make_pod, only, open_session, run_cycle


def test_binpack_prefers_fuller_node():
    cache = scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    ssn = open_session(cache, only("predicates", "binpack"))
    scores = fn(ssn, "NodeOrder", "binpack")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] > scores[0]
    # half: cpu (4+1)/8, memory (8+1)/16 → mean × 100
    assert scores[1] == pytest.approx(((5 / 8) + (9 / 16)) / 2 * 100)
    _, d = run_cycle(cache, only("gang", "predicates", "binpack"))
    assert d.binds == [("default/p", "half")]


def test_binpack_weight_argument():
    cache = scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.weight: 3\n      binpack.memory: 0\n'
    ssn = open_session(cache, text)
    scores = fn(ssn, "NodeOrder", "binpack")(cache.tasks["default/p"], np.arange(2))
    assert scores[1] == pytest.approx(5 / 8 * 100 * 3)


def test_default_conf_packs_with_binpack_and_spreads_without():
    cache = scoring_cache([make_pod("p", "j", cpu=1, mem="1Gi")])
    _, d = run_cycle(cache)  # shipped default includes binpack
    assert d.binds[0][0] == "default/p"
