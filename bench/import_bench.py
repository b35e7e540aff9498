"""Import every shared transcript (and the generated Codex rollout) and print what arrived, against what the file holds.

    DEBUG=1 .venv/bin/python bench/import_bench.py [PATH ...]

Runs `import_transcript` (bulk) on each file in a fresh SQLite database under a temporary
COMPACTOR_VAR_DIR (with DATABASE_URL, a throwaway `test_<name>` database on that server) and prints per file: the detected format, messages,
tool calls stored / tool_use blocks in the file, usage reports stored / in the file, queued user
messages, subagent sessions, and the wall time against the time to only read (parse) the file
— the ratio is what storing costs on top of reading.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

SHARED = CORPUS
# No real Codex rollout is shared: the generated one the tests use (tests/codex_rollouts.py).
CODEX_SAMPLE = ROOT / "tests" / "data" / "codex" / "rollout-2025-10-02T09-14-03-0199a1b2-generated.jsonl"


def in_file(path: Path, fmt: str) -> tuple[int, int]:
    """(tool_use blocks, usage reports) counted straight from the file, without the readers."""
    tools = reports = 0
    if fmt == "claude-code":
        ids = set()
        lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
        side = all(x.get("isSidechain") for x in lines if "uuid" in x)
        for x in lines:
            if x.get("type") != "assistant" or (x.get("isSidechain") and not side):
                continue
            message = x["message"]
            tools += sum(1 for b in message.get("content") or [] if b.get("type") == "tool_use")
            if (message.get("usage") or {}).get("input_tokens") is not None:
                ids.add(message.get("id"))
        return tools, len(ids)
    if fmt == "pi":
        for raw in path.read_text().splitlines():
            message = json.loads(raw).get("message") or {}
            tools += sum(1 for b in message.get("content") or [] if b.get("type") == "toolCall")
            usage = message.get("usage") or {}
            reports += bool(usage.get("input", 0) + usage.get("cacheRead", 0) + usage.get("cacheWrite", 0))
        return tools, reports
    if fmt == "codex":
        return codex_in_file(path)
    history = json.loads(path.read_text()).get("history", [])
    tools = sum(
        len(h.get("tool_calls") or []) or bool((h.get("action") or "").strip())
        for h in history
        if h.get("role") == "assistant"
    )
    return tools, 0


def codex_in_file(path: Path) -> tuple[int, int]:
    """Calls in a Codex rollout, and token_count events with new totals that follow a reply (the
    one Codex's compaction call reports has no reply in the file)."""
    tools = reports = 0
    totals: list = []
    replied = False
    for raw in path.read_text().splitlines():
        line = json.loads(raw) if raw.strip() else {}
        payload = line.get("payload") or {}
        kind = payload.get("type")
        if line.get("type") == "response_item":
            tools += kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
            replied = replied or payload.get("role", "assistant") == "assistant" and not kind.endswith("_output")
        elif kind == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]
            reports += replied and total not in totals
            replied = replied and total in totals
            totals.append(total)
    return tools, reports


def main() -> int:
    from _django import bench_database_until_exit, django_setup

    django_setup(prefix="compactor-bench-")
    from django.contrib.auth import get_user_model

    from compaction import importing
    from compaction.core.transcripts import read_transcript

    bench_database_until_exit()  # a throwaway database, never DATABASE_URL's own
    owner = get_user_model().objects.create_user("bench")
    paths = [Path(p) for p in sys.argv[1:]] or sorted(
        p for p in SHARED.rglob("*") if p.suffix in (".jsonl", ".traj") and "subagents" not in p.parts
    ) + [CODEX_SAMPLE]
    print(
        f"{'file':44} {'format':12} {'msgs':>5} {'tools':>9} {'usage':>9} {'queued':>6} {'subs':>4} {'ms':>7} {'×read':>6}"
    )
    for path in paths:
        started = time.perf_counter()
        read_transcript(path)
        read_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        report = importing.transcript_import(owner=owner, path=path)
        import_ms = (time.perf_counter() - started) * 1000
        tools, reports = in_file(path, report.format)
        print(
            f"{path.name[:44]:44} {report.format:12} {report.messages:5} {report.tool_calls:>4}/{tools:<4} "
            f"{report.usage_reports:>4}/{reports:<4} {report.queued_messages:6} {len(report.children):4} "
            f"{import_ms:7.0f} {import_ms / read_ms:6.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
