"""Django's CommonMiddleware, except for a request whose path lacks the trailing slash its URL
needs and whose method carries a body (POST, PUT, PATCH, DELETE): Django answers it with a 301
the client follows as a GET (the body lost: `POST /api/v1/sessions` would list sessions), and
under DEBUG (`make run`) with a RuntimeError, a 500. Here it is a 308 to the slashed path: the
client repeats the same method with the same body (RFC 9110 §15.4.9)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase, HttpResponsePermanentRedirect
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.utils.http import escape_leading_slashes

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class PermanentRedirectKeepingMethod(HttpResponsePermanentRedirect):
    status_code = 308


class CommonMiddleware(DjangoCommonMiddleware):
    def get_full_path_with_slash(self, request: HttpRequest) -> str:
        # Django's own, without the DEBUG-only RuntimeError for a method with a body: that
        # request gets the 308 below instead.
        return escape_leading_slashes(request.get_full_path(force_append_slash=True))

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if (
            response.status_code == 404
            and request.method not in SAFE_METHODS
            and self.should_redirect_with_slash(request)
        ):
            return PermanentRedirectKeepingMethod(self.get_full_path_with_slash(request))
        return super().process_response(request, response)
