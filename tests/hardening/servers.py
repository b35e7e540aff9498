"""Real server subprocesses for the hardening tests (gunicorn, `make serve`), pointed at the
PostgreSQL test database, always stopped at the end of the test."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
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


def start_gunicorn(env: dict[str, str], log: Path, timeout: float = 60) -> subprocess.Popen:
    """gunicorn as deployed (deploy/gunicorn.conf.py), its output in `log`, in a process group of
    its own (for `stop`); returns once its port listens."""
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "project.wsgi:application"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(int(env["PORT"]), process, log, timeout=timeout)
    except BaseException:
        stop(process)
        raise
    return process


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


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (initdb in a temporary folder, a free port, no fsync),
    restarted at will: a database outage no other test, engineer or CI job shares. Run as the
    `postgres` user when the tests run as root (PostgreSQL refuses root); its superuser is `root`
    (trust authentication on 127.0.0.1 only)."""

    def __init__(self) -> None:
        import pwd
        import shutil
        import tempfile

        from tests.services import missing

        self.bin = self._bindir()
        if self.bin is None:
            missing("this test needs PostgreSQL's server binaries (initdb, pg_ctl)")
        self.run_as: list[str] = []
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="compactor-pg-"))
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                missing("this test runs as root and needs a `postgres` user to run PostgreSQL as")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            self.run_as = [shutil.which("runuser") or "runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "root", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._options = options

    @staticmethod
    def _bindir() -> Path | None:
        import shutil

        found = shutil.which("pg_ctl")
        if found:
            return Path(found).resolve().parent
        for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (candidate / "pg_ctl").exists():
                return candidate
        return None

    def _pg(self, tool: str, *args: str, timeout: float = 120) -> None:
        subprocess.run([*self.run_as, str(self.bin / tool), *args], check=True, capture_output=True, timeout=timeout)

    def url(self, database: str) -> str:
        return f"postgres://root@127.0.0.1:{self.port}/{database}"

    def start(self) -> PrivatePostgres:
        self._pg("pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(self.folder / "log"), "-w", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> float:
        """`pg_ctl restart -m fast` (every connection dropped, as an operator's restart does); the
        seconds it took."""
        started = time.monotonic()
        self._pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "restart", "-o", self._options,
                 "-l", str(self.folder / "log"))  # fmt: skip
        return time.monotonic() - started

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        import shutil

        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)
