"""The README's setup for each CLI is the one the conformance suite runs (the README told Codex
users `wire_api = "chat"`, which Codex 0.171 refuses). Needs no CLI."""

from __future__ import annotations

import json
import re

from tests.agents.harness import ROOT
from tests.agents.test_codex import config_toml
from tests.agents.test_pi import models_json

README = (ROOT / "README.md").read_text()
HOST = "http://HOST:8000"


def _block(language: str, after: str) -> str:
    start = README.index(after)
    found = re.compile(rf"```{language}\n(.*?)```", re.DOTALL).search(README, start)
    assert found, f"no {language} block after {after!r}"
    return found.group(1)


def test_the_codex_config_is_the_suites():
    assert _block("toml", "Codex (0.171") == config_toml(HOST)
    assert not re.search(r'^wire_api = "chat"|`wire_api = "responses"` \(or `"chat"`\)', README, re.MULTILINE)


def test_the_pi_models_json_is_the_suites():
    assert json.loads(_block("json", "pi, `~/.pi/agent/models.json`")) == models_json(HOST)


def test_the_claude_code_setup_is_the_suites():
    # tests/agents/test_claude_code.py sets exactly these two variables and runs `claude`.
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8000/anthropic ANTHROPIC_API_KEY=$KEY claude\n" in README
