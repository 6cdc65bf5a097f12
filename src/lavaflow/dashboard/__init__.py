"""`lavaflow dashboard`: a read-only web UI over a cluster or a simulation's JSON output.

- :mod:`.model` — what the pages show, one record per queue, job, pod, node, elastic job and
  event, the same whichever source fills it;
- :mod:`.from_result` — that state from `lavaflow simulate --output json` (at its end, or at a
  time T);
- :mod:`.live` — that state kept from the Kubernetes backend's informers (watches), with a
  change counter the pages' server-sent events follow;
- :mod:`.pages` — the HTML pages, plain and built from the state alone; :mod:`.plots` their
  matplotlib charts (inline SVG, as the reports draw them);
- :mod:`.forecast_column` — the predicted start of pending jobs, from ``lavaflow.forecast`` when
  it is installed, else "—";
- :mod:`.app` — the Starlette application (pages, server-sent events) and its uvicorn server.

Only the app needs the ``dashboard`` extra (Starlette, uvicorn); the rest is importable without.
"""
