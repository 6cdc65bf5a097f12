"""The dashboard's web application (Starlette) and its server (uvicorn).

Pages are rendered from the state on each request (``X-Fragment: 1`` asks for the ``<main>``
alone, as the live pages' script does). ``/stream`` sends server-sent events: one ``change``
event per burst of watch events (at most every ``coalesce`` seconds), naming the kinds that
changed since the client's version, and a comment every 15 s to keep the connection open.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from . import pages
from .forecast_column import ForecastColumn
from .model import State

log = logging.getLogger("lavaflow.dashboard")


class Broadcast:
    """Wakes every waiting stream when the state changed, at most every ``coalesce`` seconds."""

    def __init__(self, coalesce: float = 0.3) -> None:
        self.coalesce = coalesce
        self._tick: asyncio.Future[None] | None = None

    def wait(self) -> asyncio.Future[None]:
        if self._tick is None or self._tick.done():
            self._tick = asyncio.get_running_loop().create_future()
        return self._tick

    def fire(self) -> None:
        if self._tick is not None and not self._tick.done():
            self._tick.set_result(None)

    async def follow(self, changed: asyncio.Event, stop: asyncio.Event) -> None:
        """Fire after each change ``changed`` signals, until ``stop``."""
        while not stop.is_set():
            await changed.wait()
            changed.clear()
            self.fire()
            await asyncio.sleep(self.coalesce)


class Dashboard:
    """What the application serves: a state, whether it is live, and the forecast column."""

    def __init__(self, state: State, live: bool = False, forecast: ForecastColumn | None = None) -> None:
        self.state = state
        self.live = live
        self.forecast = forecast or ForecastColumn(entry=None)
        self.broadcast = Broadcast()
        self.keepalive = 15.0


async def forecast_loop(dash: Dashboard, objects: Any, conf: Any, stop: asyncio.Event, tick: float = 1.0) -> None:
    """Forecast again whenever the column is due (every ``interval`` seconds, sooner after jobs,
    pods, queues or nodes changed), in a thread (it
    simulates forward) from ``objects()`` (the cluster's objects as the informers hold them), and
    tell the pages that show the column."""
    import time

    column = dash.forecast
    if not column.available:
        return
    since = -1  # the state's version the last forecast started from
    while not stop.is_set():
        moved = dash.state.changed(since) if since >= 0 else None
        if column.due(moved is None or bool(moved & {"Job", "Pod", "Queue", "Node"})):
            since = dash.state.version
            await asyncio.to_thread(column.refresh, objects(), conf, time.time())
            dash.state.touch("Forecast")
            dash.broadcast.fire()
        await asyncio.sleep(tick)


def _render(dash: Dashboard, request: Request, section: str, kinds: str, title: str, body: str | None) -> Response:
    if body is None:
        return HTMLResponse(
            pages.page(dash.state, "Not found", f"<p>No {pages.e(title)}.</p>", section, kinds, False), 404
        )
    fragment = request.headers.get("x-fragment") == "1"
    return HTMLResponse(pages.page(dash.state, title, body, section, kinds, dash.live, fragment))


def make_app(dash: Dashboard) -> Starlette:
    st = dash.state
    fc = dash.forecast.text

    async def home(request: Request) -> Response:
        return RedirectResponse("/queues", 307)

    async def queues(request: Request) -> Response:
        return _render(dash, request, "queues", "Queue,Job,Node,Pod,Forecast", "Queues", pages.queues_page(st, fc))

    async def queue(request: Request) -> Response:
        name = request.path_params["name"]
        body = pages.queue_page(st, name, fc)
        return _render(dash, request, "queues", "Queue,Job,Node,Pod,Forecast", f"queue {name}", body)

    async def jobs(request: Request) -> Response:
        body = pages.jobs_page(st, fc, dict(request.query_params))
        return _render(dash, request, "jobs", "Job,Pod,Forecast", "Jobs", body)

    async def job(request: Request) -> Response:
        key = f"{request.path_params['ns']}/{request.path_params['name']}"
        return _render(dash, request, "jobs", "Job,Pod,Event,Forecast", f"job {key}", pages.job_page(st, key, fc))

    async def pod(request: Request) -> Response:
        key = f"{request.path_params['ns']}/{request.path_params['name']}"
        return _render(dash, request, "jobs", "Pod,Event", f"pod {key}", pages.pod_page(st, key))

    async def nodes(request: Request) -> Response:
        body = pages.nodes_page(st, dict(request.query_params))
        return _render(dash, request, "nodes", "Node,Pod", "Nodes", body)

    async def node(request: Request) -> Response:
        name = request.path_params["name"]
        return _render(dash, request, "nodes", "Node,Pod", f"node {name}", pages.node_page(st, name))

    async def elastic(request: Request) -> Response:
        return _render(dash, request, "elastic", "Elastic,Job,Pod", "Elastic jobs", pages.elastic_page(st))

    async def elastic_job(request: Request) -> Response:
        key = f"{request.path_params['ns']}/{request.path_params['name']}"
        body = pages.elastic_job_page(st, key)
        return _render(dash, request, "elastic", "Elastic,Job,Pod", f"elastic job {key}", body)

    async def stream(request: Request) -> Response:
        try:
            since = int(request.query_params.get("since", st.version))
        except ValueError:
            since = st.version

        async def events() -> AsyncIterator[str]:
            nonlocal since
            yield "retry: 2000\n\n"
            while True:
                if st.version == since:
                    try:
                        await asyncio.wait_for(asyncio.shield(dash.broadcast.wait()), dash.keepalive)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                kinds = st.changed(since)
                since = st.version
                when = _dt.datetime.now(_dt.UTC).strftime("%H:%M:%S")
                data: dict[str, Any] = {"version": since, "time": when}
                if kinds is not None:
                    data["kinds"] = sorted(kinds)
                yield f"event: change\ndata: {json.dumps(data)}\n\n"

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", home),
        Route("/queues", queues),
        Route("/queues/{name}", queue),
        Route("/jobs", jobs),
        Route("/jobs/{ns}/{name}", job),
        Route("/pods/{ns}/{name}", pod),
        Route("/nodes", nodes),
        Route("/nodes/{name}", node),
        Route("/elastic", elastic),
        Route("/elastic/{ns}/{name}", elastic_job),
        Route("/healthz", healthz),
    ]
    if dash.live:
        routes.append(Route("/stream", stream))
    return Starlette(routes=routes)


def server(app: Starlette, host: str, port: int) -> Any:
    """A uvicorn server for ``app`` (``await server.serve()``; ``server.should_exit = True`` stops it)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1, lifespan="off")
    return uvicorn.Server(config)
