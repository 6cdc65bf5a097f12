"""Where reports go, and the thread that sends them without ever holding up training.

A *sink* has one method, ``send(annotations)``, which may block and may raise.  The agent never
calls it from the training loop: a :class:`Reporter` thread sends the newest report (an older one
not yet sent is replaced, never queued), and a failure is logged and dropped.

* :class:`KubeSink` patches the annotations onto the job's Volcano Job with a JSON merge patch,
  through the Kubernetes API, as the pod's service account (or a kubeconfig); lavaflow's job
  controller copies ``lavaflow.io/*`` annotations from the Job to its PodGroup, where the
  scheduler reads them.  Standard library only (``urllib``, ``ssl``).
* :class:`FileSink` writes them as a JSON object to a file (atomically), :class:`MemorySink`
  keeps them in a list (tests), :class:`NullSink` drops them.

:func:`sink_from_env` chooses: ``LAVAFLOW_REPORT=off`` → none; ``LAVAFLOW_REPORT_FILE`` → a
file; ``LAVAFLOW_KUBE_URL`` (an API server's base URL, with ``LAVAFLOW_KUBE_TOKEN_FILE``) →
that server; ``KUBECONFIG`` → its current context; ``KUBERNETES_SERVICE_HOST`` → the pod's own
service account (in-cluster).  The Job is ``LAVAFLOW_JOB_NAME`` in ``POD_NAMESPACE``, or, when
that is not set, the ``volcano.sh/job-name`` label of the pod ``POD_NAME`` (read once; the
service account then needs ``get`` on pods); ``LAVAFLOW_REPORT_PATH`` names any other object
(an API path).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

log = logging.getLogger("lavaflow.agent")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
JOB_NAME_LABEL = "volcano.sh/job-name"
JOB_API = "/apis/batch.volcano.sh/v1alpha1"
MERGE_PATCH = "application/merge-patch+json"


class Sink(Protocol):
    def send(self, annotations: Mapping[str, str]) -> None: ...


class NullSink:
    def send(self, annotations: Mapping[str, str]) -> None:
        pass


class MemorySink:
    """Keeps every report sent (tests)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    def send(self, annotations: Mapping[str, str]) -> None:
        self.sent.append(dict(annotations))

    @property
    def last(self) -> dict[str, str] | None:
        return self.sent[-1] if self.sent else None


class FileSink:
    """Writes the newest report's annotations to ``path`` as one JSON object (write + rename)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def send(self, annotations: Mapping[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(annotations), fh, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class KubeError(RuntimeError):
    pass


class KubeSink:
    """Patches the report onto a Kubernetes object (by default the job's Volcano Job).

    ``server`` is the API server's base URL; ``token`` / ``token_file`` a bearer token (the file
    is read at every request: service account tokens are rotated); ``ca_file`` / ``ca_data`` the
    server's CA, ``client_cert`` / ``client_key`` files for client-certificate authentication,
    ``insecure`` skips verification.  ``path`` is the object's API path; without it the Job
    ``job_name`` in ``namespace``, or the one named by the ``volcano.sh/job-name`` label of the
    pod ``pod_name``."""

    def __init__(
        self,
        server: str,
        *,
        namespace: str = "default",
        job_name: str | None = None,
        pod_name: str | None = None,
        path: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        ca_data: bytes | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        insecure: bool = False,
        timeout: float = 5.0,
    ) -> None:
        self.server = server.rstrip("/")
        self.namespace = namespace
        self.job_name = job_name
        self.pod_name = pod_name
        self._path = path
        self.token = token
        self.token_file = token_file
        self.timeout = timeout
        self._ssl: ssl.SSLContext | None = None
        if self.server.startswith("https:"):
            ctx = ssl.create_default_context(cafile=ca_file, cadata=ca_data.decode() if ca_data else None)
            if insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if client_cert:
                ctx.load_cert_chain(client_cert, client_key)
            self._ssl = ctx

    # -- requests ------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = {"Accept": "application/json", "User-Agent": "lavaflow-agent"}
        token = self.token
        if self.token_file:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            raise KubeError(f"{method} {path}: HTTP {exc.code} {detail}") from None
        return json.loads(raw) if raw else None

    def path(self) -> str:
        """The API path of the object the report goes to (looked up once)."""
        if self._path is None:
            name = self.job_name
            if not name:
                if not self.pod_name:
                    raise KubeError("no job to report to: set LAVAFLOW_JOB_NAME (or POD_NAME, to read it from the pod)")
                pod = self._request("GET", f"/api/v1/namespaces/{quote(self.namespace)}/pods/{quote(self.pod_name)}")
                meta = (pod or {}).get("metadata") or {}
                name = (meta.get("labels") or {}).get(JOB_NAME_LABEL) or (meta.get("annotations") or {}).get(
                    JOB_NAME_LABEL
                )
                if not name:
                    raise KubeError(f"pod {self.namespace}/{self.pod_name} has no {JOB_NAME_LABEL} label")
                self.job_name = name
            self._path = f"{JOB_API}/namespaces/{quote(self.namespace)}/jobs/{quote(name)}"
        return self._path

    def send(self, annotations: Mapping[str, str]) -> None:
        body = {"metadata": {"annotations": dict(annotations)}}
        self._request("PATCH", self.path(), body, MERGE_PATCH)

    # -- configuration -------------------------------------------------------------------------
    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, service_account_dir: str = SERVICE_ACCOUNT_DIR
    ) -> KubeSink | None:
        """The sink the environment describes (see the module docstring), or None."""
        env = os.environ if environ is None else environ
        sa = Path(service_account_dir)
        namespace = env.get("POD_NAMESPACE") or _read(sa / "namespace")
        kw: dict[str, Any] = {
            "job_name": env.get("LAVAFLOW_JOB_NAME") or None,
            "pod_name": env.get("POD_NAME") or None,
            "path": env.get("LAVAFLOW_REPORT_PATH") or None,
            "timeout": float(env.get("LAVAFLOW_REPORT_TIMEOUT") or 5.0),
        }
        if env.get("LAVAFLOW_KUBE_URL"):
            return cls(
                env["LAVAFLOW_KUBE_URL"],
                namespace=namespace or "default",
                token_file=env.get("LAVAFLOW_KUBE_TOKEN_FILE") or None,
                ca_file=env.get("LAVAFLOW_KUBE_CA_FILE") or None,
                **kw,
            )
        if env.get("KUBECONFIG"):
            server, auth, ns = _kubeconfig(env["KUBECONFIG"].split(os.pathsep)[0])
            return cls(server, namespace=namespace or ns or "default", **auth, **kw)
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if host and port:
            host = f"[{host}]" if ":" in host else host
            ca = sa / "ca.crt"
            return cls(
                f"https://{host}:{port}",
                namespace=namespace or "default",
                token_file=str(sa / "token"),
                ca_file=str(ca) if ca.is_file() else None,
                **kw,
            )
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _kubeconfig(path: str) -> tuple[str, dict[str, Any], str | None]:
    """(server, KubeSink authentication arguments, namespace) of a kubeconfig's current context.
    JSON needs nothing; YAML needs PyYAML (present wherever lavaflow's dependencies are)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except ValueError:
        import yaml  # a YAML kubeconfig

        doc = yaml.safe_load(text)
    base = Path(path).resolve().parent

    def named(kind: str, name: str | None) -> dict[str, Any]:
        for item in doc.get(kind) or ():
            if item.get("name") == name:
                return item.get(kind[:-1]) or {}
        items = doc.get(kind) or ()
        return (items[0].get(kind[:-1]) or {}) if items and name is None else {}

    ctx = named("contexts", doc.get("current-context"))
    cluster = named("clusters", ctx.get("cluster"))
    user = named("users", ctx.get("user"))

    def file_of(key: str) -> str | None:
        if user.get(f"{key}-data"):
            fd, tmp = tempfile.mkstemp(prefix="lavaflow-agent-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(base64.b64decode(user[f"{key}-data"]))
            return tmp
        v = user.get(key)
        return str(base / v) if v else None

    auth: dict[str, Any] = {
        "token": user.get("token"),
        "token_file": str(base / user["tokenFile"]) if user.get("tokenFile") else None,
        "insecure": bool(cluster.get("insecure-skip-tls-verify")),
        "client_cert": file_of("client-certificate"),
        "client_key": file_of("client-key"),
    }
    if cluster.get("certificate-authority-data"):
        auth["ca_data"] = base64.b64decode(cluster["certificate-authority-data"])
    elif cluster.get("certificate-authority"):
        auth["ca_file"] = str(base / cluster["certificate-authority"])
    if not cluster.get("server"):
        raise KubeError(f"{path}: the current context names no cluster server")
    return str(cluster["server"]), auth, ctx.get("namespace")


def sink_from_env(environ: Mapping[str, str] | None = None) -> Sink | None:
    """The sink the environment asks for (see the module docstring); None when it names none."""
    env = os.environ if environ is None else environ
    if (env.get("LAVAFLOW_REPORT") or "").strip().lower() in ("off", "false", "0", "none"):
        return None
    if env.get("LAVAFLOW_REPORT_FILE"):
        return FileSink(env["LAVAFLOW_REPORT_FILE"])
    return KubeSink.from_env(env)


class Reporter:
    """Sends reports to ``sink`` from a daemon thread: :meth:`submit` returns at once, the newest
    report replaces one still waiting, failures are logged (the first, then at most one a minute)
    and dropped."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.sent = 0
        self.failed = 0
        self._pending: dict[str, str] | None = None
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._last_error_log = -float("inf")
        self._thread = threading.Thread(target=self._run, name="lavaflow-agent-reporter", daemon=True)
        self._thread.start()

    def submit(self, annotations: Mapping[str, str]) -> None:
        with self._cond:
            if self._closed:
                return
            self._pending = dict(annotations)
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until nothing is waiting or being sent; whether so."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 2.0) -> None:
        """Send what is waiting (for up to ``timeout`` seconds), then stop the thread."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                report, self._pending, self._busy = self._pending, None, True
            try:
                self.sink.send(report)
                self.sent += 1
            except Exception as exc:  # never let a report stop training
                self.failed += 1
                now = time.monotonic()
                if now - self._last_error_log >= 60.0:
                    self._last_error_log = now
                    log.warning("lavaflow agent: report not sent (%d failed so far): %s", self.failed, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
