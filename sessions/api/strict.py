"""Serializers that refuse unknown fields: a typo must be a 400 naming it, never silently dropped."""

from __future__ import annotations

from typing import Any, ClassVar

from django.http import QueryDict
from rest_framework import serializers

from sessions.validation import safe_text


class RejectUnknownFieldsMixin:
    """Mix in before `serializers.Serializer`.

    `read_only_fields` (field → what to do instead) are the output-only fields of the same
    resource. They may be sent back unchanged, so that a GET body can be PATCHed back as is
    (pass the current object as GET renders it as `context["current"]`); a read-only field
    with another value (or any, on create) is a 400 naming it and what to use instead,
    because ignoring it would look like it took effect.
    """

    read_only_fields: ClassVar[dict[str, str]] = {}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
        errors: dict[str, list[str]] = {}
        unknown = sorted(set(data) - set(self.fields) - set(self.read_only_fields))
        if unknown:
            allowed = ", ".join(sorted(self.fields))
            errors.update({safe_text(str(key)): [f"unknown field; allowed: {allowed}"] for key in unknown})
        current: dict[str, Any] | None = self.context.get("current")
        for key in sorted(set(data) & set(self.read_only_fields)):
            if current is None or key not in current or current[key] != data[key]:
                errors[key] = [f"read-only; {self.read_only_fields[key]}"]
        # Form data (a multipart upload) is text by nature; JSON types apply to JSON bodies.
        typed = () if isinstance(data, QueryDict) else sorted(set(data) & set(self.fields))
        for key in typed:
            problem = json_type_problem(self.fields[key], data[key])
            if problem and key not in errors:
                errors[key] = [problem]
        if errors:
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def json_type_problem(field: serializers.Field, value: Any) -> str | None:
    """The JSON type the schema documents for this field, enforced: DRF would coerce `0` into the
    string "0", `0`/`"true"` into booleans and `"12"` into numbers, accepting bodies the OpenAPI
    schema calls invalid (and storing a system prompt "0"). Answers in DRF's own words."""
    if value is None:
        return None  # allow_null is the field's own check
    if isinstance(field, serializers.BooleanField):
        ok = isinstance(value, bool)
    elif isinstance(field, serializers.ChoiceField | serializers.CharField):
        ok = isinstance(value, str)
    elif isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.FloatField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(field, serializers.DictField):
        ok = isinstance(value, dict)
    elif isinstance(field, serializers.ListField):
        ok = isinstance(value, list)
    else:
        return None
    if ok:
        return None
    if isinstance(field, serializers.ChoiceField):
        return "must be a string"
    return str(field.error_messages.get("invalid") or field.error_messages.get("not_a_dict") or "wrong type")


class ListedChoiceField(serializers.ChoiceField):
    """A choice whose error lists the choices: '"magic" is not a valid choice; choose one of: a, b'."""

    default_error_messages = {"invalid_choice": '"{input}" is not a valid choice; choose one of: {choices}.'}

    def to_internal_value(self, data):
        if data == "" and self.allow_blank:
            return ""
        try:
            return self.choice_strings_to_values[str(data)]
        except KeyError:
            self.fail("invalid_choice", input=safe_text(str(data))[:100], choices=", ".join(map(str, self.choices)))
