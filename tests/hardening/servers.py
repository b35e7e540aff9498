"""Real server subprocesses for the hardening tests (gunicorn, `make serve`), pointed at the
PostgreSQL test database, always stopped at the end of the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.e2e.conftest import _database_url

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a production-like process on the test database."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST", "COMPACTOR_HTTPS", "SECURE_", "DJANGO_SETTINGS_MODULE"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "SECRET_KEY": "server-test-secret-key-" + "x" * 40,
            "DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": _database_url(),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early ({process.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port} after {timeout}s:\n{log.read_text()[-4000:]}")


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group (gunicorn's workers, celery's children), SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    except ProcessLookupError:
        pass


def raw_http(port: int, request: bytes, timeout: float = 30) -> tuple[int, bytes]:
    """Send bytes as they are (no client library re-framing them); return (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = _dechunk(body)
    return status, body


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return out


def chunked(body: bytes, chunk_size: int = 1000) -> bytes:
    out = b""
    for start in range(0, len(body), chunk_size):
        piece = body[start : start + chunk_size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


class PrivateRedis:
    """A `redis-server` of the test's own on a free port (no persistence), stopped and started
    again at will: an outage no other test or process shares."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log_dir = log_dir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        import shutil

        from tests.services import missing

        binary = shutil.which("redis-server")
        if binary is None:
            missing("this test needs the redis-server binary")  # fails under REQUIRE_SERVICES=1
        log = self.log_dir / f"redis-{self.port}.log"
        with open(log, "a") as out:
            self.process = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for_port(self.port, self.process, log, timeout=10)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def start_again(self) -> PrivateRedis:
        """The same port again (an empty server: no persistence), as after a restart."""
        return self.start()
