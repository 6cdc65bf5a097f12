"""The typed phases, actions and events (StrEnums): they stay the strings they stand for, and they
agree with the places that must still spell them out."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from lavaflow import jsonout
from lavaflow.api import x_k8s_podgroup as xpg
from lavaflow.api.core import PodPhase, PodStatus
from lavaflow.api.volcano import JobAction, JobEvent, JobFlowPhase, JobPhase, PodGroupPhase

ENUMS = (PodPhase, JobPhase, JobAction, JobEvent, PodGroupPhase, JobFlowPhase, xpg.CoschedulingPhase)


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_a_member_is_written_as_its_value_wherever_output_is_made(enum):
    for m in enum:
        v = m.value
        assert type(v) is str
        assert (str(m), f"{m}", format(m, "<12")) == (v, v, format(v, "<12"))
        assert "%-12s|" % (m,) == "%-12s|" % (v,)  # noqa: UP031 (as the vcctl tables format)
        assert json.dumps({m: [m]}) == json.dumps({v: [v]})
        assert jsonout.dumps({m: {"phase": m, "x": [m, 1]}}) == jsonout.dumps({v: {"phase": v, "x": [v, 1]}})
        assert m == v and hash(m) == hash(v) and {v: 1}[m] == 1


def test_the_pod_status_literal_spells_the_pod_phases():
    # PodStatus.phase stays a Literal: as an enum its errors and JSON schema would change.
    assert get_args(PodStatus.model_fields["phase"].annotation) == tuple(p.value for p in PodPhase)
    assert PodStatus().phase == PodPhase.PENDING


def test_the_coscheduling_phases_are_the_upstream_crds():
    assert xpg.PHASES == ("Pending", "Scheduling", "Running", "Finished", "Failed", "Unknown")
