from __future__ import annotations

import json

import pytest
import yaml
from django.contrib.staticfiles import finders
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

PATHS = [
    "/api/v1/sessions/",
    "/api/v1/sessions/{session_id}/",
    "/api/v1/sessions/{session_id}/messages/",
    "/api/v1/sessions/{session_id}/context/",
    "/api/v1/sessions/{session_id}/usage/",
]


def test_the_schema_is_a_valid_openapi_3_document_in_json(client):
    response = client.get("/api/v1/schema/?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # raises on an invalid document
    for path in PATHS:
        assert path in schema["paths"], path
    append = schema["paths"]["/api/v1/sessions/{session_id}/messages/"]["post"]
    assert {"201", "400", "404", "413"} <= set(append["responses"])
    assert "ApiKeyAuth" in schema["components"]["securitySchemes"]
    context = schema["components"]["schemas"]["ContextOut"]["properties"]
    assert {
        "system",
        "messages",
        "tokens",
        "context_window",
        "usage_ratio",
        "trigger_tokens",
        "active_compaction",
    } <= set(context)


def test_the_schema_is_served_as_yaml_too(client):
    response = client.get("/api/v1/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    validate_schema(schema)
    assert "/api/v1/sessions/{session_id}/usage/" in schema["paths"]


def test_swagger_ui_is_served_from_local_static_files(client):
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css" in html
    # No CDN: every script and stylesheet is local.
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui-standalone-preset.js"):
        assert finders.find(f"drf_spectacular_sidecar/swagger-ui-dist/{asset}"), asset


def test_schema_generation_has_no_warnings(tmp_path):
    from django.core.management import call_command

    # --fail-on-warn turns any drf-spectacular warning (an undocumented field, a guessed
    # type) into an error; --validate checks the document against the OpenAPI 3 schema.
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    assert "/api/v1/sessions/{session_id}/context/" in target.read_text()
