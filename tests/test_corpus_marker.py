"""tests/corpus.py: a `corpus` test without the corpus is skipped with a message saying where it
was looked for, and fails under REQUIRE_SERVICES=1 (CI); a test without the marker runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import corpus, services


def _item(marked: bool):
    return SimpleNamespace(get_closest_marker=lambda name: object() if marked and name == "corpus" else None)


def test_without_the_corpus_a_marked_test_skips_saying_where_it_looked(monkeypatch):
    monkeypatch.setattr(corpus, "PRESENT", False)
    monkeypatch.setattr(services, "REQUIRE_SERVICES", False)
    with pytest.raises(pytest.skip.Exception, match="corpus is absent: no folder"):
        corpus.require(_item(True))
    corpus.require(_item(False))  # unmarked: runs


def test_under_require_services_a_missing_corpus_fails(monkeypatch):
    monkeypatch.setattr(corpus, "PRESENT", False)
    monkeypatch.setattr(services, "REQUIRE_SERVICES", True)
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_SERVICES=1 but the real-transcript corpus is absent"):
        corpus.require(_item(True))


def test_with_the_corpus_a_marked_test_runs(monkeypatch):
    monkeypatch.setattr(corpus, "PRESENT", True)
    corpus.require(_item(True))


def test_the_corpus_is_found_through_the_environment_first(monkeypatch, tmp_path):
    monkeypatch.setenv(corpus.ENV, str(tmp_path))
    assert corpus._locate() == tmp_path
    monkeypatch.delenv(corpus.ENV)
    assert corpus._locate() == services.ROOT.parent / "shared" / "data" / "transcripts"
