"""Repository state from git's own words: the latest `git status` (or `git diff --stat`) of the
range says what is modified and untracked, not the editor calls alone. On every shared
transcript, a range cut right after a `git status` names each file it listed; generated
sessions check that a commit takes what it committed and leaves the rest, and that a package
manager's rewrite of its manifest counts as a change to commit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.text_heuristics import command_of, tool_result_text
from compaction.core.types import Msg
from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages, _section

CUTS_PER_TRANSCRIPT = 4


def _status_cuts(msgs: list[Msg]) -> list[tuple[int, list[str]]]:
    """(cut, files listed) where the range would end on the output of a long-form `git status`."""
    calls: dict[str, str] = {}
    cuts = []
    for index, msg in enumerate(msgs):
        for block in msg.blocks:
            kind = block.get("type")
            if kind in ("tool_use", "toolCall"):
                calls[block.get("id", "")] = command_of(block) or ""
            elif kind == "tool_result" and re.search(
                r"\bgit status\s*(?:2>&1)?$", calls.get(block.get("tool_use_id"), "")
            ):
                output = tool_result_text(block.get("content"))
                listed = re.findall(r"(?m)^\t(?:(?:modified|new file|deleted):\s+)?(\S+)$", output)
                if 0 < len(listed) <= 10:  # a longer list is cut to ten names and a count
                    cuts.append((index + 1, listed))
    return cuts[-CUTS_PER_TRANSCRIPT:]


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem[:30]}")
def test_a_range_cut_after_git_status_names_every_file_it_listed(path: Path) -> None:
    msgs = _messages(path)
    for cut, listed in _status_cuts(msgs):
        repo = _section(extractive_summary(msgs[:cut]), "### Repository State", "\n### ")
        for shown in listed:
            name = re.sub(r"^(?:\.\./)+", "", shown).rstrip("/").rsplit("/", 1)[-1]
            assert name in repo, (path.name, cut, shown)


# ---------------------------------------------------------------------------- generated sessions

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _call(n: int, command: str, output: str) -> list[dict]:
    use = {"type": "tool_use", "id": f"b{n}", "name": "Bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": f"b{n}", "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def _edit(file: str) -> list[dict]:
    use = {
        "type": "tool_use",
        "id": "e1",
        "name": "Edit",
        "input": {"file_path": f"/repo/{file}", "old_string": "a = 1", "new_string": "a = 2"},
    }
    result = {"type": "tool_result", "tool_use_id": "e1", "content": "Updated."}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def _status(*, modified: list[str], untracked: list[str]) -> str:
    lines = ["On branch main"]
    if modified:
        lines += ["Changes not staged for commit:", '  (use "git add <file>..." to update what will be committed)']
        lines += [f"\tmodified:   {m}" for m in modified] + [""]
    if untracked:
        lines += ["Untracked files:", '  (use "git add <file>..." to include in what will be committed)']
        lines += [f"\t{u}" for u in untracked] + [""]
    return "\n".join(lines)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.booleans())
def test_a_commit_takes_what_it_added_and_the_rest_stays_pending(word, other, add_all):
    file, extra, cache = f"src/{word}.py", f"src/{other}_cfg.toml", f"{other}_cache/"
    raw: list[dict] = [{"role": "user", "content": f"Fix the {word} parser and commit."}]
    raw += _edit(file)
    raw += _call(1, "git status", _status(modified=[file, extra], untracked=[cache]))
    add = "git add -A" if add_all else f"git add {file}"
    raw += _call(2, f'{add} && git commit -m "Fix {word}"', f"[main abc1234] Fix {word}\n 1 file changed")
    repo = _section(extractive_summary(se.as_msgs(raw)), "### Repository State", "\n### ")
    assert "No edits after the last commit" not in repo
    # Untracked files are never committed by `git add <file>`; `git add -A` takes them too, but
    # whether it did is not known from the commit's output: still listed as git last showed them.
    assert f"untracked `{cache}`" in repo
    assert (f"`{extra}`" in repo) == (not add_all)
    assert f"`{file}`" not in repo


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from([("npm install", "package.json"), ("cargo add", "Cargo.toml"), ("go get", "go.mod")]))
def test_a_dependency_added_after_the_commit_is_a_change_to_commit(package, tool):
    command, manifest = tool
    raw: list[dict] = [{"role": "user", "content": f"Use {package} for the parser and commit."}]
    raw += _edit("src/parser.py")
    raw += _call(1, 'git add -A && git commit -m "Parser"', "[main abc1234] Parser\n 1 file changed")
    raw += _call(2, "git status", "On branch main\nnothing to commit, working tree clean")
    raw += _call(3, f"cd /repo && {command} {package} 2>&1", "added 1 package")
    summary = extractive_summary(se.as_msgs(raw))
    assert f"/{manifest}`" in _section(summary, "### Repository State", "\n### ")
    assert f"/{manifest}`" in _section(summary, "## Next Steps", "## Critical Context")
