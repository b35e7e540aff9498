"""A long session's handoff, read cold: the first request is named as history once the user has
moved on to others (the live task is the latest), and a setting changed twice is reported
with its newest value only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def _request_with_work(raw: list[dict], request: str, report: str) -> None:
    call_id = f"r{len(raw)}"
    raw.append({"role": "user", "content": request})
    use = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": "/repo/src/app.py"}}
    raw.append({"role": "assistant", "content": [use]})
    raw.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "x = 1"}]})
    raw.append({"role": "assistant", "content": [{"type": "text", "text": report}]})


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 6))
def test_the_first_request_is_history_once_the_user_moved_on(later):
    raw: list[dict] = []
    _request_with_work(raw, "Port the user-message selector to the new TUI.", "Ported the selector.")
    for n in range(later):
        _request_with_work(raw, f"Now make the footer color number {n} dimmer.", f"Footer uses dim {n}.")
    goal = _section(extractive_summary(se.as_msgs(raw)), "## Goal", "## Constraints")
    assert goal.strip().startswith("Port the user-message selector to the new TUI.")
    moved_on = later >= 3
    assert ("the session's first request" in goal) == moved_on
    if later:
        assert f'Latest request: "Now make the footer color number {later - 1} dimmer."' in goal


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["mdLink", "accentColor", "footer.dim"]), st.booleans())
def test_a_setting_changed_again_is_reported_with_its_newest_value(key, listed):
    raw: list[dict] = []
    first = (
        f"Updated the theme: `heading`: `#f0c674` (yellow); `{key}`: `#b5bd68` (green)"
        if listed
        else f"Updated `{key}` to match: `{key}` is now `#b5bd68` (green)."
    )
    _request_with_work(raw, "Make the markdown colors match the old theme.", first)
    _request_with_work(raw, f"{key} is actually 666666, fix it.", f"Fixed! `{key}` is now `#666666` (dark gray).")
    done = _section(extractive_summary(se.as_msgs(raw)), "### Done", "### In Progress")
    assert f"`{key}` is now `#666666`" in done
    assert "#b5bd68" not in done
    if listed:
        # The rest of the older report stays: only the value changed since goes.
        assert "`heading`: `#f0c674`" in done
