"""docs/architecture.md names only what exists: every file or folder it cites, every dotted name
(a module, or a module's function, class or constant, resolved against the package the doc's
sections speak of) and every other identifier it quotes in `code`."""

from __future__ import annotations

import importlib
import re
from functools import cache

import pytest

from tests.services import ROOT

DOC = ROOT / "docs" / "architecture.md"
CODE_SPAN_RE = re.compile(r"`([^`\n]+)`")
PACKAGES = ("compaction", "sessions", "gateway", "ops", "project", "compactor_client")
# Where a name the doc gives relative to its section's package is looked for.
PREFIXES = (
    "",
    "compaction.",
    "compaction.core.",
    "compaction.core.summarizers.",
    "compaction.core.transcripts.",
    "compaction.services.",
    "compaction.api.",
    "sessions.",
    "sessions.services.",
    "sessions.api.",
    "gateway.",
    "gateway.openai.",
    "ops.",
    "sessions.models.",  # `Session.calibration_fit`
    "compaction.services.planning.",  # `Snapshot.policy_inputs()`
    "django.apps.",  # `AppConfig.ready`
)
PATH_PREFIXES = ("", "compaction/", "compaction/core/")
PATH_SUFFIXES = (".py", ".yml", ".yaml", ".toml", ".md", ".txt", ".sh")


FENCE_RE = re.compile(r"^```\n(.*?)^```", re.M | re.S)
MAP_PATH_RE = re.compile(r"(?<![\w.])(?:[a-z_]+/)+(?:[a-z_]+\.py)?|(?<![\w./])[a-z_]+\.py")


def spans(text: str) -> list[str]:
    """The `code` the doc quotes, and the paths its layer map (the fenced block) names."""
    quoted = {s.strip() for s in CODE_SPAN_RE.findall(text) if s.strip()}
    mapped = {m for block in FENCE_RE.findall(text) for m in MAP_PATH_RE.findall(block)}
    return sorted(quoted | mapped)


def _is_placeholder(span: str) -> bool:
    # URL routes, placeholders (`<app>/tasks.py`, `compactor_…`), shell commands, SQL and config tables.
    return span.startswith(("/", "[", "make ")) or any(c in span for c in "<>…* ") and "->" not in span


@cache
def _source_words() -> frozenset[str]:
    words: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text()))
    return frozenset(words)


@cache
def _files_named(name: str) -> bool:
    return any(
        p.name == name for package in (*PACKAGES, "tests", "deploy", "scripts") for p in (ROOT / package).rglob(name)
    )


def _path_exists(span: str) -> bool:
    head = span.rstrip("/")
    if any((ROOT / prefix / head).exists() for prefix in PATH_PREFIXES):
        return True
    # `gateway/identity.client_conversation_id`: a module's file, then a name in it.
    module, _, attr = head.partition(".")
    if "/" in module and (ROOT / f"{module}.py").is_file():
        return _resolves(module.replace("/", ".") + "." + attr)
    return "/" not in head and _files_named(head)  # a file named alone (`stream.py`)


def _resolves(dotted: str) -> bool:
    for prefix in PREFIXES:
        full = (prefix + dotted).split(".")
        for cut in range(len(full), 0, -1):
            try:
                obj = importlib.import_module(".".join(full[:cut]))
            except ImportError:
                continue
            try:
                for attr in full[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return True
    return False


def problem(span: str) -> str | None:
    """Why the span names nothing that exists, or None."""
    if _is_placeholder(span):
        return None
    name = re.sub(r"\(.*?\)", "", span.split(" -> ")[0]).strip()  # `plan(PolicyInputs) -> PolicyPlan`
    if "/" in name or name.endswith(PATH_SUFFIXES):
        return None if _path_exists(name) else f"no file {name}"
    if "." in name:
        return None if _resolves(name) else f"nothing importable is named {name}"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return None if name in _source_words() else f"no code says {name}"
    return None


def test_every_file_and_name_the_module_map_cites_exists():
    problems = [f"`{s}`: {why}" for s in spans(DOC.read_text()) if (why := problem(s))]
    assert problems == []


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ("compaction/core/policy.py", None),
        (
            "compaction/core/summarizers/extractive/nowhere.py",
            "no file compaction/core/summarizers/extractive/nowhere.py",
        ),
        ("gateway/identity.client_conversation_id", None),
        ("compaction.core.policy.plan(PolicyInputs) -> PolicyPlan", None),
        ("chain.build_chain", None),  # relative to compaction.core.summarizers
        ("analysis._no_such_function", "nothing importable is named analysis._no_such_function"),
        ("OVERRIDABLE", None),
        ("_NO_SUCH_CONSTANT", "no code says _NO_SUCH_CONSTANT"),
        ("/api/v1/schema/", None),
    ],
)
def test_the_checker_tells_what_exists_from_what_does_not(span, expected):
    assert problem(span) == expected
