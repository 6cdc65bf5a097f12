"""The dashboard's pages: plain HTML built from a :class:`~.model.State` alone (no I/O).

Every object has its own URL: ``/queues`` and ``/queues/NAME``, ``/jobs`` and ``/jobs/NS/NAME``,
``/pods/NS/NAME``, ``/nodes`` and ``/nodes/NAME``, ``/elastic`` and ``/elastic/NS/NAME``. Each page says which kinds
of records it shows (``data-kinds`` on its ``<main>``); on a live source a few lines of script
follow the server-sent events and fetch the page again when one of those kinds changed. Lists
are cut at :data:`ROWS` rows with a link to see the rest (``?all=1``), so that a page costs what
it shows.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Iterable
from html import escape
from typing import Any
from urllib.parse import quote

from ..api.core import PodPhase
from ..api.quantity import format_quantity
from ..api.sim_annotations import age_text
from ..api.volcano import JobPhase, PodGroupPhase
from .model import FINAL_JOB_PHASES, Job, State

ROWS = 500  # rows of a list shown unless ?all=1
PENDING_SHOWN = 20  # pending jobs listed per queue on the queue tree

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;font-size:14px}
header{background:#2b3a4a;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header a.on{text-decoration:underline}
header .src{margin-left:auto;font-weight:400;font-size:12px;opacity:.85}
main{padding:12px 16px}h1{font-size:20px;margin:4px 0 10px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;margin:4px 0 10px}td,th{border-bottom:1px solid #e3e3e3;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f4f6f8;font-weight:600}td.n{text-align:right;
font-variant-numeric:tabular-nums}.why{color:#8a3b00}.muted{color:#777}.bar{display:inline-block;
width:80px;height:8px;background:#e8eef4;margin-right:6px;vertical-align:middle}.bar i{display:block;
height:8px;background:#3182bd}.bar i.over{background:#d62728}.plot svg{max-width:100%;height:auto}
td a{white-space:nowrap}.kv td:first-child{color:#555;white-space:nowrap}.nw{white-space:nowrap}.live{font-size:12px}.pill{border-radius:8px;padding:0 6px;
background:#eee}.Running{background:#d9f2d9}.Pending,.Inqueue{background:#fff1cc}.Failed,.Aborted{background:#fbd5d5}
"""

# Follows the server-sent events: when a kind this page shows changed, the page is fetched again
# and its <main> replaced (one request per change burst; the server coalesces the events).
SCRIPT = """
(function(){var m=document.querySelector('main');if(!m||!window.EventSource)return;
var kinds=(m.dataset.kinds||'').split(','),busy=false,again=false,s=document.getElementById('live');
var es=new EventSource('/stream?since='+m.dataset.version);
function reload(){if(busy){again=true;return}busy=true;fetch(location.href,{headers:{'X-Fragment':'1'}})
.then(function(r){return r.text()}).then(function(t){var d=document.createElement('div');d.innerHTML=t;
var n=d.querySelector('main');if(n){m.replaceWith(n);m=n}}).finally(function(){busy=false;
if(again){again=false;reload()}})}
es.addEventListener('change',function(ev){var d=JSON.parse(ev.data);if(s)s.textContent='live · '+d.time;
if(!d.kinds||d.kinds.some(function(k){return kinds.indexOf(k)>=0}))reload()});
es.onerror=function(){if(s)s.textContent='live · reconnecting'};})();
"""

NAV = (("queues", "Queues"), ("jobs", "Jobs"), ("nodes", "Nodes"), ("elastic", "Elastic"))


def e(value: Any) -> str:
    return escape(str(value), quote=True)


def link(path: str, text: str) -> str:
    return f'<a href="{e(path)}">{e(text)}</a>'


def job_url(key: str) -> str:
    ns, _, name = key.partition("/")
    return f"/jobs/{quote(ns)}/{quote(name)}"


def pod_url(key: str) -> str:
    ns, _, name = key.partition("/")
    return f"/pods/{quote(ns)}/{quote(name)}"


def elastic_url(key: str) -> str:
    ns, _, name = key.partition("/")
    return f"/elastic/{quote(ns)}/{quote(name)}"


def qty(resource: str, amount: float) -> str:
    if math.isinf(amount):
        return "∞"
    return format_quantity(resource, amount)


def resources(d: dict[str, float]) -> str:
    if not d:
        return '<span class="muted">—</span>'
    return ", ".join(f"{e(k)} {e(qty(k, v))}" for k, v in sorted(d.items()) if v)


def bar(used: float, total: float) -> str:
    if not total or total <= 0:
        return ""
    frac = used / total
    cls = ' class="over"' if frac > 1.0 + 1e-9 else ""
    return f'<span class="bar"><i{cls} style="width:{min(frac, 1.0) * 100:.0f}%"></i></span>'


def pill(phase: str) -> str:
    return f'<span class="pill {e(phase)}">{e(phase or JobPhase.PENDING)}</span>'


class Clock:
    """Times as the source counts them: simulated seconds (t=…), or dates and ages."""

    def __init__(self, state: State) -> None:
        self.simulated = state.simulated
        self.now = state.now()

    def at(self, t: float | None) -> str:
        if t is None:
            return "—"
        if self.simulated:
            return f"t={t:.0f}s" if float(t).is_integer() else f"t={t:.1f}s"
        return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")

    def age(self, t: float | None) -> str:
        return "—" if t is None else age_text(self.now - t)


def table(head: Iterable[str], rows: Iterable[str], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    th = "".join(f'<th class="n">{e(h)}</th>' if i in nums else f"<th>{e(h)}</th>" for i, h in enumerate(head))
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def page(state: State, title: str, body: str, section: str, kinds: str, live: bool, fragment: bool = False) -> str:
    """A whole page (or, for a live page's refresh, its ``<main>`` alone)."""
    main = f'<main data-kinds="{e(kinds)}" data-version="{state.version}"><h1>{e(title)}</h1>{body}</main>'
    if fragment:
        return main
    nav = "".join(f'<a href="/{key}"{" class=on" if key == section else ""}>{text}</a>' for key, text in NAV)
    if state.simulated:
        when = f"simulation {e(state.source)} · {e(state.scheduler)} · at t={state.now():.0f}s of {state.end or 0:.0f}s"
    else:
        when = f"cluster {e(state.source)}"
    status = '<span id="live" class="live">live</span>' if live else ""
    script = f"<script>{SCRIPT}</script>" if live else ""
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>{e(title)} · lavaflow</title><style>{CSS}</style></head><body>"
        f'<header><a href="/queues">lavaflow</a>{nav}<span class="src">{when} {status}</span></header>'
        f"{main}{script}</body></html>"
    )


# ---------------------------------------------------------------------- queues
def queues_page(state: State, forecast: Callable[..., str]) -> str:
    deserved = state.deserved()
    children = state.children()
    by_queue = state.jobs_by_queue()
    rows: list[str] = []

    def walk(name: str, depth: int) -> None:
        q = state.queues.get(name)
        if q is None:
            return
        jobs = by_queue.get(name, [])
        pending = sorted((j for j in jobs if j.pending), key=lambda j: (j.created or 0.0, j.key))
        running = sum(1 for j in jobs if j.phase == JobPhase.RUNNING)
        shares = []
        d = deserved.get(name)
        for res in sorted(set(d or {}) | set(q.allocated)):
            if res == "pods":
                continue
            a = q.allocated.get(res, 0.0)
            if d is None:  # (root: the proportion plugin deserves nothing to it)
                shares.append(f"{e(res)} {e(qty(res, a))}")
            else:
                want = d.get(res, 0.0)
                shares.append(f"{bar(a, want)}{e(res)} {e(qty(res, a))} / {e(qty(res, want))}")
        listed = "".join(
            f"<li>{link(job_url(j.key), j.key)} <span class=why>{e(j.why or '')}</span>"
            f" <span class=muted>start: {e(forecast(j.key, j.podgroup))}</span></li>"
            for j in pending[:PENDING_SHOWN]
        )
        more = (
            f"<li>{link(f'/jobs?queue={quote(name)}&phase=Pending', f'… {len(pending) - PENDING_SHOWN} more')}</li>"
            if len(pending) > PENDING_SHOWN
            else ""
        )
        rows.append(
            "<tr>"
            f'<td style="padding-left:{8 + 18 * depth}px">{link(f"/queues/{quote(name)}", name)}</td>'
            f"<td>{e(q.state)}</td><td class=n>{q.weight:g}</td>"
            f"<td>{resources(q.capability)}</td><td>{resources(q.guarantee)}</td>"
            f"<td class=nw>{'<br>'.join(shares) or '—'}</td><td class=n>{running}</td><td class=n>{len(pending)}</td>"
            f"<td><ul style='margin:0;padding-left:16px'>{listed}{more}</ul></td></tr>"
        )
        for child in children.get(name, []):
            walk(child, depth + 1)

    roots = ["root"] if "root" in state.queues else []
    roots += [n for n in children.get("root", []) if "root" not in state.queues]
    for r in roots:
        walk(r, 0)
    head = (
        "queue",
        "state",
        "weight",
        "capability",
        "guarantee",
        "allocated / deserved",
        "running",
        "pending",
        "pending jobs (why)",
    )
    return table(head, rows, numeric=(2, 6, 7))


def queue_page(state: State, name: str, forecast: Callable[..., str]) -> str | None:
    from . import plots

    q = state.queues.get(name)
    if q is None:
        return None
    d = state.deserved().get(name, {})
    total: dict[str, float] = {}
    for n in state.nodes.values():
        for k, v in n.allocatable.items():
            total[k] = total.get(k, 0.0) + v
    rows = []
    for res in sorted(set(d) | set(q.allocated) | set(q.capability)):
        t = total.get(res)
        if res == "pods" or not t:
            continue
        cap = q.capability.get(res)
        rows.append((res, d.get(res, 0.0) / t, q.allocated.get(res, 0.0) / t, None if cap is None else cap / t))
    kv = (
        f"<table class=kv><tr><td>parent</td><td>{link('/queues/' + quote(q.parent), q.parent) if q.parent else '—'}</td></tr>"
        f"<tr><td>state</td><td>{e(q.state)}</td></tr><tr><td>weight</td><td>{q.weight:g}</td></tr>"
        f"<tr><td>capability</td><td>{resources(q.capability)}</td></tr>"
        f"<tr><td>guarantee</td><td>{resources(q.guarantee)}</td></tr>"
        f"<tr><td>deserved</td><td>{resources(d)}</td></tr>"
        f"<tr><td>allocated</td><td>{resources(q.allocated)}</td></tr></table>"
    )
    chart = plots.shares_chart(rows) if rows else ""
    jobs = [j for j in state.jobs.values() if j.queue == name and j.phase not in FINAL_JOB_PHASES]
    return kv + chart + "<h2>Jobs not finished</h2>" + jobs_table(state, jobs, forecast, limit=ROWS)


# ---------------------------------------------------------------------- jobs
def _counts(state: State, job: Job) -> str:
    pods = state.pods_of(job.key)
    running = sum(1 for p in pods if p.phase == PodPhase.RUNNING)
    return f"{running}/{len(pods)}"


def jobs_table(
    state: State, jobs: list[Job], forecast: Callable[..., str], limit: int | None = ROWS, more_url: str = ""
) -> str:
    clock = Clock(state)
    order: dict[str, int] = {JobPhase.PENDING: 0, PodGroupPhase.INQUEUE: 1, JobPhase.RUNNING: 2}
    jobs = sorted(jobs, key=lambda j: (order.get(j.phase, 3), j.created or 0.0, j.key))
    shown = jobs if limit is None else jobs[:limit]
    rows = [
        "<tr>"
        f"<td>{link(job_url(j.key), j.key)}</td><td>{e(j.kind)}</td>"
        f"<td>{link('/queues/' + quote(j.queue), j.queue)}</td><td>{pill(j.phase)}</td>"
        f"<td class=n>{clock.age(j.created)}</td><td class=n>{_counts(state, j)}</td>"
        f"<td class=why>{e(j.why or '') if j.pending else ''}</td>"
        f"<td class=forecast>{e(forecast(j.key, j.podgroup)) if j.pending else ''}</td></tr>"
        for j in shown
    ]
    out = table(("job", "kind", "queue", "phase", "age", "pods running", "why pending", "forecast start"), rows, (4, 5))
    if len(shown) < len(jobs):
        out += f"<p class=muted>{len(jobs) - len(shown)} more: {link(more_url or '?all=1', 'show all')}</p>"
    return out


def jobs_page(state: State, forecast: Callable[..., str], query: dict[str, str]) -> str:
    jobs = list(state.jobs.values())
    for field in ("queue", "phase", "kind", "namespace"):
        want = query.get(field)
        if want:
            jobs = [j for j in jobs if getattr(j, field) == want]
    filters = " · ".join(f"{f}={e(v)}" for f, v in query.items() if f in ("queue", "phase", "kind", "namespace") and v)
    more = "?" + "&".join(f"{k}={quote(v)}" for k, v in {**query, "all": "1"}.items())
    note = f"<p class=muted>filtered: {filters} ({link('/jobs', 'all jobs')})</p>" if filters else ""
    return note + jobs_table(state, jobs, forecast, None if query.get("all") else ROWS, more)


def job_page(state: State, key: str, forecast: Callable[..., str]) -> str | None:
    job = state.jobs.get(key)
    if job is None:
        return None
    clock = Clock(state)
    pods = sorted(state.pods_of(key), key=lambda p: (p.task or "", p.name))
    kv = [
        ("kind", e(job.kind) + (f" (for {e(job.owner)})" if job.owner else "")),
        ("queue", link("/queues/" + quote(job.queue), job.queue)),
        ("phase", pill(job.phase)),
        ("created", f"{clock.at(job.created)} ({clock.age(job.created)} ago)"),
        ("minMember", e(job.min_member if job.min_member is not None else "—")),
        ("PodGroup", e(job.podgroup or "—")),
    ]
    if job.pending:
        kv.append(("why pending", f'<span class="why" id="why">{e(job.why or "—")}</span>'))
        kv.append(("forecast start", f'<span class="forecast">{e(forecast(key, job.podgroup))}</span>'))
    if job.elastic:
        kv.append(("elastic", link(elastic_url(key), f"workers {job.elastic}: resizes and throughput")))
    out = "<table class=kv>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in kv) + "</table>"
    tasks: dict[str, dict[str, int]] = {}
    for p in pods:
        counts = tasks.setdefault(p.task or "—", {})
        counts[p.phase] = counts.get(p.phase, 0) + 1
    out += "<h2>Tasks</h2>" + table(
        ("task", "pods by phase"),
        (
            f"<td>{e(t)}</td><td>{', '.join(f'{e(ph)} {n}' for ph, n in sorted(c.items()))}</td>".join(
                ("<tr>", "</tr>")
            )
            for t, c in sorted(tasks.items())
        ),
    )
    out += "<h2>Pods</h2>" + table(
        ("pod", "task", "node", "phase", "requests", "created", "started", "finished", "reason"),
        (
            "<tr>"
            f"<td>{link(pod_url(p.key), p.name)}</td><td>{e(p.task or '')}</td>"
            f"<td>{link('/nodes/' + quote(p.node), p.node) if p.node else '—'}</td><td>{pill(p.phase)}</td>"
            f"<td>{resources(p.requests)}</td><td>{clock.at(p.created)}</td><td>{clock.at(p.started)}</td>"
            f"<td>{clock.at(p.finished)}</td><td>{e(p.reason or '')}</td></tr>"
            for p in pods[:ROWS]
        ),
    )
    if job.conditions:
        out += "<h2>PodGroup conditions</h2>" + table(
            ("type", "status", "reason", "message"),
            (
                f"<tr><td>{e(c.get('type', ''))}</td><td>{e(c.get('status', ''))}</td>"
                f"<td>{e(c.get('reason', ''))}</td><td>{e(c.get('message', ''))}</td></tr>"
                for c in job.conditions
            ),
        )
    out += "<h2>Phase history</h2>" + table(
        ("time", "phase"), (f"<tr><td>{clock.at(t)}</td><td>{pill(ph)}</td></tr>" for t, ph in job.history)
    )
    if job.decisions:
        out += "<h2>Decisions (as <code>lavaflow simulate --explain</code>)</h2>" + table(
            ("time", "action", "message"),
            (
                f"<tr><td>{clock.at(d.get('time'))}"
                + (f"–{clock.at(d.get('until'))}" if d.get("until") not in (None, d.get("time")) else "")
                + f"</td><td>{e(d.get('action', ''))}</td><td>{e(d.get('message', ''))}</td></tr>"
                for d in job.decisions
            ),
        )
    events = state.events_of(key, job.podgroup if job.podgroup != key else None, *(p.key for p in pods[:ROWS]))
    return out + "<h2>Events</h2>" + events_table(clock, events)


def events_table(clock: Clock, events: list[Any]) -> str:
    if not events:
        return "<p class=muted>none</p>"
    return table(
        ("time", "object", "type", "reason", "message"),
        (
            f"<tr><td>{clock.at(ev.time)}</td><td>{e(ev.kind)} {e(ev.object)}</td><td>{e(ev.type)}</td>"
            f"<td>{e(ev.reason)}</td><td>{e(ev.message)}{f' (×{ev.count})' if ev.count > 1 else ''}</td></tr>"
            for ev in events[-100:]
        ),
    )


def pod_page(state: State, key: str) -> str | None:
    p = state.pods.get(key)
    if p is None:
        return None
    clock = Clock(state)
    kv = [
        ("job", link(job_url(p.job), p.job) if p.job and p.job in state.jobs else e(p.job or "—")),
        ("task", e(p.task or "—")),
        ("node", link("/nodes/" + quote(p.node), p.node) if p.node else "—"),
        ("phase", pill(p.phase)),
        ("requests", resources(p.requests)),
        ("created", clock.at(p.created)),
        ("started", clock.at(p.started)),
        ("finished", clock.at(p.finished)),
        ("reason", e(p.reason or "—")),
    ]
    out = "<table class=kv>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in kv) + "</table>"
    return out + "<h2>Events</h2>" + events_table(clock, state.events_of(key))


# ---------------------------------------------------------------------- nodes
def nodes_page(state: State, query: dict[str, str]) -> str:
    from . import plots

    by_type: dict[str, list[float]] = {}
    for n in state.nodes.values():
        gpus = sum(v for k, v in n.allocatable.items() if k.endswith("/gpu"))
        if not gpus:
            continue
        used = sum(v for k, v in state.node_used.get(n.name, {}).items() if k.endswith("/gpu"))
        acc = by_type.setdefault(n.gpu_type or "unlabelled", [0.0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += used
        acc[2] += gpus
    out = ""
    if by_type:
        out += "<h2>GPUs by type</h2>" + table(
            ("type", "nodes", "allocated", "allocatable", "free"),
            (
                f"<tr><td>{e(t)}</td><td class=n>{n:.0f}</td><td class=n>{u:g}</td><td class=n>{a:g}</td>"
                f"<td class=n>{a - u:g}</td></tr>"
                for t, (n, u, a) in sorted(by_type.items())
            ),
            (1, 2, 3, 4),
        )
        out += plots.gpus_chart([(t, u, a) for t, (_, u, a) in sorted(by_type.items())])
    names = sorted(state.nodes)
    shown = names if query.get("all") else names[:ROWS]
    cols = sorted({k for n in state.nodes.values() for k in n.allocatable} - {"pods"})
    rows = []
    for name in shown:
        n = state.nodes[name]
        node_used = state.node_used.get(name, {})
        cells = "".join(
            f"<td>{bar(node_used.get(c, 0.0), n.allocatable.get(c, 0.0))}{e(qty(c, node_used.get(c, 0.0)))} / "
            f"{e(qty(c, n.allocatable.get(c, 0.0)))}</td>"
            for c in cols
        )
        flags = ", ".join(x for x, on in (("unschedulable", n.unschedulable), ("not ready", not n.ready)) if on)
        rows.append(
            f"<tr><td>{link('/nodes/' + quote(name), name)}</td><td>{e(n.gpu_type or '')}</td>{cells}"
            f"<td class=n>{sum(1 for p in state.pods_on(name) if p.holds)}</td><td>{e(flags)}</td></tr>"
        )
    out += "<h2>Allocation by resource (requested / allocatable)</h2>" + table(
        ("node", "GPU type", *cols, "pods bound", ""), rows
    )
    if len(shown) < len(names):
        out += f"<p class=muted>{len(names) - len(shown)} more: {link('/nodes?all=1', 'show all')}</p>"
    return out


def node_page(state: State, name: str) -> str | None:
    n = state.nodes.get(name)
    if n is None:
        return None
    clock = Clock(state)
    used = state.node_used.get(name, {})
    rows = (
        f"<tr><td>{e(c)}</td><td>{bar(used.get(c, 0.0), a)}{e(qty(c, used.get(c, 0.0)))}</td><td>{e(qty(c, a))}</td></tr>"
        for c, a in sorted(n.allocatable.items())
    )
    out = f"<p>GPU type: {e(n.gpu_type or '—')}{' · unschedulable' if n.unschedulable else ''}</p>"
    out += table(("resource", "requested", "allocatable"), rows)
    pods = sorted(state.pods_on(name), key=lambda p: p.key)
    out += "<h2>Pods</h2>" + table(
        ("pod", "job", "phase", "requests", "started"),
        (
            f"<tr><td>{link(pod_url(p.key), p.key)}</td><td>{link(job_url(p.job), p.job) if p.job else '—'}</td><td>{pill(p.phase)}</td>"
            f"<td>{resources(p.requests)}</td><td>{clock.at(p.started)}</td></tr>"
            for p in pods[:ROWS]
        ),
    )
    return out


# ---------------------------------------------------------------------- elastic
def elastic_page(state: State) -> str:
    rows = []
    for key, el in sorted(state.elastic.items()):
        job = state.jobs.get(key)
        running = sum(1 for p in state.pods_of(key) if p.phase == PodPhase.RUNNING and p.gpus)
        last = el.history[-1] if el.history else None
        rows.append(
            f"<tr><td>{link(elastic_url(key), key)}</td><td>{pill(job.phase if job else '?')}</td>"
            f"<td class=n>{running}</td><td>{e(job.elastic if job and job.elastic not in (None, 'elastic') else '')}</td>"
            f"<td class=n>{len(el.history)}</td><td>{e(last.reason if last else '')}</td>"
            f"<td>{e(el.throughput)}</td><td class=n>{'' if el.progress is None else f'{100 * el.progress:.0f}%'}</td></tr>"
        )
    if not rows:
        return "<p class=muted>No elastic training job.</p>"
    return table(
        ("job", "phase", "workers running", "range", "changes", "last change", "last reported throughput", "progress"),
        rows,
        (2, 4, 7),
    )


def elastic_job_page(state: State, key: str) -> str | None:
    from . import plots

    el = state.elastic.get(key)
    if el is None:
        return None
    clock = Clock(state)
    job = state.jobs.get(key)
    out = f"<p>{link(job_url(key), 'job ' + key)} · last reported throughput: <b id=throughput>{e(el.throughput)}</b>"
    if el.progress is not None:
        out += f" · progress {100 * el.progress:.0f}%"
    out += "</p>"
    end = state.now()
    if job is not None and job.phase in FINAL_JOB_PHASES and job.history:
        end = job.history[-1][0]
    out += plots.workers_chart(el.history, end, state.simulated)
    out += "<h2>Worker count changes</h2>" + table(
        ("time", "workers", "GPU type", "reason"),
        (
            f'<tr class="resize"><td>{clock.at(r.time)}</td><td class=n>{r.workers}</td><td>{e(r.gpu_type or "")}</td>'
            f"<td>{e(r.reason)}</td></tr>"
            for r in el.history
        ),
        (1,),
    )
    return out
