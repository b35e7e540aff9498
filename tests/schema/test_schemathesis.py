"""Schemathesis runs over the served OpenAPI schema against the app (in-process WSGI), every
check on, a bounded number of examples per operation; any finding fails the test."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import positive_data_acceptance

from sessions import services
from sessions.models import ApiKey

# NUL characters are refused by every text field (PostgreSQL cannot store them), which a
# JSON Schema pattern on every string would only obscure; generation leaves them out.
CONFIG = schemathesis.Config.from_dict({"generation": {"allow-x00": False}})
schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", get_wsgi_application(), config=CONFIG)
# Every field an answer carries must be in the schema: response objects are closed for the checks
# (the served schema leaves them open, so clients keep working when a field is added).
for _name, _component in schema.raw_schema["components"]["schemas"].items():
    if not _name.endswith("Request") and "properties" in _component:
        _component.setdefault("additionalProperties", False)

# Operations whose valid requests also depend on the session's stored state or on a file's
# content, which no schema can say: a schema-valid body may still be refused with a 400 naming the field.
STATEFUL_VALIDITY = {
    # a tool_result must answer an earlier tool_use of the session; tool_use ids are unique per session
    "messages_append",
    # message_seq must name a stored assistant reply of the session
    "usage_report",
    # reserve_tokens and keep_recent_tokens must be below the session's context window (which the
    # model or context_window sets)
    "sessions_create",
    "sessions_partial_update",
    # the uploaded file must be a transcript (its content, not its schema type: binary)
    "imports_create",
    # a cursor must be one the endpoint wrote (a `next` or `previous` link); to_seq must not be
    # below from_seq
    "messages_list",
    "sessions_compactions_list",
}


@pytest.fixture
def keep_test_connection():
    """schemathesis calls the WSGI app itself, not through Django's test client, so Django's
    end-of-request hook would close the test's database connection (it is inside the test's
    transaction): keep it open, as the test client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def caller(django_user_model, settings, keep_test_connection):
    # No worker here: a `wait` would sleep its whole time. With no waiter slot it answers at once.
    settings.COMPACTION_MAX_WAITERS = 0
    user = django_user_model.objects.create_user("fuzz", password="fuzz-password")
    _, key = ApiKey.objects.create_key(owner=user, name="fuzz")
    session = services.session_create(owner=user, title="fuzzed", model="claude-sonnet-4-5")
    services.messages_append(
        session=session,
        messages=[
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": "src/app.py and src/util.py."},
        ],
    )
    return {"key": key, "session": session}


@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_the_api_matches_its_schema(case, caller):
    def generated_valid(location: ParameterLocation) -> bool:
        info = case.meta.components.get(location) if case.meta else None
        return info is None or info.mode.is_positive

    # The caller's own session and key, unless this case is about a malformed id or header.
    if "session_id" in case.path_parameters and generated_valid(ParameterLocation.PATH):
        case.path_parameters["session_id"] = str(caller["session"].pk)
    headers = {"Authorization": f"Bearer {caller['key']}"} if generated_valid(ParameterLocation.HEADER) else None
    stateful = case.operation.definition.raw.get("operationId") in STATEFUL_VALIDITY
    case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance] if stateful else [])
