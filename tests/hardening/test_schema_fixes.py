"""What the OpenAPI schema now says is what the API does (the schemathesis run in
tests/schema covers the rest)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client) -> dict:
    return json.loads(client.get("/api/v1/schema/?format=json").content)


def test_system_prompt_0_is_a_400_not_the_string_0(api):
    response = api.post("/api/v1/sessions/", {"system_prompt": 0}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "system_prompt: Not a valid string."


@pytest.mark.parametrize(("field", "value"), [("dry_run", 0), ("force", "true"), ("keep_recent_tokens", "100")])
def test_compaction_fields_take_only_their_json_type(api, session, field, value):
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {field: value}, format="json")
    assert response.status_code == 400 and response.json()["error"].startswith(f"{field}: ")


@pytest.mark.parametrize("query", ["page_size=0", "page_size=201", "page_size=x"])
def test_a_bad_page_size_is_a_400(api, query):
    response = api.get(f"/api/v1/sessions/?{query}")
    assert response.status_code == 400 and response.json()["error"].startswith("page_size: ")


def test_the_compaction_list_is_documented_as_the_paginated_page_it_is(api, session, schema):
    operation = schema["paths"]["/api/v1/sessions/{session_id}/compactions/"]["get"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    documented = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    body = api.get(f"/api/v1/sessions/{session.pk}/compactions/").json()
    assert set(body) == set(documented["properties"]) == {"next", "previous", "results"}


def test_the_schema_states_bounds_unknown_fields_and_errors(schema):
    components = schema["components"]["schemas"]
    assert components["UsageInRequest"]["additionalProperties"] is False
    assert components["OverflowRequest"]["properties"]["input_tokens"]["maximum"] == 500_000_000
    assert len(components["OverflowRequest"]["anyOf"]) == 3
    events = {
        p["name"]: p["schema"] for p in schema["paths"]["/api/v1/sessions/{session_id}/events/"]["get"]["parameters"]
    }
    assert events["limit"]["maximum"] == 500 and events["after"]["minimum"] == 0
    assert components["MessageInRequest"]["properties"]["usage"]["type"] == "object"
    assert "calibration" in components["UsageOut"]["properties"]
    settings_schema = components["SessionInRequest"]["properties"]["compaction_settings"]
    assert settings_schema["additionalProperties"] is False
    assert settings_schema["properties"]["keep_recent_tokens"]["maximum"] == 10_000_000
    for path, methods in schema["paths"].items():
        if path.startswith("/api/v1/sessions/{session_id}/"):
            for method, operation in methods.items():
                assert {"401", "404", "429"} <= set(operation["responses"]), (method, path)
