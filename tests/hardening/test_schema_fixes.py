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


def _block_shape(schema: dict, kind: str) -> dict:
    content = schema["components"]["schemas"]["MessageInRequest"]["properties"]["content"]
    blocks = next(option for option in content["oneOf"] if option["type"] == "array")["items"]["oneOf"]
    return next(shape for shape in blocks if shape["properties"]["type"]["enum"] == [kind])


def test_a_document_block_needs_its_source_in_the_schema_as_in_the_api(api, session, schema):
    document = _block_shape(schema, "document")
    assert document["required"] == ["type", "source"]
    assert "text" in [s["properties"]["type"]["enum"][0] for s in document["properties"]["source"]["oneOf"]]
    assert _block_shape(schema, "tool_use")["required"] == ["type", "id", "name", "input"]
    path = f"/api/v1/sessions/{session.pk}/messages/"
    bare = api.post(path, {"role": "user", "content": [{"type": "document"}]}, format="json")
    assert bare.status_code == 400 and bare.json()["error"].startswith("content[0].source")
    sourced = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}
    assert api.post(path, {"role": "user", "content": [sourced]}, format="json").status_code == 201


@pytest.mark.parametrize("prompt", ["", "   ", "Summarize it all."])
def test_a_compact_prompt_the_schema_refuses_is_refused(api, schema, prompt):
    rule = schema["components"]["schemas"]["SessionInRequest"]["properties"]["compaction_settings"]["properties"][
        "compact_prompt"
    ]
    assert rule["minLength"] == 1 and "conversation" in rule["pattern"]
    response = api.post("/api/v1/sessions/", {"compaction_settings": {"compact_prompt": prompt}}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("compaction_settings: compact_prompt: ")
    good = "Summarize this:\n{conversation}"
    created = api.post("/api/v1/sessions/", {"compaction_settings": {"compact_prompt": good}}, format="json")
    assert created.status_code == 201


def test_every_writing_post_documents_the_idempotency_key_and_its_409(schema):
    posts = [
        (path, ops["post"]) for path, ops in schema["paths"].items() if "post" in ops and path.startswith("/api/v1/")
    ]
    assert len(posts) >= 8
    for path, operation in posts:
        assert "Idempotency-Key" in operation["description"], path
        assert "409" in operation["responses"], path
