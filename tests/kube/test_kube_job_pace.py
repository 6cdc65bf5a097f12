"""The job controller writes at the server's pace (issue 40), against the API double.

A Job's pods go out in slow-start batches (1, 2, 4, ...; the next only after one without an
error), inside the client's QPS budget; a key's writes are sent while the next keys sync, so no
Job waits for another's PodGroup, pods or status; a Job's PodGroup exists before its pods; and a
create the server refuses is an error line with the object and the HTTP status, a metric, and a
retry with back-off.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("prometheus_client")

from lavaflow.kube.client import ClientConfig, KubeClient, RateLimiter  # noqa: E402
from lavaflow.testing import ApiDouble  # noqa: E402

REFUSED = "lavaflow_api_writes_refused_total"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_rate_limiter_lets_a_burst_through_then_paces_at_qps():
    now = [50.0]
    rl = RateLimiter(qps=20.0, burst=3, clock=lambda: now[0])
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [round(rl.reserve(), 6) for _ in range(3)] == [0.05, 0.1, 0.15]  # queued 1/qps apart
    assert rl.delayed == 3
    now[0] += 60.0  # idle: the bucket refills to the burst, no further
    assert [rl.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rl.reserve() > 0
    assert RateLimiter(qps=0, burst=1).reserve() == 0.0  # qps 0: unlimited


def test_client_requests_keep_to_qps_after_the_burst():
    """Twelve requests at QPS 20, burst 4: four at once, the other eight 50 ms apart."""

    async def scenario():
        double = ApiDouble().start()
        try:
            client = KubeClient(ClientConfig(server=double.url, qps=20.0, burst=4))
            t0 = time.monotonic()
            await asyncio.gather(*(client.request("GET", "/api/v1/namespaces/default/pods") for _ in range(12)))
            took = time.monotonic() - t0
            await client.close()
        finally:
            double.stop()
        assert took >= 8 / 20 - 0.02, took
        assert client.limiter.delayed == 8

    run(scenario())
