"""Query parameters and bodies that are not what an endpoint takes are 400s naming the
parameter (issue 35 item 6): an invalid cursor or page number (DRF answers 404), a range whose
end is below its start (was an empty 200), integers too long for Python to convert (a 500 in a
query parameter, the decoder's hint about sys.set_int_max_str_digits in a body)."""

from __future__ import annotations

import base64
import json

import pytest

from sessions import services

from .helpers import url

pytestmark = pytest.mark.django_db

HUGE = "9" * 5000


@pytest.fixture
def history(session):
    services.messages_append(
        session=session,
        messages=[{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(6)],
    )
    return session


def _problem(response, field: str) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["detail"], body
    return body["error"]


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "!!!",
        base64.b64encode(b"o=1&p=not-a-seq").decode(),
        base64.b64encode(b"o=-5").decode(),
        base64.b64encode(b"p=" + HUGE.encode()).decode(),
    ],
)
def test_a_cursor_the_endpoint_did_not_write_is_400(api, history, cursor):
    error = _problem(api.get(url(history, "messages/"), {"cursor": cursor}), "cursor")
    assert "next" in error and "previous" in error


def test_the_cursors_the_endpoint_writes_still_page(api, history):
    first = api.get(url(history, "messages/"), {"limit": 2}).json()
    second = api.get(first["next"].replace("http://testserver", ""))
    assert second.status_code == 200
    assert [m["seq"] for m in second.json()["results"]] == [3, 4]


@pytest.mark.parametrize("page", ["-1", "0", "abc", "1.5", HUGE, "١"])
def test_a_page_that_is_not_a_page_number_is_400(api, history, page):
    _problem(api.get("/api/v1/sessions/", {"page": page}), "page")


def test_past_the_last_page_stays_404_and_last_is_a_page(api, history):
    assert api.get("/api/v1/sessions/", {"page": "2"}).status_code == 404
    assert api.get("/api/v1/sessions/", {"page": "last"}).status_code == 200


def test_a_range_ending_below_its_start_is_400(api, history):
    error = _problem(api.get(url(history, "messages/"), {"from_seq": 5, "to_seq": 2}), "to_seq")
    assert "below from_seq" in error
    one = api.get(url(history, "messages/"), {"from_seq": 3, "to_seq": 3})
    assert one.status_code == 200 and [m["seq"] for m in one.json()["results"]] == [3]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("messages/", {"from_seq": HUGE}, "from_seq"),
        ("messages/", {"limit": HUGE}, "limit"),
        ("search/", {"q": "message", "limit": HUGE}, "limit"),
    ],
)
def test_a_5000_digit_query_parameter_is_400(api, history, path, params, field):
    _problem(api.get(url(history, path), params), field)


def test_a_5000_digit_integer_in_a_body_is_400_without_pythons_hint(api, history):
    body = '{"messages": [{"role": "user", "content": "hi", "usage": {"input_tokens": ' + HUGE + "}}]}"
    response = api.post(url(history, "messages/"), body, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert "5,000 digits" in error and "too long" in error
    assert "set_int_max_str_digits" not in json.dumps(response.json())
