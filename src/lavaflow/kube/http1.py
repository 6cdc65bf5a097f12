"""A lean HTTP/1.1 transport for the API calls that write: keep-alive connections, one request at
a time on each, answers read by an asyncio protocol.

A controller or scheduler in a burst sends thousands of small writes (pod creates, bindings,
status writes); with a general HTTP client each costs about as much CPU in the client as the API
server spends on it, and on a small machine the two compete for the same cores. This sends the
request line, headers and body in one write and parses the answer in place (Content-Length or
chunked bodies, informational answers skipped); a connection found closed before any byte of its
answer arrived (the server dropped it while idle) is replaced and the request sent once more.
Reads (lists, watches) keep the general client, with its compression and streaming.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from typing import Any


class Stale(ConnectionResetError):
    """The connection closed before any byte of the answer arrived."""


class Answer:
    __slots__ = ("status", "content_type", "body")

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body


_HEAD, _LENGTH, _CHUNKS, _UNTIL_CLOSE = range(4)


class Connection(asyncio.Protocol):
    """One keep-alive connection; ``request`` sends one request and waits for its answer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep = True  # whether the connection may carry another request
        self._buf = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        self._received = False
        self._state = _HEAD
        self._status = 0
        self._ctype = ""
        self._length = 0
        self._body = bytearray()

    # ------------------------------------------------------------------ protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.keep = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._state == _UNTIL_CLOSE:
            self._finish()
        elif not self._received:
            waiter.set_exception(Stale("the connection closed before the answer"))
        else:
            waiter.set_exception(ConnectionResetError("the connection closed inside the answer"))

    def data_received(self, data: bytes) -> None:
        self._received = True
        self._buf += data
        if self._waiter is None:  # nothing asked: the server must not talk
            self.keep = False
            return
        try:
            self._parse()
        except ValueError as exc:
            self.keep = False
            if not self._waiter.done():
                self._waiter.set_exception(ConnectionError(f"unreadable HTTP answer: {exc}"))

    # ------------------------------------------------------------------ one exchange
    async def request(self, payload: bytes) -> Answer:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Answer] = loop.create_future()
        self._waiter = waiter
        self._received = False
        self._state = _HEAD
        assert self.transport is not None
        self.transport.write(payload)
        try:
            return await waiter
        finally:
            self._waiter = None

    def abort(self) -> None:
        self.keep = False
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ parsing
    def _parse(self) -> None:
        buf = self._buf
        while True:
            if self._state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > 65536:
                        raise ValueError("header too long")
                    return
                head = bytes(buf[:end]).decode("latin-1").split("\r\n")
                del buf[: end + 4]
                version, _, rest = head[0].partition(" ")
                status = int(rest[:3])
                if 100 <= status < 200:
                    continue  # informational (100 Continue): the answer follows
                self._status = status
                self._ctype = ""
                length: int | None = None
                chunked = False
                close = version == "HTTP/1.0"
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value)
                    elif name == "transfer-encoding":
                        chunked = "chunked" in value.lower()
                    elif name == "content-type":
                        self._ctype = value.strip()
                    elif name == "connection":
                        v = value.strip().lower()
                        close = v == "close" or (close and v != "keep-alive")
                if close:
                    self.keep = False
                self._body = bytearray()
                if status in (204, 304) or (length == 0 and not chunked):
                    self._finish()
                    return
                if chunked:
                    self._state = _CHUNKS
                elif length is not None:
                    self._state, self._length = _LENGTH, length
                else:
                    self._state = _UNTIL_CLOSE
                    self.keep = False
            if self._state == _LENGTH:
                if len(buf) < self._length:
                    return
                self._body = buf[: self._length]  # (a copy)
                del buf[: self._length]
                self._finish()
                return
            if self._state == _CHUNKS:
                while True:
                    nl = buf.find(b"\r\n")
                    if nl < 0:
                        return
                    size = int(bytes(buf[:nl]).split(b";", 1)[0], 16)
                    if size == 0:
                        if len(buf) < nl + 4:
                            return
                        if buf[nl + 2 : nl + 4] == b"\r\n":  # no trailers: an empty line ends it
                            del buf[: nl + 4]
                        else:  # trailers, then an empty line
                            end = buf.find(b"\r\n\r\n", nl)
                            if end < 0:
                                return
                            del buf[: end + 4]
                        self._finish()
                        return
                    if len(buf) < nl + 2 + size + 2:
                        return
                    self._body += buf[nl + 2 : nl + 2 + size]
                    del buf[: nl + 2 + size + 2]
            if self._state == _UNTIL_CLOSE:
                self._body += buf
                buf.clear()
                return

    def _finish(self) -> None:
        self._state = _HEAD
        if self._buf:
            self.keep = False  # bytes beyond the answer: nothing was asked for them
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(Answer(self._status, self._ctype, bytes(self._body)))


class Pool:
    """Keep-alive connections to one server, at most ``limit`` requests at once."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | bool, limit: int, user_agent: str) -> None:
        url = urllib.parse.urlsplit(server)
        self.tls = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = ssl_context if self.tls else None
        netloc = url.netloc.rpartition("@")[2]
        self._fixed = f"Host: {netloc}\r\nUser-Agent: {user_agent}\r\n"
        self._idle: list[Connection] = []
        self._slots = asyncio.Semaphore(max(1, limit))
        self.opened = 0

    def target(self, path: str, params: dict[str, str] | None) -> str:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return f"{self.prefix}{path}{query}"

    async def send(
        self, method: str, target: str, headers: dict[str, str], data: bytes | None, timeout: float
    ) -> Answer:
        lines = [f"{method} {target} HTTP/1.1\r\n", self._fixed]
        lines.extend(f"{k}: {v}\r\n" for k, v in headers.items())
        if data is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {0 if data is None else len(data)}\r\n")
        lines.append("\r\n")
        payload = "".join(lines).encode("latin-1")
        if data:
            payload += data
        async with self._slots:
            for attempt in (0, 1):
                conn, reused = self._take()
                if conn is None:
                    conn = await asyncio.wait_for(self._open(), min(timeout, 10.0))
                try:
                    async with asyncio.timeout(timeout):
                        answer = await conn.request(payload)
                except Stale:
                    conn.abort()
                    if reused and attempt == 0:
                        continue  # dropped while idle: the server never read the request
                    raise
                except BaseException:
                    conn.abort()  # (a timeout or cancellation: its answer may still come)
                    raise
                if conn.keep and not conn.closed:
                    self._idle.append(conn)
                else:
                    conn.abort()
                return answer
        raise AssertionError("unreachable")

    def _take(self) -> tuple[Connection | None, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.keep:
                return conn, True
            conn.abort()
        return None, False

    async def _open(self) -> Connection:
        loop = asyncio.get_running_loop()
        kw: dict[str, Any] = {}
        if self.ssl is not None:
            kw = {"ssl": self.ssl, "server_hostname": self.host}
        _, conn = await loop.create_connection(Connection, self.host, self.port, **kw)
        self.opened += 1
        return conn

    def close(self) -> None:
        while self._idle:
            self._idle.pop().abort()
