"""The bench's own checks (its evaluators' detectors and output): run by `make test` beside
tests/. The corpus tests here follow tests/corpus.py's rule: skipped without the corpus, failed
under REQUIRE_SERVICES=1."""

from __future__ import annotations

import pytest

from tests import corpus


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    corpus.require(item)
