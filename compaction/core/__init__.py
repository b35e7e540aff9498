"""Pure-Python compaction logic: no Django, ORM, clock or network imports.

Dataclasses in, dataclasses out, so every piece is testable with plain data.
"""
