"""Image and document sources are checked as the Anthropic Messages API checks them (issue 35
item 4): base64 that decodes, data of the media type it names (magic bytes), an image of at most
5 MB of base64 and 8,000 pixels a side, a PDF under the request maximum, https URLs only. Stored
anyway, such a block was sent on every later call and refused each time."""

from __future__ import annotations

import base64
import struct

import pytest

from sessions import validation

from .helpers import snapshot, url

pytestmark = pytest.mark.django_db


def png(width: int = 4, height: int = 3) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height) + b"\x08\x06\0\0\0"
    )


def gif(width: int = 4, height: int = 3) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\0\0\0"


def jpeg(width: int = 4, height: int = 3) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof0 = b"\xff\xc0" + struct.pack(">HBHH", 11, 8, height, width) + b"\x01\x01\x11\0"
    return b"\xff\xd8" + app0 + sof0


def webp(width: int = 4, height: int = 3) -> bytes:
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0" + (width - 1).to_bytes(3, "little")
    vp8x += (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(vp8x)) + b"WEBP" + vp8x


PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def image(media_type: str, data: str) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def document(data: str, media_type: str = "application/pdf") -> dict:
    return {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}


def url_image(address: str) -> dict:
    return {"type": "image", "source": {"type": "url", "url": address}}


@pytest.mark.parametrize(
    ("block", "field", "problem"),
    [
        (image("image/png", "!!notb64"), "data", "is not valid base64"),
        (image("image/png", "iVBORw0KGgo"), "data", "is not valid base64"),  # unpadded
        (image("image/png", b64(png())[:8] + "\n" + b64(png())[8:]), "data", "is not valid base64"),
        (image("image/png", b64(jpeg())), "data", "is not image/png data"),
        (image("image/jpeg", b64(png())), "data", "is not image/jpeg data"),
        (image("image/webp", b64(gif())), "data", "is not image/webp data"),
        (image("image/gif", b64(b"hello world")), "data", "is not image/gif data"),
        (image("image/bmp", b64(b"BM" + b"\0" * 20)), "media_type", "must be one of image/jpeg, image/png"),
        (image("application/pdf", b64(PDF)), "media_type", "must be one of image/jpeg"),
        (image("image/png", b64(png(8001, 10))), "data", "image is 8001x10 pixels"),
        (image("image/gif", b64(gif(10, 9000))), "data", "image is 10x9000 pixels"),
        (image("image/jpeg", b64(jpeg(8500, 20))), "data", "image is 8500x20 pixels"),
        (image("image/webp", b64(webp(9000, 2))), "data", "image is 9000x2 pixels"),
        (image("image/png", "A" * (5 * 1024 * 1024 + 4)), "data", "image exceeds 5 MB maximum"),
        (document(b64(png())), "data", "is not application/pdf data"),
        (document(b64(PDF), "image/png"), "media_type", "must be one of application/pdf"),
        (url_image("javascript:alert(1)"), "url", "must be an https:// URL"),
        (url_image("http://example.com/a.png"), "url", "must be an https:// URL"),
        (url_image("https:///nohost.png"), "url", "must be an https:// URL"),
        (url_image("file:///etc/passwd"), "url", "must be an https:// URL"),
        (
            {"type": "document", "source": {"type": "text", "media_type": "text/html", "data": "<b>x</b>"}},
            "media_type",
            "must be 'text/plain'",
        ),
    ],
)
def test_media_the_provider_refuses_is_a_400_naming_the_field(api, session, block, field, problem):
    before = snapshot(session)
    response = api.post(url(session, "messages/"), {"role": "user", "content": [block]}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"content[0].source.{field}: {problem}"), response.json()
    assert snapshot(session) == before


def test_media_as_the_provider_takes_it_is_stored(api, session):
    content = [
        image("image/png", b64(png(8000, 8000))),
        image("image/jpeg", b64(jpeg())),
        image("image/gif", b64(gif())),
        image("image/webp", b64(webp())),
        image("image/png", "iVBORw0KGgo="),  # the signature alone: no size to check
        document(b64(PDF)),
        url_image("https://example.com/a.png"),
        {"type": "document", "source": {"type": "url", "url": "HTTPS://example.com/spec.pdf"}},
        {"type": "text", "text": "What do these show?"},
    ]
    response = api.post(url(session, "messages/"), {"role": "user", "content": content}, format="json")
    assert response.status_code == 201, response.json()


def test_a_tool_results_inner_image_is_checked_too(api, session):
    api.post(
        url(session, "messages/"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        format="json",
    )
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [image("image/png", "!!notb64")]}
    response = api.post(url(session, "messages/"), {"role": "user", "content": [result]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("content[0].content[0].source.data: is not valid base64")


def test_sizes_are_read_from_each_formats_header():
    assert validation.image_size(png(640, 480), "image/png") == (640, 480)
    assert validation.image_size(gif(640, 480), "image/gif") == (640, 480)
    assert validation.image_size(jpeg(640, 480), "image/jpeg") == (640, 480)
    assert validation.image_size(webp(640, 480), "image/webp") == (640, 480)
    assert validation.image_size(b"\x89PNG\r\n\x1a\n", "image/png") is None
