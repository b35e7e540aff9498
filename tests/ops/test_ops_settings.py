"""The operations settings fail at start-up with a message naming the variable."""

from __future__ import annotations

import pytest

from tests.test_settings import _check


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (
            {"COMPACTOR_WORKER_HEARTBEAT_SECONDS": "30", "COMPACTOR_WORKER_HEARTBEAT_MAX_AGE": "20"},
            "COMPACTOR_WORKER_HEARTBEAT_MAX_AGE",
        ),
        ({"COMPACTOR_METRICS_TOKEN": "short"}, "COMPACTOR_METRICS_TOKEN"),
    ],
)
def test_a_bad_operations_setting_stops_start_up_naming_it(overrides, named):
    result = _check(overrides)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.splitlines()[-1]
