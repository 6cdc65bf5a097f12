"""The lean HTTP/1.1 transport of the client's writes (kube/http1.py), against a scripted server:
bodies in pieces, chunked bodies, informational answers, keep-alive, connections the server
drops while idle or inside an answer, and timeouts."""

from __future__ import annotations

import asyncio

import pytest

from lavaflow.kube.client import ApiError, ClientConfig, KubeClient
from lavaflow.kube.http1 import Pool


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


class Server:
    """Answers each request read on a connection with the next script step: a list of byte
    strings written with a pause between them, then the connection stays open (``close`` after
    the answer closes it; ``None`` as an answer closes at once, ``"hang"`` never answers)."""

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.connections = 0
        self.requests: list[bytes] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                step = self.script.pop(0)
                if step is None:
                    writer.close()
                    return
                if step == "hang":
                    await asyncio.sleep(60)
                    return
                parts, close = step
                for part in parts:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    async def stop(self) -> None:
        self.server.close()


def answer(status: str, body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status.encode()
        + b"\r\nContent-Type: application/json\r\n"
        + extra
        + (b"Content-Length: %d\r\n\r\n" % len(body))
        + body
    )


async def pool_for(script: list) -> tuple[Server, Pool]:
    server = Server(script)
    url = await server.start()
    return server, Pool(url, False, 4, "test")


def test_a_body_in_pieces_and_keep_alive():
    async def scenario():
        whole = answer("201 Created", b'{"kind":"Pod","n":1}')
        server, pool = await pool_for([([whole[:10], whole[10:40], whole[40:]], False), ([whole], False)])
        got = await pool.send("POST", "/api/v1/pods", {"Content-Type": "application/json"}, b'{"a":1}', 5)
        assert (got.status, got.body) == (201, b'{"kind":"Pod","n":1}')
        assert got.content_type == "application/json"
        await pool.send("POST", "/api/v1/pods", {}, b"{}", 5)
        assert server.connections == 1  # the connection was kept and used again
        assert server.requests[0].startswith(b"POST /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1:")
        assert b"Content-Length: 7\r\n" in server.requests[0] and server.requests[0].endswith(b'{"a":1}')
        pool.close()
        await server.stop()

    run(scenario())


def test_chunked_bodies_trailers_and_informational_answers():
    async def scenario():
        chunked = (
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4\r\n{"a"\r\n6;ext=1\r\n:12345\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
        )
        pieces = [chunked[i : i + 7] for i in range(0, len(chunked), 7)]  # cut anywhere
        plain_chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        server, pool = await pool_for([(pieces, False), ([plain_chunked], False)])
        got = await pool.send("PUT", "/x", {}, b"{}", 5)
        assert (got.status, got.body) == (200, b'{"a":12345}')
        again = await pool.send("PUT", "/x", {}, b"{}", 5)
        assert again.body == b"{}" and server.connections == 1
        pool.close()
        await server.stop()

    run(scenario())


def test_a_connection_dropped_while_idle_is_replaced_and_the_request_sent_again():
    async def scenario():
        ok = answer("200 OK", b"{}")
        # A connection the server closed after an answer is not used again. One it closes as the
        # next request arrives (its idle timeout racing the request), with no byte of an answer,
        # was never served: the request goes out once more on a new connection.
        server, pool = await pool_for([([ok], True), ([ok], False), None, ([ok], False)])
        await pool.send("PATCH", "/x", {}, b"{}", 5)
        for _ in range(100):  # until the pool has seen the server's close: the connection is not used again
            if all(conn.closed for conn in pool._idle):
                break
            await asyncio.sleep(0.05)
        await pool.send("PATCH", "/x", {}, b"{}", 5)
        assert server.connections == 2
        got = await pool.send("PATCH", "/x", {}, b"{}", 5)
        assert got.status == 200 and server.connections == 3 and len(server.requests) == 4
        pool.close()
        await server.stop()

    run(scenario())


def test_a_connection_closed_inside_an_answer_or_before_it_on_a_new_connection_fails():
    async def scenario():
        cut = answer("200 OK", b'{"long": "answer"}')[:-5]
        server, pool = await pool_for([([cut], True), None])
        with pytest.raises(ConnectionResetError):
            await pool.send("POST", "/x", {}, b"{}", 5)
        with pytest.raises(ConnectionResetError):  # a fresh connection: not sent again
            await pool.send("POST", "/x", {}, b"{}", 5)
        assert len(server.requests) == 2
        pool.close()
        await server.stop()

    run(scenario())


def test_connection_close_answers_are_not_reused_and_timeouts_abort():
    async def scenario():
        closing = answer("200 OK", b"{}", b"Connection: close\r\n")
        server, pool = await pool_for([([closing], False), ([closing], False), "hang"])
        await pool.send("DELETE", "/x", {}, None, 5)
        await pool.send("DELETE", "/x", {}, None, 5)
        assert server.connections == 2
        with pytest.raises(TimeoutError):
            await pool.send("DELETE", "/x", {}, None, 0.2)
        assert pool._take() == (None, False)  # the timed-out connection is not kept
        pool.close()
        await server.stop()

    run(scenario())


def test_client_writes_go_through_the_pool_with_the_servers_path_prefix():
    async def scenario():
        refused = answer("403 Forbidden", b'{"kind":"Status","reason":"Forbidden","message":"no"}')
        created = answer("201 Created", b'{"metadata":{"name":"p"}}')
        server = Server([([created], False), ([refused], False)])
        url = await server.start()
        client = KubeClient(ClientConfig(server=url + "/k8s/clusters/c1", qps=0, token="t0k"))
        got = await client.request("POST", "/api/v1/namespaces/d/pods", body={"a": 1}, params={"dryRun": "All"})
        assert got == {"metadata": {"name": "p"}}
        first = server.requests[0]
        assert first.startswith(b"POST /k8s/clusters/c1/api/v1/namespaces/d/pods?dryRun=All HTTP/1.1\r\n")
        assert b"Authorization: Bearer t0k\r\n" in first and b"Content-Type: application/json\r\n" in first
        with pytest.raises(ApiError) as err:
            await client.request("PATCH", "/api/v1/x", body={}, content_type="application/merge-patch+json")
        assert err.value.status == 403 and err.value.reason == "Forbidden" and err.value.method == "PATCH"
        assert b"Content-Type: application/merge-patch+json\r\n" in server.requests[1]
        await client.close()
        await server.stop()

    run(scenario())
