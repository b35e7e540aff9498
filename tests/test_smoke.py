from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_schema_is_served(api):
    response = api.get("/api/v1/schema/")
    assert response.status_code == 200
