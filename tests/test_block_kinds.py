"""Block kinds are named once, in compaction/core/blocks.py: product code compares and builds
"tool_use" / "tool_result" blocks with TOOL_USE / TOOL_RESULT. A literal stays only where the
same word means something else on the wire (a stop reason, a search hit's kind, a schema table
written in the API's words) or in the standalone client, which imports nothing of the server."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from tests.test_code_size import ROOT, _product_files

LITERALS = {'"tool_use"', '"tool_result"'}
ALLOWED = {
    "compaction/core/blocks.py",  # where they are defined
    "compactor_client/render.py",  # the standalone client (client-standalone contract)
    "compactor_client/cli.py",
    "gateway/openai/chat.py",  # stop reasons: "tool_use" is OpenAI's finish reason mapped
    "sessions/api/schema.py",  # the schema's table, in the API's words beside "text", "image"…
    "sessions/api/search.py",  # a search hit's kind, beside "text", "tool_call", "thinking"
    "sessions/api/views.py",  # a stop reason in an example
    "sessions/dashboard/search.py",
    "sessions/search_text.py",
}


def literals(path: Path) -> list[int]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [t.start[0] for t in tokens if t.type == tokenize.STRING and t.string in LITERALS]


def test_block_kinds_come_from_core_blocks():
    found = {
        f"{rel}:{line}"
        for p in _product_files()
        if (rel := str(p.relative_to(ROOT))) not in ALLOWED
        for line in literals(p)
    }
    assert found == set()


def test_every_allowed_file_exists_and_still_needs_it():
    assert [f for f in sorted(ALLOWED) if not (ROOT / f).is_file() or not literals(ROOT / f)] == []
