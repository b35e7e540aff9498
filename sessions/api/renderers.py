"""Response renderers of the API."""

from __future__ import annotations

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_DRF_ENCODER = JSONEncoder()


def _drf_default(value):
    """What DRF's encoder writes for what orjson leaves to us: datetimes (DRF's ISO form, "Z"
    for UTC), dates and times, decimals, lazy strings, ..."""
    return _DRF_ENCODER.default(value)


class TranscriptJSONRenderer(JSONRenderer):
    """UTF-8 JSON, as DRF's JSONRenderer writes it, encoded by orjson: for the responses that
    carry transcripts (the context, the message list, the append's answer), where the standard
    library's encoder was most of the request's CPU (1.3 ms of a 150-message context of 380 KB;
    orjson takes under 0.1 ms). Datetimes and anything else orjson does not write the way DRF
    does go through DRF's encoder; what orjson cannot encode at all (an integer beyond 64 bits,
    which JSON from a client may hold; a non-string key) and indented output fall back to DRF's
    own rendering, so every body the stock renderer accepts is rendered. One difference: DRF
    also escapes U+2028/U+2029 (for old JavaScript parsers); they are left as they are here,
    which JSON allows (escaping them cost more than encoding the whole body)."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if self.get_indent(accepted_media_type, renderer_context or {}) is None:
            try:
                return orjson.dumps(data, default=_drf_default, option=orjson.OPT_PASSTHROUGH_DATETIME)
            except TypeError:  # orjson.JSONEncodeError is one
                pass
        return super().render(data, accepted_media_type, renderer_context)
