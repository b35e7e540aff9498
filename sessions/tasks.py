"""Celery tasks of the sessions app: one service call each."""

from __future__ import annotations

from celery import shared_task

from sessions import trash


@shared_task(name="sessions.tasks.purge_trash", ignore_result=True, soft_time_limit=600, time_limit=660)
def purge_trash(**kwargs) -> None:
    trash.sessions_purge()
    trash.idempotency_keys_purge()
