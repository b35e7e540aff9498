"""Recall from the client's side, against a live server: `compactor search` / `compactor read`,
and `compactor mcp` driven over stdio by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from compaction.models import Compaction
from compactor_client.cli import main
from sessions import services
from sessions.models import Session

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = "Traceback (most recent call last):\n  File \"src/app.py\", line 12\nKeyError: 'wombat_id'"


@pytest.fixture
def env(monkeypatch, live_server, api_key):
    monkeypatch.setenv("COMPACTOR_URL", live_server.url)
    monkeypatch.setenv("COMPACTOR_API_KEY", api_key)


@pytest.fixture
def compacted(user) -> Session:
    """A session whose first messages were summarized away (the summary leaves out the details)."""
    session = services.session_create(owner=user, title="Recall session", model="claude-sonnet-4-5")
    services.messages_append(
        session=session,
        messages=[
            {"role": "user", "content": "The import crashes with a KeyError, find out why."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Running it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "python src/app.py"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": OUTPUT}]},
            {"role": "assistant", "content": "Fixed the lookup."},
            {"role": "user", "content": "Now write the changelog."},
        ],
    )
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="Fixed an import crash.", first_kept_seq=5
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)
    return session


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compactor_search_prints_the_hits_of_a_session(env, compacted, capsys):
    code, out, err = run(capsys, "search", str(compacted.pk), "wombat_id")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0] == f"1 hit for 'wombat_id' in session {compacted.pk} \"Recall session\""
    assert lines[1].startswith("#3 user (tool result, summarized away)")
    assert "«wombat_id»" in lines[1]
    # Without a session: every session of the key's owner, each hit naming its session.
    code, out, _ = run(capsys, "search", "KeyError")
    assert code == 0 and f"[{compacted.pk}] #1 user (text, summarized away)" in out
    code, out, _ = run(capsys, "search", str(compacted.pk), "nothing-like-this")
    assert code == 0 and "No hits" in out


def test_compactor_read_prints_messages_verbatim_with_their_pairs(env, compacted, capsys):
    code, out, err = run(capsys, "read", str(compacted.pk), "3")
    assert code == 0, err
    assert out.startswith("--- #2 assistant\nRunning it.\n[tool call Bash id=toolu_1]")
    assert f"--- #3 user\n[tool result for toolu_1]\n{OUTPUT}\n" in out
    code, _, err = run(capsys, "read", str(compacted.pk), "three")
    assert code == 1 and "give a message number or a range" in err


async def _mcp_session(env: dict[str, str], calls: list[tuple[str, dict]]):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "compactor_client", "mcp"], env=env, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        init = await client.initialize()
        tools = await client.list_tools()
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return init, tools, results


def test_the_mcp_server_answers_over_stdio_with_verbatim_text(live_server, api_key, compacted):
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")},
        "COMPACTOR_URL": live_server.url,
        "COMPACTOR_API_KEY": api_key,
    }
    calls = [
        ("search_history", {"query": "wombat_id"}),
        ("read_messages", {"from_seq": 3}),
        ("list_sessions", {}),
        ("read_messages", {"from_seq": 1, "session": "00000000-0000-0000-0000-000000000000"}),
    ]
    init, tools, results = asyncio.run(asyncio.wait_for(_mcp_session(env, calls), 60))
    assert init.server_info.name == "compactor"
    assert {"search_history", "read_messages", "list_sessions"} <= {tool.name for tool in tools.tools}
    search, read, listing, missing = ([block.text for block in r.content] for r in results)
    # The default session is the owner's most recently active one; every answer names it.
    assert search[0].startswith(f"1 hit for 'wombat_id' in session {compacted.pk} \"Recall session\"")
    assert "#3 user (tool result, summarized away)" in search[0] and "«wombat_id»" in search[0]
    assert read[0].startswith(f'session {compacted.pk} "Recall session": messages #2 to #3, verbatim')
    assert OUTPUT in read[0]  # the tool output exactly as stored
    assert f"* {compacted.pk}  5 messages, compacted" in listing[0]
    assert results[3].is_error and "404" in missing[0]


def test_the_tools_default_to_compactor_session_and_can_search_everything(live_server, api_key, compacted, user):
    from compactor_client import Compactor
    from compactor_client.mcp_server import Recall

    newer = services.session_create(owner=user, title="Newer session")
    services.messages_append(session=newer, messages=[{"role": "user", "content": "wombat_id again"}])
    with Compactor(live_server.url, api_key) as cx:
        # No COMPACTOR_SESSION: the most recently active session.
        assert Recall(cx).search_history("wombat_id").startswith(f"1 hit for 'wombat_id' in session {newer.pk} \"Newer")
        pinned = Recall(cx, str(compacted.pk))
        assert pinned.search_history("wombat_id").startswith(f"1 hit for 'wombat_id' in session {compacted.pk}")
        assert "* " + str(compacted.pk) in pinned.list_sessions()
        everywhere = pinned.search_history("wombat_id", session="all")
        assert everywhere.startswith("2 hits for 'wombat_id' in all your sessions")
        assert f"[{compacted.pk}] #3 user" in everywhere and f"[{newer.pk}] #1 user" in everywhere
        assert pinned.read_messages(9).endswith("no messages from #9 to #9 (it has 5).")


def test_list_sessions_filtered_by_title_stars_only_the_real_default(live_server, api_key, compacted, user):
    from compactor_client import Compactor
    from compactor_client.mcp_server import Recall

    newer = services.session_create(owner=user, title="Newer session")
    services.messages_append(session=newer, messages=[{"role": "user", "content": "hello"}])
    with Compactor(live_server.url, api_key) as cx:
        listing = Recall(cx).list_sessions("Recall")
        # The tools' default is the newest session overall, which the filter left out: no star.
        assert f"  {compacted.pk}" in listing and f"* {compacted.pk}" not in listing
        assert f"* {newer.pk}" in Recall(cx).list_sessions("Newer")


def test_the_default_is_the_latest_conversation_not_a_subagent_written_after_it(live_server, api_key, compacted, user):
    from compactor_client import Compactor
    from compactor_client.mcp_server import Recall

    # An import writes a conversation's subagent sessions after it, so they are the most recently active.
    child = services.session_create(owner=user, title="Subagent")
    Session.objects.filter(pk=child.pk).update(parent=compacted)
    services.messages_append(session=child, messages=[{"role": "user", "content": "wombat_id in the subagent"}])
    with Compactor(live_server.url, api_key) as cx:
        assert Recall(cx).search_history("wombat_id").startswith(f"1 hit for 'wombat_id' in session {compacted.pk}")
        assert f"* {compacted.pk}" in Recall(cx).list_sessions()


def test_a_mistake_caught_before_any_request_is_reported_without_a_status(env, compacted, capsys, tmp_path):
    code, out, err = run(capsys, "read", str(compacted.pk), "abc")
    assert code == 1 and err == "compactor: 'abc': give a message number or a range, e.g. 40 or 40-45\n"
    code, _, err = run(capsys, "import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and err == f"compactor: {tmp_path / 'missing.jsonl'}: no such file\n"
    code, _, err = run(capsys, "search", str(compacted.pk), "a" * 501)  # a server answer keeps its status
    assert code == 1 and err == "compactor: 400: q: is longer than 500 characters\n"


def test_a_tool_says_the_server_is_unreachable_rather_than_that_it_answered():
    from mcp.server.mcpserver.exceptions import ToolError

    from compactor_client import Compactor
    from compactor_client.mcp_server import Recall, _answer

    with Compactor("http://127.0.0.1:9", "ck_test") as cx, pytest.raises(ToolError) as caught:
        _answer(lambda: Recall(cx).list_sessions())
    assert str(caught.value).startswith("Compactor: cannot reach http://127.0.0.1:9")


def test_an_unknown_session_is_named_with_where_it_came_from(live_server, api_key, compacted):
    from compactor_client import Compactor, CompactorError
    from compactor_client.mcp_server import Recall

    missing = "00000000-0000-0000-0000-000000000000"
    with Compactor(live_server.url, api_key) as cx:
        with pytest.raises(
            CompactorError, match=rf"^404: no session {missing} for this key \(from \$COMPACTOR_SESSION\)"
        ):
            Recall(cx, missing).search_history("wombat_id")
        with pytest.raises(CompactorError, match=r"\(from the session argument\)"):
            Recall(cx).read_messages(1, session=missing)


def test_reading_into_a_pipe_closed_early_ends_without_a_traceback(live_server, api_key, user):
    import subprocess

    session = services.session_create(owner=user, title="Long output")
    services.messages_append(session=session, messages=[{"role": "user", "content": "line of text\n" * 40_000}])
    env = {**os.environ, "COMPACTOR_URL": live_server.url, "COMPACTOR_API_KEY": api_key}
    cli = subprocess.Popen(
        [sys.executable, "-m", "compactor_client", "read", str(session.pk), "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert cli.stdout.readline().startswith(b"--- #1 user")
    cli.stdout.close()  # like `| head -1`: more than a pipe's buffer is still to come
    stderr = cli.stderr.read().decode()
    assert cli.wait(timeout=30) == 1 and "Traceback" not in stderr, stderr
