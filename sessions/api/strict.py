"""Serializers that refuse unknown fields: a typo must be a 400 naming it, never silently dropped."""

from __future__ import annotations

from typing import ClassVar

from rest_framework import serializers

from sessions.validation import safe_text


class RejectUnknownFieldsMixin:
    """Mix in before `serializers.Serializer`. `tolerated_fields` are accepted and ignored
    (e.g. read-only fields, so that a GET body can be sent back as is)."""

    tolerated_fields: ClassVar[frozenset[str]] = frozenset()

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
        unknown = sorted(set(data) - set(self.fields) - set(self.tolerated_fields))
        if unknown:
            allowed = ", ".join(sorted(self.fields))
            raise serializers.ValidationError(
                {safe_text(str(key)): [f"unknown field; allowed: {allowed}"] for key in unknown}
            )
        return super().to_internal_value(data)
