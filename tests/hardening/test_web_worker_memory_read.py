"""A request the buffered worker read whole reaches gunicorn's parser in socket-sized pieces.

Unread into the parser's buffer whole, every read of the parser and of the body copied all that
was still buffered: ~10 ms of CPU per 3 MB gateway call (bench/cli_replay_bench.py)."""

from __future__ import annotations

import json

from gunicorn.config import Config
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import SocketUnreader

from project.web_worker import read_from_memory


def _request(body: bytes) -> bytes:
    head = f"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def test_a_whole_request_is_parsed_from_memory_in_socket_sized_pieces_and_the_next_one_kept():
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 1000}] * 4000}).encode()
    assert len(body) > 3_000_000
    pipelined = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    parser = RequestParser(Config(), iter([]), ("127.0.0.1", 1))
    read_from_memory(parser, bytearray(_request(body) + pipelined))

    sizes: list[int] = []
    unreader = parser.unreader
    original = unreader.read

    def counted(*args, **kwargs):
        piece = original(*args, **kwargs)
        sizes.append(len(piece))
        return piece

    unreader.read = counted
    request = next(parser)
    assert request.path == "/anthropic/v1/messages"
    assert request.body.read() == body
    assert max(sizes) <= SocketUnreader.max_body_chunk + 8192, max(sizes)

    following = next(parser)  # what the client pipelined behind it is still there
    assert (following.method, following.path) == ("GET", "/healthz")


def test_requests_on_one_connection_do_not_pile_up_in_memory():
    parser = RequestParser(Config(), iter([]), ("127.0.0.1", 1))
    socket_side = parser.unreader
    for _ in range(3):  # each request of a kept-alive connection, read whole, then taken over
        read_from_memory(parser, bytearray(_request(b"{}")))
        request = next(parser)
        assert request.body.read() == b"{}"
        parser.unreader.take_buffered()
    assert parser.unreader.source is socket_side  # not a chain of every earlier request's bytes
    assert len(parser.unreader._data) == 0
