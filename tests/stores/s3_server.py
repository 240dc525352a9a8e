"""A real S3 endpoint on loopback for the tests: moto's server, and a fault-injecting proxy.

The moto server is started once per test process (on first use, on 127.0.0.1 with a
random port) and stopped at exit; its one bucket is created with boto3 (obstore cannot
create buckets). Each store gets its own key prefix, derived from the test's
``tmp_path``, so tests never see each other's spills.

:class:`FaultProxy` sits between obstore and moto (also on 127.0.0.1) and fails chosen
requests with a 5xx, or holds their reply past the client's timeout, so the fault tests
exercise a real HTTP exchange rather than a mock of obstore.

A plain module: the fixtures built on it live in tests/stores/conftest.py.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import http.server
import logging
import re
import secrets
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spillstore.s3 import S3Store

BUCKET = "spillstore-tests"
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}
REGION = "us-east-1"
_RUN = secrets.token_hex(4)

_lock = threading.Lock()
_endpoint: str | None = None


def moto_endpoint() -> str:
    """The URL of the process's moto S3 server (started on first use) with the bucket."""
    global _endpoint
    with _lock:
        if _endpoint is None:
            _endpoint = _start_moto()
        return _endpoint


def _start_moto() -> str:
    logging.getLogger("werkzeug").disabled = True  # it logs every request, and errors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # third-party deprecations are not ours to fix
        import boto3
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        atexit.register(server.stop)
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=CREDENTIALS["access_key_id"],
            aws_secret_access_key=CREDENTIALS["secret_access_key"],
        )
        client.create_bucket(Bucket=BUCKET)
    return endpoint


def prefix_for(tmp_path: Path) -> str:
    """A key prefix unique to this test (and run)."""
    return f"tests/{_RUN}/{re.sub(r'[^A-Za-z0-9._-]', '_', tmp_path.name)}"


def make_s3_store(
    tmp_path: Path, *, endpoint: str | None = None, prefix: str | None = None, **kwargs: Any
) -> S3Store:
    """An :class:`S3Store` on the moto server (or ``endpoint``), prefixed per test."""
    kwargs.setdefault("config", {**CREDENTIALS})
    kwargs.setdefault("region", REGION)
    return S3Store(
        BUCKET,
        prefix=prefix if prefix is not None else prefix_for(tmp_path),
        endpoint=endpoint or moto_endpoint(),
        **kwargs,
    )


# --------------------------------------------------------------------------- faults

_HOP_HEADERS = ("content-length", "transfer-encoding", "connection")

Rule = Callable[[int, str, str], str | None]
"""``rule(n, method, path) -> action``: None forwards request ``n`` (1-based) as is;
a status (``"503"``, ``"403"``) answers it with that status without forwarding; ``"stall"``
forwards it, then holds the reply for :attr:`FaultProxy.stall_seconds`."""


@dataclass(frozen=True)
class Seen:
    """One request the proxy saw, and what it did with it (None: forwarded)."""

    method: str
    path: str
    range: str | None
    action: str | None


@dataclass
class FaultProxy:
    """A loopback HTTP proxy in front of moto that fails the requests a rule picks."""

    upstream: str
    rule: Rule = field(default=lambda n, method, path: None)
    stall_seconds: float = 1.5
    requests: list[Seen] = field(default_factory=list)
    _server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The proxy's own URL (give it to the store as its endpoint)."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        proxy = self
        host, port = self.upstream.removeprefix("http://").split(":")

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with _lock:
                    number = len(proxy.requests) + 1
                    action = proxy.rule(number, self.command, self.path)
                    proxy.requests.append(
                        Seen(self.command, self.path, self.headers.get("Range"), action)
                    )
                if action is not None and action.isdigit():
                    payload = b"<Error><Code>InternalError</Code></Error>"
                    self.send_response(int(action))
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                try:
                    connection.request(self.command, self.path, body, dict(self.headers))
                    reply = connection.getresponse()
                    payload = reply.read()
                finally:
                    connection.close()
                if action == "stall":
                    time.sleep(proxy.stall_seconds)
                head = self.command == "HEAD"
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    passed = name.lower() == "content-length" and head
                    if passed or name.lower() not in _HOP_HEADERS:
                        self.send_header(name, value)
                if not head:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may have given up
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class BlackHole:
    """An endpoint on 127.0.0.1 that accepts connections and never answers (a real
    listening socket: the kernel completes the handshake, nothing ever replies)."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._held: list[socket.socket] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                self._held.append(self._listener.accept()[0])

    @property
    def connections(self) -> int:
        """How many connections it accepted."""
        return len(self._held)

    def close(self) -> None:
        self._listener.close()
        for held in self._held:
            held.close()
