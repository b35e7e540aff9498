"""gateway.relay: whole events only reach the client, and a stream that did not finish ends
with an error event, however the upstream's bytes are split."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from gateway.relay import UpstreamFault, relay_events

EVENTS = [b"event: a\ndata: {}\n\n", b'event: b\r\ndata: {"x": 1}\r\n\r\n', b"event: message_stop\ndata: {}\n\n"]


class FakeResponse:
    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks, self.error, self.closed = chunks, error, False

    def iter_raw(self):
        yield from self.chunks
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True


def run(chunks: list[bytes], error: Exception | None = None) -> tuple[list[bytes], list[UpstreamFault]]:
    fed: list[bytes] = []
    faults: list[UpstreamFault] = []
    response = FakeResponse(chunks, error)
    out = list(
        relay_events(
            response,
            on_event=lambda event: fed.append(event.raw) or True,
            complete=lambda: b"message_stop" in b"".join(fed),
            error_event=lambda fault: f"ERROR {fault.error_type}".encode(),
            timeout=5,
            on_fault=faults.append,
        )
    )
    assert response.closed
    assert b"".join(fed) == b"".join(piece for piece in out if not piece.startswith(b"ERROR"))
    return out, faults


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_events_pass_whole_however_the_bytes_are_split(size):
    raw = b"".join(EVENTS)
    out, faults = run([raw[i : i + size] for i in range(0, len(raw), size)])
    assert b"".join(out) == raw and not faults
    assert all(piece.endswith((b"\n\n", b"\r\n\r\n")) for piece in out)


def test_a_reset_drops_the_half_event_and_ends_with_an_error():
    raw = EVENTS[0] + EVENTS[1][:10]
    out, faults = run([raw], httpx.ReadError("reset"))
    assert out == [EVENTS[0], b"ERROR api_error"]
    assert faults[0].status == 502


def test_a_stall_is_an_overloaded_error_and_a_504():
    out, faults = run([EVENTS[0]], httpx.ReadTimeout("stalled"))
    assert out[-1] == b"ERROR overloaded_error" and faults[0].status == 504


def test_a_stream_that_just_stops_early_ends_with_an_error():
    out, faults = run([EVENTS[0], EVENTS[1]])
    assert out[-1] == b"ERROR api_error" and "ended before" in faults[0].message


def test_a_last_event_without_its_blank_line_still_finishes_the_stream():
    out, faults = run([EVENTS[0], b"event: message_stop\ndata: {}"])
    assert not faults and out[-1] == b"event: message_stop\ndata: {}\n\n"
