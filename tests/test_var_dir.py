"""COMPACTOR_VAR_DIR is the one place every process writes to (commands, worker log, beat
schedule), and a management command on a database that is not migrated says what to run in one
line instead of a traceback a shell could take for its output."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from project.env import env_writable_dir
from sessions.models import ApiKey

ROOT = Path(__file__).resolve().parent.parent


def _manage(args: list[str], var_dir: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_"))}
    env.update({"DEBUG": "1", "COMPACTOR_VAR_DIR": str(var_dir)})
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_command_on_an_unmigrated_database_says_what_to_run_in_one_line(tmp_path):
    result = _manage(["create_api_key", "admin", "--key-only"], tmp_path / "var", cwd=tmp_path)
    assert result.returncode != 0
    assert result.stdout == ""  # nothing a KEY=$(...) could capture
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "manage.py create_api_key: there is no database at" in lines[0] and "manage.py migrate" in lines[0]
    # The command did not leave an empty database behind for the next one to trip on.
    assert not (tmp_path / "var" / "compactor.sqlite3").exists()


def test_an_existing_but_unmigrated_database_is_named(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    (var / "compactor.sqlite3").touch()
    result = _manage(["purge_trash"], var)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"the SQLite database {var / 'compactor.sqlite3'} is not migrated" in result.stderr
    assert (var / "compactor.sqlite3").exists()  # not ours to remove


def test_a_relative_var_dir_is_under_the_project_whatever_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMPACTOR_TEST_DIR", "data")
    base = tmp_path / "project"
    assert env_writable_dir("COMPACTOR_TEST_DIR", "var", base=base) == base / "data"
    monkeypatch.setenv("COMPACTOR_TEST_DIR", str(tmp_path / "abs"))
    assert env_writable_dir("COMPACTOR_TEST_DIR", "var", base=base) == tmp_path / "abs"


@pytest.mark.django_db
def test_key_only_prints_the_key_and_nothing_else_on_stdout(user):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "alice", "--name", "ci", "--key-only", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert "\n" not in key and key.startswith(ApiKey.objects.get(owner=user, name="ci").prefix)
    assert "Store it now" in err.getvalue() and key not in err.getvalue()


def _fake(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_make_run_writes_the_worker_log_and_beat_schedule_under_the_var_dir(tmp_path):
    # scripts/run.sh as it is, with stand-ins for python, celery and gunicorn that say how they were called.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    _fake(bin_dir / "python", 'echo "python $*" >>calls.log')
    _fake(bin_dir / "celery", 'echo "celery $*"')
    _fake(bin_dir / "gunicorn", "sleep 0.5")  # the server "stops": run.sh stops the worker and ends
    env = {"PATH": os.environ["PATH"], "COMPACTOR_VAR_DIR": "state"}
    result = subprocess.run(
        ["bash", "scripts/run.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )
    assert "Worker log:          state/worker.log" in result.stdout
    worker_log = (tmp_path / "state" / "worker.log").read_text()
    assert "--schedule state/celerybeat-schedule" in worker_log
    assert not (tmp_path / "var").exists()
