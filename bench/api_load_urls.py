"""URLconf for bench/api_load.py only: the project's URLs plus a one-row DRF floor endpoint.

The floor is what any endpoint of this service costs at the least: the same middleware, DRF
request parsing, the same API key authentication, one INSERT of the request body into a
table the bench creates (bench_floor), a small JSON answer. Never part of the production URLs.
"""

from __future__ import annotations

import json

from django.db import connection
from django.urls import path
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from project.urls import handler404, handler500  # noqa: F401
from project.urls import urlpatterns as project_urlpatterns


class FloorView(APIView):
    permission_classes = [IsAuthenticated]

    def post(self, request):
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO bench_floor (body, created_at) VALUES (%s, now()) RETURNING id",
                [json.dumps(request.data)],
            )
            (row_id,) = cursor.fetchone()
        return Response({"id": row_id}, status=201)


urlpatterns = [path("bench/floor/", FloorView.as_view()), *project_urlpatterns]
