"""Test doubles for the Kubernetes backend: an in-process API server (:mod:`.fake_apiserver`)
and a fake kubelet (:mod:`.fake_kubelet`). Used by the tests and the benchmarks, never by the
scheduler, controllers or webhook themselves."""

from .fake_apiserver import ApiDouble, webhook_admitter
from .fake_kubelet import FakeKubelet, fake_node, lift_not_ready_taint

__all__ = ["ApiDouble", "FakeKubelet", "fake_node", "lift_not_ready_taint", "webhook_admitter"]
