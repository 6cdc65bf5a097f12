"""A small asyncio Kubernetes REST client (aiohttp): kubeconfig or in-cluster, rate limited.

lavaflow keeps raw JSON next to its own models, so a generated client's models
would only be decoded and thrown away; this client speaks JSON directly.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .dispatch import RateLimiter as TokenBucket
from .http1 import Pool

if TYPE_CHECKING:  # (aiohttp is imported where it is used: the kube extra installs it)
    import aiohttp

try:  # list pages and watch streams are mostly JSON decoding: orjson does it several times faster
    import orjson

    def _loads(data: bytes | str) -> Any:
        return orjson.loads(data)

    def _dumps(obj: Any) -> bytes:
        try:
            return orjson.dumps(obj)
        except TypeError:  # e.g. a numpy scalar: the standard library turns it into a number
            return json.dumps(obj, separators=(",", ":"), default=float).encode()

except ImportError:  # pragma: no cover - the kube extra installs orjson

    def _loads(data: bytes | str) -> Any:
        return json.loads(data)

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


log = logging.getLogger("lavaflow.kube")

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """An API server answer other than 2xx."""

    def __init__(self, status: int, body: Any, method: str = "", path: str = "") -> None:
        self.status = status
        self.method, self.path = method, path
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.reason = self.body.get("reason", "")
        self.message = self.body.get("message", "")
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}".strip())

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        return self.status == 410


class ConfigError(Exception):
    pass


class Fenced(Exception):
    """A write not sent because the caller could no longer prove it may write (see ``fence``)."""


@dataclass
class ClientConfig:
    server: str
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    namespace: str = "default"
    exec_cmd: dict[str, Any] | None = None
    qps: float = 50.0
    burst: int = 100
    max_connections: int = 100
    user_agent: str = "lavaflow"
    # Inline kubeconfig data (``*-data``) stays in memory: never written to disk, so a killed
    # process leaves no copy of the client key behind.
    ca_data: bytes | None = field(default=None, repr=False)
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            ctx = ssl.create_default_context(cadata=self.ca_data.decode("ascii", "replace"))
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_data is not None or self.key_data is not None:
            with (
                _in_memory(self.cert_data or _read(self.cert_file)) as cert,
                _in_memory(self.key_data or _read(self.key_file)) as key,
            ):
                ctx.load_cert_chain(cert, key)
        elif self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _read(path: str | None) -> bytes:
    return Path(path).read_bytes() if path else b""


@contextlib.contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` for as long as the block runs (``ssl`` loads certificates only
    from paths): an anonymous in-memory file on Linux (memfd), else a private temporary file
    removed as soon as it was read."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("lavaflow-credential", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    d = tempfile.mkdtemp(prefix="lavaflow-")
    path = os.path.join(d, "credential")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
            fh.write(data)
        yield path
    finally:
        try:
            os.unlink(path)
        finally:
            os.rmdir(d)


def in_cluster_config() -> ClientConfig | None:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not (SA_DIR / "token").exists():
        return None
    if ":" in host:
        host = f"[{host}]"
    ns_file = SA_DIR / "namespace"
    return ClientConfig(
        server=f"https://{host}:{port or 443}",
        token_file=str(SA_DIR / "token"),
        ca_file=str(SA_DIR / "ca.crt"),
        namespace=ns_file.read_text().strip() if ns_file.exists() else "default",
    )


def kubeconfig_config(path: str, context: str | None = None) -> ClientConfig:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read kubeconfig ({exc.strerror or exc})") from None
    ctx_name = context or doc.get("current-context")
    contexts = {c["name"]: c.get("context", {}) for c in doc.get("contexts") or []}
    if ctx_name not in contexts:
        raise ConfigError(f"{path}: context {ctx_name!r} not found (contexts: {', '.join(sorted(contexts)) or 'none'})")
    ctx = contexts[ctx_name]
    clusters = {c["name"]: c.get("cluster", {}) for c in doc.get("clusters") or []}
    users = {u["name"]: u.get("user", {}) or {} for u in doc.get("users") or []}
    cluster = clusters.get(ctx.get("cluster"))
    if cluster is None or not cluster.get("server"):
        raise ConfigError(f"{path}: cluster {ctx.get('cluster')!r} of context {ctx_name!r} has no server")
    user = users.get(ctx.get("user"), {})
    base = Path(path).parent
    cfg = ClientConfig(server=cluster["server"].rstrip("/"), namespace=ctx.get("namespace") or "default")
    cfg.insecure = bool(cluster.get("insecure-skip-tls-verify"))
    if cluster.get("certificate-authority-data"):
        cfg.ca_data = _b64(path, "certificate-authority-data", cluster["certificate-authority-data"])
    elif cluster.get("certificate-authority"):
        cfg.ca_file = str(base / cluster["certificate-authority"])
    if user.get("client-certificate-data"):
        cfg.cert_data = _b64(path, "client-certificate-data", user["client-certificate-data"])
    elif user.get("client-certificate"):
        cfg.cert_file = str(base / user["client-certificate"])
    if user.get("client-key-data"):
        cfg.key_data = _b64(path, "client-key-data", user["client-key-data"])
    elif user.get("client-key"):
        cfg.key_file = str(base / user["client-key"])
    cfg.token = user.get("token")
    cfg.token_file = user.get("tokenFile")
    cfg.exec_cmd = user.get("exec")
    return cfg


def _b64(path: str, field_name: str, value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise ConfigError(f"{path}: {field_name} is not valid base64") from None


def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClientConfig:
    """kubeconfig (explicit, then $KUBECONFIG), else in-cluster, else ~/.kube/config."""
    if kubeconfig:
        return kubeconfig_config(kubeconfig, context)
    env = os.environ.get("KUBECONFIG")
    if env:
        return kubeconfig_config(env.split(os.pathsep)[0], context)
    cfg = in_cluster_config()
    if cfg is not None:
        return cfg
    home = Path.home() / ".kube" / "config"
    if home.exists():
        return kubeconfig_config(str(home), context)
    raise ConfigError("no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run in a cluster")


class RateLimiter:
    """client-go's client-side limit (its token bucket limiter): ``qps`` requests per second on
    average, in bursts of at most ``burst`` (qps <= 0: unlimited). Each request reserves the next
    token and sleeps until it is due, so waiting requests leave in the order they asked and none
    polls."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.bucket = TokenBucket(qps, self.burst, clock) if qps > 0 else None
        self.delayed = 0  # requests that had to wait for a token
        self.waited = 0.0  # seconds they waited, summed

    def reserve(self) -> float:
        """Take the next token: how long to wait before it may be used."""
        if self.bucket is None:
            return 0.0
        wait = self.bucket.reserve()
        if wait > 0:
            self.delayed += 1
            self.waited += wait
        return wait

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)


class KubeClient:
    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.limiter = RateLimiter(config.qps, config.burst)
        self._session: aiohttp.ClientSession | None = None
        self._pool: Pool | None = None  # keep-alive connections for writes (see http1)
        self._token: tuple[str | None, float] = (None, 0.0)
        self.requests = 0

    async def session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self.config.max_connections, ssl=self.config.ssl_context())
            self._session = aiohttp.ClientSession(
                connector=conn,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
                headers={"User-Agent": self.config.user_agent},
            )
        return self._session

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _bearer(self) -> str | None:
        cfg = self.config
        if cfg.token:
            return cfg.token
        tok, exp = self._token
        if tok is not None and time.time() < exp:
            return tok
        if cfg.token_file:
            try:
                tok = Path(cfg.token_file).read_text().strip()
            except OSError:
                tok = None
            self._token = (tok, time.time() + 60)
            return tok
        if cfg.exec_cmd:
            tok, exp = _exec_credential(cfg.exec_cmd)
            self._token = (tok, exp)
            return tok
        return None

    def _headers(self, content_type: str | None) -> dict[str, str]:
        h = {"Accept": JSON}
        tok = self._bearer()
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        if content_type:
            h["Content-Type"] = content_type
        return h

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        content_type: str = JSON,
        limited: bool = True,
        timeout: float = 60.0,
        fence: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """One API call. ``fence``, when given, is asked right before the request leaves (after
        the rate limiter's wait, which can be long): if it returns False, :class:`Fenced` is raised
        and nothing is sent (a leader that lost its lease while waiting must not write). Writes go
        through the lean transport (``http1``), reads through aiohttp."""
        import aiohttp

        if limited:
            await self.limiter.acquire()
        if method != "GET":
            return await self._write(method, path, body, params, content_type, timeout, fence)
        sess = await self.session()
        if fence is not None and not fence():
            raise Fenced(f"{method} {path} not sent: fenced")
        data = None if body is None else _dumps(body)
        self.requests += 1
        async with sess.request(
            method,
            self.config.server + path,
            params=_params(params),
            data=data,
            headers=self._headers(content_type if data is not None else None),
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:
            return _payload(resp.status, await resp.read(), method, path)

    async def _write(
        self,
        method: str,
        path: str,
        body: Any,
        params: dict[str, Any] | None,
        content_type: str,
        timeout: float,
        fence: Callable[[], bool] | None,
    ) -> dict[str, Any]:
        pool = self._pool
        if pool is None:
            cfg = self.config
            pool = self._pool = Pool(cfg.server, cfg.ssl_context(), cfg.max_connections, cfg.user_agent)
        if fence is not None and not fence():
            raise Fenced(f"{method} {path} not sent: fenced")
        data = None if body is None else _dumps(body)
        self.requests += 1
        answer = await pool.send(
            method,
            pool.target(path, _params(params)),
            self._headers(content_type if data is not None else None),
            data,
            timeout,
        )
        return _payload(answer.status, answer.body, method, path)

    async def stream(self, path: str, params: dict[str, Any], timeout: float) -> AsyncGenerator[dict[str, Any], None]:
        """Watch events (one JSON object per line) until the server ends the stream."""
        async for batch in self.stream_batches(path, params, timeout):
            for ev in batch:
                yield ev

    @contextlib.asynccontextmanager
    async def _get(
        self, path: str, params: dict[str, Any], timeout: aiohttp.ClientTimeout, accept: str = JSON
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET (after the rate limiter) whose answer is read inside the block."""
        await self.limiter.acquire()
        sess = await self.session()
        headers = self._headers(None)
        headers["Accept"] = accept
        async with sess.get(
            self.config.server + path, params=_params(params), headers=headers, timeout=timeout
        ) as resp:
            yield resp

    async def stream_batches(
        self, path: str, params: dict[str, Any], timeout: float
    ) -> AsyncGenerator[list[dict[str, Any]], None]:
        """:meth:`stream`, the events of each chunk the server sent as one list, in order: a
        streaming list of 140,000 pods is then 140,000 decodes but a few thousand steps of the
        asynchronous loop, not one each."""
        import aiohttp

        limit = aiohttp.ClientTimeout(total=timeout + 30, sock_read=timeout + 30)
        async with self._get(path, params, limit) as resp:
            if resp.status >= 300:
                raise ApiError(resp.status, _error_payload(await resp.read(), JSON), "WATCH", path)
            rest = b""
            async for chunk in resp.content.iter_any():
                if b"\n" not in chunk:
                    rest += chunk
                    continue
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                batch = [_loads(line) for line in lines if line.strip()]
                if batch:
                    yield batch
            if rest.strip():
                yield [_loads(rest)]

    async def stream_frames(
        self, path: str, params: dict[str, Any], timeout: float
    ) -> AsyncGenerator[list[bytes], None]:
        """A watch in Kubernetes' protobuf encoding: the frames (one WatchEvent each) of every
        chunk the server sent, in order. Raises :class:`NotProtobuf` when the server answers in
        another encoding or refuses this one."""
        import aiohttp

        from .protopod import WATCH_CONTENT_TYPE, Frames

        limit = aiohttp.ClientTimeout(total=timeout + 30, sock_read=timeout + 30)
        async with self._get(path, params, limit, WATCH_CONTENT_TYPE) as resp:
            await _expect_protobuf(resp, WATCH_CONTENT_TYPE, "WATCH", path)
            frames = Frames()
            async for chunk in resp.content.iter_any():
                batch = frames.feed(chunk)
                if batch:
                    yield batch
            if frames.pending:
                raise ConnectionError(f"a protobuf watch stream ended inside a frame ({frames.pending} bytes)")

    async def get_protobuf(self, path: str, params: dict[str, Any], timeout: float = 120.0) -> bytes:
        """A GET answered in Kubernetes' protobuf encoding: the body as sent. Raises
        :class:`NotProtobuf` when the server answers in another encoding or refuses this one."""
        import aiohttp

        from .protopod import CONTENT_TYPE

        self.requests += 1
        async with self._get(path, params, aiohttp.ClientTimeout(total=timeout), CONTENT_TYPE) as resp:
            await _expect_protobuf(resp, CONTENT_TYPE, "GET", path)
            return await resp.read()


def _payload(status: int, raw: bytes, method: str, path: str) -> dict[str, Any]:
    """An answer's JSON (its text as the message when it is not JSON); ApiError unless 2xx."""
    try:
        payload = _loads(raw) if raw else {}
    except ValueError:
        payload = {"message": raw.decode("utf-8", "replace")}
    if status >= 300:
        raise ApiError(status, payload, method, path)
    return payload


async def _expect_protobuf(resp: Any, content_type: str, verb: str, path: str) -> None:
    """Raise unless ``resp`` is a success in ``content_type``: NotProtobuf when the server refuses
    the encoding or answers in another, ApiError for any other failure."""
    if resp.status in (406, 415):
        raise NotProtobuf(f"the server does not send {content_type} ({resp.status})")
    ctype = resp.headers.get("Content-Type", "")
    if resp.status >= 300:
        raise ApiError(resp.status, _error_payload(await resp.read(), ctype), verb, path)
    if not ctype.startswith(content_type.split(";")[0]):
        raise NotProtobuf(f"the server answered {content_type} with {ctype or 'no content type'}")


class NotProtobuf(Exception):
    """The API server does not send this stream in Kubernetes' protobuf encoding."""


def _error_payload(raw: bytes, ctype: str) -> dict[str, Any]:
    """An error answer's Status as JSON would give it, whichever encoding the server chose."""
    from . import protopod

    if ctype.startswith(protopod.CONTENT_TYPE):
        try:
            return protopod.error_status(raw)
        except protopod.ProtobufError:
            return {"message": f"{len(raw)} bytes of {ctype}"}
    try:
        payload = _loads(raw)
    except ValueError:
        return {"message": raw.decode("utf-8", "replace")}
    return payload if isinstance(payload, dict) else {"message": str(payload)}


def _params(params: dict[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    out = {}
    for k, v in params.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def _exec_credential(spec: dict[str, Any]) -> tuple[str | None, float]:
    env = dict(os.environ)
    for e in spec.get("env") or []:
        env[e["name"]] = e["value"]
    try:
        out = subprocess.run(
            [spec["command"], *(spec.get("args") or [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        status = json.loads(out).get("status", {})
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.error("kubeconfig exec credential plugin failed: %s", exc)
        return None, time.time() + 5
    exp = time.time() + 300
    if status.get("expirationTimestamp"):
        from .codec import parse_time

        t = parse_time(status["expirationTimestamp"])
        if isinstance(t, float):
            exp = t - 30
    return status.get("token"), exp
