"""Table formatters: the simulation's result tables (rich) and the vcctl / Voda style listings
of jobs, queues and training jobs on a cluster (plain fixed-width text, as those tools print)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

# The phase enums (api/phases.py) are imported by the two listings that read them: building
# six StrEnums is 1 % of every command's start-up (`lavaflow version`, `lavaflow simulate`).


def fmt_time(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _job_table(result: dict[str, Any]) -> Table:
    t = Table(title=f"scheduler: {result['scheduler']}", title_justify="left")
    for col in ("job", "queue", "phase", "submitted", "started", "finished", "waited", "ran"):
        t.add_column(col, justify="right" if col not in ("job", "queue", "phase") else "left")
    for j in result["jobs"]:
        waited = None if j["startTime"] is None else j["startTime"] - j["submitTime"]
        ran = None if j["startTime"] is None or j["finishTime"] is None else j["finishTime"] - j["startTime"]
        t.add_row(
            f"{j['namespace']}/{j['name']}",
            j["queue"],
            j["phase"],
            fmt_time(j["submitTime"]),
            fmt_time(j["startTime"]),
            fmt_time(j["finishTime"]),
            fmt_time(waited),
            fmt_time(ran),
        )
    return t


SUMMARY_ROWS = (
    ("completed", "completed", str),
    ("failed", "failed", str),
    ("stuck", "stuck", str),
    ("makespan (s)", "makespan", fmt_time),
    ("mean JCT (s)", "jctMean", fmt_time),
    ("p50 JCT (s)", "jctP50", fmt_time),
    ("p95 JCT (s)", "jctP95", fmt_time),
    ("mean wait (s)", "waitMean", fmt_time),
    ("p50 wait (s)", "waitP50", fmt_time),
    ("p95 wait (s)", "waitP95", fmt_time),
    ("mean CPU allocated", "cpuAllocationMean", fmt_pct),
    ("mean GPU allocated", "gpuAllocationMean", fmt_pct),
)


def summary_table(results: list[dict[str, Any]]) -> Table:
    t = Table(title="summary", title_justify="left")
    t.add_column("")
    for r in results:
        t.add_column(r["scheduler"], justify="right")
    for label, key, fmt in SUMMARY_ROWS:
        t.add_row(label, *[fmt(r["summary"].get(key)) if r["summary"].get(key) is not None else "-" for r in results])
    t.add_row("stalled", *[f"yes (t={fmt_time(r.get('stalledAt'))})" if r["stalled"] else "no" for r in results])
    t.add_row("end time (s)", *[fmt_time(r["endTime"]) for r in results])
    return t


def print_results_table(results: list[dict[str, Any]]) -> None:
    out = Console(width=max(Console().width, 100))
    for r in results:
        out.print(_job_table(r))
    out.print(summary_table(results))
    for r in results:
        for x in r.get("rejected", []):
            where = f"{x['namespace']}/{x['name']}" if x.get("namespace") else x["name"]
            out.print(
                f"{r['scheduler']}: {x['kind']} {where} refused at t={fmt_time(x['time'])}: {x['reason']}",
                markup=False,
                highlight=False,
            )
        if r["stuck"]:
            out.print(
                f"[bold red]{r['scheduler']}: {len(r['stuck'])} job(s) did not finish"
                f"{' — stalled at t=' + fmt_time(r.get('stalledAt')) if r['stalled'] else ''}:[/bold red]"
            )
            for s in r["stuck"]:
                out.print(
                    f"  {s['namespace']}/{s['name']}: {s['reason']}", markup=False, highlight=False, soft_wrap=True
                )
        lost = [j for j in r["jobs"] if j.get("reason")]
        if lost:
            out.print(f"[bold red]{r['scheduler']}: {len(lost)} job(s) ended without completing their work:[/bold red]")
            for j in lost:
                out.print(
                    f"  {j['namespace']}/{j['name']}: {j['phase']}: {j['reason']}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )


def _created(obj: dict[str, Any]) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp") or ""
    return ts[:10]


def _age(seconds: float | None) -> str:
    from ..api.sim_annotations import age_text  # (not at start: it loads the API models)

    return "-" if seconds is None else age_text(seconds)


def _ts(value: Any) -> float | None:
    from ..kube.codec import parse_time

    t = parse_time(value)
    return t if isinstance(t, float) else None


def format_jobs(jobs: list[dict[str, Any]], all_namespaces: bool = False) -> str:
    """vcctl's `job list` table."""
    if not jobs:
        return "No resources found\n"
    name_w = max(len("Name"), *(len(j["metadata"]["name"]) for j in jobs)) + 3
    ns_w = max(len("Namespace"), *(len(j["metadata"].get("namespace", "")) for j in jobs)) + 3
    fmt = f"%-{name_w}s%-15s%-12s%-12s%-12s%-6s%-10s%-10s%-12s%-10s%-12s%-10s"
    head = (
        "Name",
        "Creation",
        "Phase",
        "JobType",
        "Replicas",
        "Min",
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "RetryCount",
    )
    lines = [((f"%-{ns_w}s" % "Namespace") if all_namespaces else "") + fmt % head]
    for j in jobs:
        st = j.get("status") or {}
        spec = j.get("spec") or {}
        row = (
            j["metadata"]["name"],
            _created(j),
            (st.get("state") or {}).get("phase", ""),
            (j["metadata"].get("labels") or {}).get("volcano.sh/job-type", "Batch"),
            sum(int(t.get("replicas", 0)) for t in spec.get("tasks") or []),
            st.get("minAvailable", 0),
            st.get("pending", 0),
            st.get("running", 0),
            st.get("succeeded", 0),
            st.get("failed", 0),
            st.get("unknown", 0),
            st.get("retryCount", 0),
        )
        lines.append(((f"%-{ns_w}s" % j["metadata"].get("namespace", "")) if all_namespaces else "") + fmt % row)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_queues(queues: list[dict[str, Any]], podgroups: list[dict[str, Any]]) -> str:
    """vcctl's `queue list` table (PodGroup counts computed here, as vcctl does)."""
    from ..api.phases import PodGroupPhase

    # vcctl's `queue list` counts the PodGroups in these phases, in this column order.
    columns = (
        PodGroupPhase.INQUEUE,
        PodGroupPhase.PENDING,
        PodGroupPhase.RUNNING,
        PodGroupPhase.UNKNOWN,
        PodGroupPhase.COMPLETED,
    )
    fmt = "%-25s%-8s%-8s%-8s%-8s%-8s%-8s%-8s%-8s"
    lines = [fmt % ("Name", "Weight", "State", "Parent", *columns)]
    for q in sorted(queues, key=lambda q: q["metadata"]["name"]):
        name = q["metadata"]["name"]
        counts = dict.fromkeys(columns, 0)
        for pg in podgroups:
            if ((pg.get("spec") or {}).get("queue") or "default") == name:
                ph = (pg.get("status") or {}).get("phase") or PodGroupPhase.PENDING
                if ph in counts:
                    counts[ph] += 1
        spec = q.get("spec") or {}
        parent = spec.get("parent") or ("" if name == "root" else "root")
        lines.append(
            fmt
            % (
                name,
                spec.get("weight", 1),
                (q.get("status") or {}).get("state", ""),
                parent,
                *(counts[p] for p in columns),
            )
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def describe_job(j: dict[str, Any]) -> str:
    """A `kubectl describe`-like view (vcctl job view)."""
    meta, spec, st = j["metadata"], j.get("spec") or {}, j.get("status") or {}
    out = [
        f"Name:         {meta['name']}",
        f"Namespace:    {meta.get('namespace', '')}",
        f"Labels:       {', '.join(f'{k}={v}' for k, v in (meta.get('labels') or {}).items()) or '<none>'}",
        f"Annotations:  {', '.join(f'{k}={v}' for k, v in (meta.get('annotations') or {}).items()) or '<none>'}",
        f"API Version:  {j.get('apiVersion')}",
        f"Kind:         {j.get('kind')}",
        "Metadata:",
        f"  Creation Timestamp:  {meta.get('creationTimestamp', '')}",
        f"  UID:                 {meta.get('uid', '')}",
        "Spec:",
        f"  Min Available:     {spec.get('minAvailable', 0)}",
        f"  Queue:             {spec.get('queue', 'default')}",
        f"  Scheduler Name:    {spec.get('schedulerName', '')}",
        f"  Max Retry:         {spec.get('maxRetry', 3)}",
        "  Tasks:",
    ]
    for t in spec.get("tasks") or []:
        out.append(f"    Name:           {t.get('name', '')}")
        out.append(f"    Replicas:       {t.get('replicas', 0)}")
        out.append(f"    Min Available:  {t.get('minAvailable', t.get('replicas', 0))}")
        for c in ((t.get("template") or {}).get("spec") or {}).get("containers") or []:
            req = (c.get("resources") or {}).get("requests") or {}
            out.append(
                f"      Container:  {c.get('name', '')}  Image: {c.get('image', '')}  Requests: {req or '<none>'}"
            )
    state = st.get("state") or {}
    out += [
        "Status:",
        "  State:",
        f"    Phase:                 {state.get('phase', '')}",
        f"    Reason:                {state.get('reason', '') or ''}",
        f"    Message:               {state.get('message', '') or ''}",
        f"    Last Transition Time:  {state.get('lastTransitionTime', '')}",
        f"  Min Available:  {st.get('minAvailable', 0)}",
        f"  Pending:        {st.get('pending', 0)}",
        f"  Running:        {st.get('running', 0)}",
        f"  Succeeded:      {st.get('succeeded', 0)}",
        f"  Failed:         {st.get('failed', 0)}",
        f"  Unknown:        {st.get('unknown', 0)}",
        f"  Retry Count:    {st.get('retryCount', 0)}",
        f"  Version:        {st.get('version', 0)}",
    ]
    return "\n".join(out) + "\n"


def format_train_jobs(
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    now: float | None = None,
    podgroups: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> str:
    """Voda's `get jobs`: NAME STATUS WORKERS SCHEDULER WAITING RUNNING TOTAL (times as durations),
    then RESIZES and THROUGHPUT.

    WORKERS counts the running GPU workers (not those being deleted); for an elastic job its range
    follows in brackets. RESIZES counts the ``Resized`` Events on the job's PodGroup (those the API
    server still holds: it drops Events after its --event-ttl, one hour by default); "-" for a job
    that is not elastic, "?" when the Events could not be read. THROUGHPUT is what the job last
    reported (``lavaflow.io/metrics`` on its PodGroup, else on the Job) for the configuration it
    runs on now, else its newest measurement: samples per second from a measured step time, or
    work units per second from a measured rate; "-" before its first report."""
    import time as _time

    from ..api.phases import JOB_FINAL_PHASES, JobPhase, PodPhase

    now = now or _time.time()
    rows = [("NAME", "STATUS", "WORKERS", "SCHEDULER", "WAITING", "RUNNING", "TOTAL", "RESIZES", "THROUGHPUT")]
    by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in pods:
        labels = p["metadata"].get("labels") or {}
        if "volcano.sh/job-name" in labels:
            by_job.setdefault((p["metadata"].get("namespace", ""), labels["volcano.sh/job-name"]), []).append(p)
    pg_of = _podgroups_by_job(podgroups or [])
    resized = _resize_counts(events) if events is not None else None
    for j in sorted(jobs, key=lambda j: j["metadata"]["name"]):
        meta, st = j["metadata"], j.get("status") or {}
        phase = (st.get("state") or {}).get("phase", "") or JobPhase.PENDING
        mine = by_job.get((meta.get("namespace", ""), meta["name"]), [])
        gpu_pods = [p for p in mine if _gpu_pod(p)] or mine
        running_pods = [
            p
            for p in gpu_pods
            if (p.get("status") or {}).get("phase") == PodPhase.RUNNING and not p["metadata"].get("deletionTimestamp")
        ]
        workers = len(running_pods)
        rng = _elastic_range(j)
        created = _ts(meta.get("creationTimestamp")) or now
        starts = [t for t in (_ts((p.get("status") or {}).get("startTime")) for p in mine) if t is not None]
        first = min(starts) if starts else None
        finished = phase in JOB_FINAL_PHASES
        end = (_ts((st.get("state") or {}).get("lastTransitionTime")) or now) if finished else now
        waiting = (first if first is not None else end) - created
        running = (end - first) if first is not None else 0.0
        pg = pg_of.get((meta.get("namespace", ""), meta.get("uid") or "")) or pg_of.get(
            (meta.get("namespace", ""), f"{meta['name']}-{meta.get('uid', '')}")
        )
        if not rng:
            resizes = "-"
        elif resized is None:
            resizes = "?"
        else:
            pg_name = (pg or {}).get("metadata", {}).get("name") or f"{meta['name']}-{meta.get('uid', '')}"
            resizes = str(resized.get((meta.get("namespace", ""), pg_name), 0))
        rows.append(
            (
                meta["name"],
                phase,
                f"{workers} ({rng})" if rng else str(workers),
                (j.get("spec") or {}).get("schedulerName", ""),
                _age(waiting),
                _age(running),
                _age(end - created),
                resizes,
                _throughput(j, pg, running_pods),
            )
        )
    widths = [max(len(r[i]) for r in rows) + 3 for i in range(len(rows[0]))]
    return "\n".join("".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def _podgroups_by_job(podgroups: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """PodGroups by (namespace, uid of the Volcano Job that owns them) and by (namespace, name)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for g in podgroups:
        meta = g.get("metadata") or {}
        ns = meta.get("namespace", "")
        out[(ns, meta.get("name", ""))] = g
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh"):
                out[(ns, ref.get("uid", ""))] = g
    return out


def _resize_counts(events: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """``Resized`` Events per PodGroup (namespace, name), each counted ``count`` times."""
    out: dict[tuple[str, str], int] = {}
    for e in events:
        obj = e.get("involvedObject") or {}
        if e.get("reason") != "Resized" or obj.get("kind") != "PodGroup":
            continue
        key = (obj.get("namespace") or (e.get("metadata") or {}).get("namespace", ""), obj.get("name", ""))
        n = e.get("count")
        out[key] = out.get(key, 0) + (n if isinstance(n, int) and n > 0 else 1)
    return out


def _throughput(job: dict[str, Any], pg: dict[str, Any] | None, running: list[dict[str, Any]]) -> str:
    """The job's last reported throughput (see format_train_jobs), "-" without a report."""
    from ..elastic.learned import METRICS, throughput_text

    raw = ((pg or {}).get("metadata", {}).get("annotations") or {}).get(METRICS)
    if raw is None:
        raw = (job["metadata"].get("annotations") or {}).get(METRICS)
    nodes = len({(p.get("spec") or {}).get("nodeName") for p in running})
    return throughput_text(str(raw) if raw is not None else None, len(running), nodes)


def _gpu_pod(pod: dict[str, Any]) -> bool:
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if any(str(k).endswith("/gpu") for k in (res.get(part) or {})):
                return True
    return False


def _elastic_range(job: dict[str, Any]) -> str:
    """ "min-max" workers of an elastic Volcano Job, "" for others."""
    from ..api.volcano import Job
    from ..elastic.spec import job_shape

    try:
        shape = job_shape(Job.model_validate(job))
    except Exception:  # noqa: BLE001 - a job the models cannot read is shown without a range
        return ""
    return "" if shape is None else f"{shape[0]}-{shape[1]}"
