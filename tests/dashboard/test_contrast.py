"""WCAG AA contrast of the dashboard's text colours on the backgrounds they are used on (no browser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

CSS = (Path(settings.BASE_DIR) / "static" / "css" / "dashboard.css").read_text()
ROOT = dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b)", CSS.split("}", 1)[0]))


def _colour(name: str) -> str:
    value = ROOT[name[2:]] if name.startswith("--") else name
    if len(value) == 4:  # #fff → #ffffff
        value = "#" + "".join(c * 2 for c in value[1:])
    return value


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(fg: str, bg: str) -> float:
    high, low = sorted((_luminance(_colour(fg)), _luminance(_colour(bg))), reverse=True)
    return (high + 0.05) / (low + 0.05)


# (text colour, background) as the stylesheet combines them.
PAIRS = [
    ("--near", "--card"),  # .warn, .gauge-near on cards
    ("--near", "#fffaf0"),  # .warn inside .progress
    ("--near", "#f4f7ff"),  # "Nothing to compact" inside .preview
    ("--ok", "--card"),
    ("--ok", "#f2fbf5"),  # .ok inside .progress-succeeded
    ("--over", "--card"),
    ("--over", "#fdf3f3"),  # .error inside .progress-failed
    ("--muted", "--bg"),
    ("--muted", "--card"),
    ("--muted", "#eceef2"),  # .badge-muted, .region-note
    ("--muted", "--compacted-bg"),  # seq, token count, badges of compacted messages
    ("--ink", "--compacted-bg"),
    ("--accent", "--compacted-bg"),  # the seq link
    ("--accent", "#f2fbf5"),  # "view summary" in a boundary
    ("#7a5300", "#fff4d6"),  # running badges
    ("--ink", "#fdf3f3"),  # .usage-warning (context breakdown)
    ("--muted", "#f6f7f9"),  # notes in the breakdown's subtotal rows' neighbourhood
]


@pytest.mark.parametrize(("fg", "bg"), PAIRS)
def test_text_colours_meet_wcag_aa(fg, bg):
    assert contrast(fg, bg) >= 4.5, f"{fg} on {bg}: {contrast(fg, bg):.2f}:1"


def test_compacted_messages_are_not_faded():
    # Opacity lowers the contrast of everything inside (seq, tokens, badges) below AA.
    rule = re.search(r"\.msg-compacted\s*\{([^}]*)\}", CSS).group(1)
    assert "opacity" not in rule and "background" in rule


def test_the_old_low_contrast_colours_are_gone():
    assert ROOT["near"].lower() != "#c98a00" and ROOT["ok"].lower() != "#1e8a4c"
