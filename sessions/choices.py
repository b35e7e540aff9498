"""Django's TextChoices as mypy should see them: each member a `str` of its own enum.

Django ships no types and no stubs are installed (pyproject.toml [tool.mypy]), so to mypy a
member such as `EventKind.OVERFLOW = "overflow", "Provider overflow"` is the tuple it is written
as, and passing it where a `str` is expected is an error. Under type checking the choice classes
derive from this declaration instead (what django-stubs declares: a `str` enum (StrEnum) with a label and the
class-level lists); at run time they derive from Django's own class, which is all there is here.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:

    class TextChoices(enum.StrEnum):
        choices: ClassVar[list[tuple[str, str]]]
        values: ClassVar[list[str]]
        labels: ClassVar[list[str]]

        @property
        def label(self) -> str: ...

else:
    from django.db.models import TextChoices

__all__ = ["TextChoices"]
