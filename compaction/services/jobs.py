"""Jobs: request (one in flight per session), the auto-compaction decision after an append or
a usage report, run (claim, snapshot, compute, activate), the Celery task's body and the sweeper.

Life of a job:
    compaction_request → QUEUED row + compaction_queued event, Celery task enqueued on commit
    compaction_run     → claim (conditional UPDATE queued→running), snapshot the context,
                         prune or cut + summarize, then activate in one transaction, only if
                         the compaction the snapshot was based on is still the active one.
A job is never left RUNNING: failures are recorded, transient DB errors hand the job back to
the queue, and the sweeper (compaction_sweep_stuck) re-queues jobs whose worker died.

"Append, then maybe compact" lives here, above the message store: messages_append_then_compact
and usage_report_then_compact call sessions.services and take the auto-compaction decision
after its commit, outside the session's row lock (the one-in-flight constraint keeps two
racing decisions to one job).
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from compaction import lease
from compaction.core import policy
from compaction.core.summarizers.anthropic import llm_time_budget
from compaction.models import Compaction, Event, EventKind, Reason, ReviewStatus, Status
from compaction.selectors import compaction_in_flight
from ops.models import WorkerHeartbeat
from sessions import services as ss
from sessions.models import Message, Session

from . import activation, planning
from .common import (
    STRATEGIES,
    CompactionError,
    describe,
    enqueue,
    event_record,
    metrics_record,
    requeue_queued_after,
)

logger = logging.getLogger("compaction.services")

# A replay appends (and so touches last_activity_at) at least once per compaction it runs; a
# session marked replaying with no activity for longer than a compaction may take is a replay
# that died (killed process): its flag is dropped and the worker takes the job.
REPLAY_STALE_GRACE_SECONDS = 60


# --- request / auto trigger --------------------------------------------------------------


def compaction_request(
    *,
    session: Session,
    reason: str,
    requested_by=None,
    strategy: str = "auto",
    instructions: str = "",
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    meter: dict[str, int] | None = None,
) -> Compaction:
    """Queue a compaction, or return the one already in flight for this session.

    `meter`: the figure that decided an automatic compaction, recorded on the queued event (the
    job's tokens_before is the meter when the worker takes its snapshot, later).

    The returned row carries `created` (True when this call queued it). The database allows
    one QUEUED/RUNNING compaction per session; two racing requests both see none, one insert
    wins, the other gets an IntegrityError and returns the winner.
    """
    if strategy not in STRATEGIES:
        raise CompactionError(
            f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}", field="strategy", code="invalid"
        )
    params: dict[str, Any] = {"overrides": dict(overrides or {}), "force": bool(force)}
    if requested_by is not None:
        params["requested_by"] = requested_by.get_username()
    for _ in range(5):
        existing = compaction_in_flight(session_id=session.pk)
        if existing is not None:
            existing.created = False
            return existing
        active_id = Session.objects.filter(pk=session.pk).values_list("active_compaction_id", flat=True).first()
        try:
            with transaction.atomic():
                job = Compaction.objects.create(
                    session_id=session.pk,
                    reason=reason,
                    status=Status.QUEUED,
                    based_on_id=active_id,
                    strategy_requested=strategy,
                    instructions=instructions or "",
                    params=params,
                )
                event_record(
                    session.pk,
                    EventKind.COMPACTION_QUEUED,
                    f"Compaction queued ({job.get_reason_display().lower()})",
                    compaction=job,
                    data={"reason": reason, "strategy": strategy, **(meter or {})},
                )
                transaction.on_commit(partial(enqueue, job.pk))
        except IntegrityError:
            # Lost the race for the one in-flight slot; loop to return the winner.
            continue
        job.created = True
        return job
    raise CompactionError("could not queue a compaction: the in-flight job kept changing; retry")


def _loop_guard(*, session: Session, tokens: int, trigger: int) -> tuple[str, Compaction] | None:
    """(why auto-compaction must not fire now, the compaction that caused it), or None
    (compaction.core.policy.loop_guard decides; this reads what it weighs)."""
    last = (
        Compaction.objects.filter(session=session, status__in=[Status.SUCCEEDED, Status.SKIPPED, Status.FAILED])
        .order_by("-created_at")
        .first()
    )
    if last is None:
        return None
    facts = policy.LastCompaction(
        status=last.status,
        tokens_before=last.tokens_before,
        tokens_after=last.tokens_after,
        snapshot_seq=last.snapshot_seq,
    )
    if not policy.loop_guard_watches(facts, trigger=trigger):
        return None  # it brought usage under the trigger: no need to count what came since
    since = Message.objects.filter(session=session, seq__gt=last.snapshot_seq)
    new_tokens = since.aggregate(total=Sum("token_count"))["total"] or 0
    message = policy.loop_guard(facts, tokens=tokens, trigger=trigger, new_tokens=new_tokens)
    return (message, last) if message is not None else None


def compaction_maybe_auto(*, session: Session, usage: ss.Usage | None = None) -> Compaction | None:
    """After an append or a usage report: queue an auto compaction when usage crossed the trigger.

    `usage`: session_usage(session) when the caller has it already (the append's result).
    Returns the queued (or already in-flight) job, or None. Costs no query under the trigger.
    """
    # session_usage resolves the session's config too: its auto_compact and trigger_tokens
    # are the config's, so the config is not resolved a second time on every append.
    if usage is None:
        usage = ss.session_usage(session)
    if not usage.auto_compact:
        return None
    # A report made on the context from before the active compaction never reaches this
    # figure: activation drops the report, and sessions.services.usage_report does not record a
    # later-arriving one for a call made before the snapshot.
    tokens = usage.tokens
    trigger = usage.trigger_tokens
    if tokens <= trigger:
        return None
    in_flight = compaction_in_flight(session_id=session.pk)
    if in_flight is not None:
        return in_flight
    guard = _loop_guard(session=session, tokens=tokens, trigger=trigger)
    if guard is not None:
        message, last = guard
        # Record why once per compaction that caused the hold, not on every append.
        if not Event.objects.filter(compaction=last, data__loop_guard=True).exists():
            event_record(
                session.pk,
                EventKind.COMPACTION_SKIPPED,
                message,
                compaction=last,
                data={"loop_guard": True, "tokens": tokens, "trigger_tokens": trigger},
            )
        logger.info("Auto-compaction of session %s held back by the loop guard", session.pk)
        return None
    return compaction_request(
        session=session, reason=Reason.THRESHOLD, meter={"tokens": tokens, "trigger_tokens": trigger}
    )


def compaction_maybe_auto_safely(*, session: Session, usage: ss.Usage | None = None) -> Compaction | None:
    """compaction_maybe_auto for work that already committed (an append, a usage report): its
    failure (the database restarting, a bug) is logged and the write's answer stands, so a
    client never retries, and duplicates, what was stored. The next write decides again.

    Inside a caller's transaction (an idempotent request) it runs in a savepoint, so a failed
    query does not poison the write that is about to commit."""
    try:
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            return compaction_maybe_auto(session=session, usage=usage)
    except Exception:  # noqa: BLE001 - never turn a stored write into an error
        logger.exception("Auto-compaction check for session %s failed after its write", session.pk)
        return None


def _fail_claimed(job_id, *, attempt: int, error: str, started: float) -> None:
    now = timezone.now()
    with transaction.atomic():
        updated = Compaction.objects.filter(pk=job_id, status=Status.RUNNING, attempts=attempt).update(
            status=Status.FAILED,
            review_status=ReviewStatus.NOT_APPLICABLE,
            error=error[:5000],
            finished_at=now,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        if updated == 1:
            job = Compaction.objects.get(pk=job_id)
            event_record(
                job.session_id, EventKind.COMPACTION_FAILED, describe(job), compaction=job, data={"attempt": attempt}
            )
            metrics_record(job)


def messages_append_then_compact(
    *, session: Session | Any, messages: list[dict[str, Any]], single: bool = False, now=None, owner=None
) -> ss.AppendResult:
    """Append (sessions.services.messages_append, same arguments), then, after its commit and
    outside the session's row lock, queue an auto compaction if usage crossed the trigger."""
    result = ss.messages_append(session=session, messages=messages, single=single, now=now, owner=owner)
    result.compaction = compaction_maybe_auto_safely(session=result.session, usage=result.usage)
    return result


def usage_report_then_compact(*, session: Session, **report: Any) -> ss.UsageReportResult:
    """Record the provider's usage (sessions.services.usage_report, same arguments), then decide
    on auto-compaction after its commit: a truncated reply or a calibrated (usually higher)
    figure can cross the trigger."""
    result = ss.usage_report(session=session, **report)
    result.compaction = compaction_maybe_auto_safely(session=result.session, usage=result.usage)
    return result


# --- run ---------------------------------------------------------------------------------


def _worker_run() -> planning.SummaryRun:
    # The LLM call must end within the task's soft time limit, retries included.
    timeout = llm_time_budget(configured=settings.ANTHROPIC_TIMEOUT, soft_limit=settings.COMPACTION_SOFT_TIME_LIMIT)
    return planning.SummaryRun(llm_timeout=timeout, max_retries=int(settings.ANTHROPIC_MAX_RETRIES))


class HandBackPending(Exception):
    """The job's hand-back failed (the database still down): the task's retry hands it back
    first (`compaction_run(hand_back=attempt)`), as soon as the database answers, rather than
    leaving it RUNNING until its lease lapses and the sweeper finds it."""

    def __init__(self, compaction_id, attempt: int) -> None:
        super().__init__(f"compaction {compaction_id}: attempt {attempt} not handed back yet")
        self.compaction_id = compaction_id
        self.attempt = attempt


# How long a worker keeps trying to hand a job back before it leaves that to the task's retry:
# a database restart takes a few seconds.
HAND_BACK_PATIENCE_SECONDS = 10.0
HAND_BACK_PAUSE_SECONDS = 0.5


def job_hand_back(job_id, *, attempt: int, patience: float = 0.0) -> bool:
    """Put a RUNNING job's `attempt` back in the queue (a conditional UPDATE: never another
    attempt's claim). Tried again every HAND_BACK_PAUSE_SECONDS for `patience` seconds while the
    database is unavailable, on a fresh connection each time. True once handed back (or no
    longer this attempt's to hand back); False when the database never answered."""
    deadline = time.monotonic() + patience
    while True:
        try:
            if not connection.in_atomic_block:
                connection.close_if_unusable_or_obsolete()  # a dead connection is dropped, the next one fresh
            # The task's retry re-sends the message: that counts as an enqueue.
            handed = Compaction.objects.filter(pk=job_id, status=Status.RUNNING, attempts=attempt).update(
                status=Status.QUEUED, started_at=None, deadline_at=None, enqueued_at=timezone.now()
            )
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + HAND_BACK_PAUSE_SECONDS > deadline:
                logger.warning(
                    "Compaction %s: could not hand the job back to the queue yet (%s); its retry will",
                    job_id,
                    type(exc).__name__,
                )
                return False
            time.sleep(HAND_BACK_PAUSE_SECONDS)
            continue
        if handed:
            logger.info("Compaction %s: attempt %d handed back to the queue", job_id, attempt)
        return True


def _apply_once_the_database_answers(job: Compaction, outcome, *, attempt: int, started: float) -> None:
    """activation.outcome_apply, tried again on a fresh connection while the database is briefly
    unavailable (a restart between the summary and its write): the summary already made (an LLM
    call, paid for) is written rather than thrown away with a hand-back. Safe to repeat: the write
    is one transaction, conditional on this attempt's claim (a write that did commit before the
    error makes the next try a no-op). Inside a caller's transaction nothing can be retried."""
    deadline = time.monotonic() + HAND_BACK_PATIENCE_SECONDS
    while True:
        try:
            activation.outcome_apply(job, outcome, attempt=attempt, started=started)
            return
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or time.monotonic() + HAND_BACK_PAUSE_SECONDS > deadline:
                raise
            logger.info("Compaction %s: the database is unavailable; writing its outcome again shortly", job.pk)
            time.sleep(HAND_BACK_PAUSE_SECONDS)
            connection.close_if_unusable_or_obsolete()


def compaction_run(*, compaction_id, now=None, hand_back: int | None = None, worker: str = "") -> Compaction | None:
    """Run one queued compaction (the Celery task's body). A re-delivery is a no-op (None).

    `hand_back`: an attempt of this job that an earlier delivery could not hand back (the
    database was down): handed back first, then claimed as usual. `worker`: the Celery worker's
    name, recorded with the claim (compaction_recover_orphans)."""
    if hand_back is not None:
        job_hand_back(compaction_id, attempt=hand_back)
    now = now or timezone.now()
    claimed = Compaction.objects.filter(pk=compaction_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        attempts=F("attempts") + 1,
        worker=worker[:255],
        started_at=now,
        first_started_at=Coalesce(F("first_started_at"), Value(now)),
        deadline_at=now + timedelta(seconds=lease.lease_seconds()),
        error="",
    )
    if claimed != 1:
        logger.info("Compaction %s not claimed: already taken or finished", compaction_id)
        return None
    job = Compaction.objects.get(pk=compaction_id)
    attempt = job.attempts
    started = time.monotonic()
    event_record(
        job.session_id,
        EventKind.COMPACTION_STARTED,
        f"Compaction started ({job.get_reason_display().lower()}" + (f", attempt {attempt})" if attempt > 1 else ")"),
        compaction=job,
        data={"attempt": attempt},
    )
    try:
        params = job.params or {}
        snap = planning.snapshot_take(job.session_id, params.get("overrides"))
        if (snap.based_on.pk if snap.based_on else None) != job.based_on_id:
            # The active compaction changed between request and run (undo, overflow): the
            # snapshot is what this job builds on, so that is its base.
            Compaction.objects.filter(pk=job.pk).update(based_on=snap.based_on)
        outcome = planning.outcome_compute(
            snap,
            reason=job.reason,
            strategy=job.strategy_requested,
            instructions=job.instructions,
            force=bool(params.get("force")),
            run=_worker_run(),
        )
        _apply_once_the_database_answers(job, outcome, attempt=attempt, started=started)
    except (OperationalError, InterfaceError) as exc:
        # Transient database trouble (a restart, a dropped connection): hand the job back so the
        # task's retry can claim it again. The database is likely still down: the hand-back is
        # tried again until it answers, and past that patience the retry carries it.
        if not job_hand_back(job.pk, attempt=attempt, patience=HAND_BACK_PATIENCE_SECONDS):
            raise HandBackPending(job.pk, attempt) from exc
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is recorded on the row
        logger.exception("Compaction %s failed", job.pk)
        _fail_claimed(job.pk, attempt=attempt, error=f"{type(exc).__name__}: {exc}", started=started)
    return Compaction.objects.get(pk=job.pk)


def compaction_run_unless_replaying(
    *, compaction_id, now=None, hand_back: int | None = None, worker: str = ""
) -> Compaction | None:
    """The Celery task's body: run the job, unless its session is being replayed — the replay
    (compaction.importing, import_transcript --replay) runs that session's jobs itself, and a
    worker claiming one would race it."""
    if hand_back is not None:
        job_hand_back(compaction_id, attempt=hand_back)
    row = (
        Compaction.objects.filter(pk=compaction_id)
        .values("session_id", "session__replaying", "session__last_activity_at")
        .first()
    )
    if row is not None and row["session__replaying"]:
        now = now or timezone.now()
        stale_before = now - timedelta(seconds=settings.COMPACTION_HARD_TIME_LIMIT + REPLAY_STALE_GRACE_SECONDS)
        if row["session__last_activity_at"] >= stale_before:
            logger.info("Compaction %s left to the replay of its session", compaction_id)
            return None
        released = Session.objects.filter(
            pk=row["session_id"], replaying=True, last_activity_at__lt=stale_before
        ).update(replaying=False)
        if released:
            logger.warning("Session %s: replay silent since %s, flag dropped", row["session_id"], stale_before)
    return compaction_run(compaction_id=compaction_id, now=now, worker=worker)


def _lost_why(job: Compaction, now) -> str:
    if job.deadline_at is not None and job.deadline_at < now:
        return f"passed its deadline {job.deadline_at:%H:%M:%S} (worker lost)"
    return f"its worker {job.worker} restarted"


def _requeue_lost(job: Compaction, *, now, why: str) -> str | None:
    """A RUNNING attempt whose worker is gone: back to QUEUED (the caller sends its message after
    commit), or FAILED after COMPACTOR_MAX_ATTEMPTS. Conditional on the attempt read, so of two
    recoveries racing one acts. The new status, or None when the attempt was no longer running."""
    with transaction.atomic():
        still_stuck = Compaction.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)
        if job.attempts >= settings.COMPACTION_MAX_ATTEMPTS:
            error = f"worker lost or timed out {job.attempts} times (last: {why}); gave up"
            if (
                still_stuck.update(
                    status=Status.FAILED, review_status=ReviewStatus.NOT_APPLICABLE, error=error, finished_at=now
                )
                != 1
            ):
                return None
            job.refresh_from_db()
            event_record(
                job.session_id,
                EventKind.COMPACTION_FAILED,
                describe(job),
                compaction=job,
                data={"attempt": job.attempts, "swept": True},
            )
            metrics_record(job)
            return Status.FAILED
        if still_stuck.update(status=Status.QUEUED, started_at=None, deadline_at=None, enqueued_at=now) != 1:
            return None
        event_record(
            job.session_id,
            EventKind.COMPACTION_QUEUED,
            f"Compaction re-queued: attempt {job.attempts} {why}",
            compaction=job,
            data={"attempt": job.attempts, "swept": True},
        )
        return Status.QUEUED


def compaction_recover_orphans(*, worker: str, since, now=None) -> dict[str, int]:
    """A Celery worker that just started (compaction.tasks, on worker_ready): what a previous
    process of the same name left is taken up at once, not after a lease and a sweep.

    - RUNNING attempts it claimed before `since` (when this process started) died with that
      process (a SIGKILL, an OOM kill, a crash): re-queued and sent again.
    - QUEUED jobs last sent before `since` are sent again: the dead process may have reserved
      their messages, which the broker gives back only after its visibility timeout. A second
      delivery of a message still queued is a no-op (the claim is a conditional UPDATE).
    Worker names are unique among live workers (Celery's rule: name@host), so a claim under
    this name older than this process is no live worker's."""
    now = now or timezone.now()
    requeued: list = []
    failed = 0
    for job in Compaction.objects.filter(status=Status.RUNNING, worker=worker, started_at__lt=since):
        outcome = _requeue_lost(job, now=now, why=f"died with its worker {worker} (restarted)")
        if outcome == Status.QUEUED:
            requeued.append(job.pk)
        elif outcome == Status.FAILED:
            failed += 1
    waiting = list(
        Compaction.objects.filter(status=Status.QUEUED)
        .filter(Q(enqueued_at__lt=since) | Q(enqueued_at__isnull=True, created_at__lt=since))
        .exclude(pk__in=requeued)
        .values_list("pk", flat=True)
    )
    for job_id in requeued:
        enqueue(job_id, mark=False, resumed=True)  # _requeue_lost recorded enqueued_at
    for job_id in waiting:
        enqueue(job_id)
    if requeued or failed or waiting:
        logger.info(
            "Worker %s started: %d interrupted jobs re-queued, %d failed, %d queued jobs sent again",
            worker,
            len(requeued),
            failed,
            len(waiting),
        )
    return {"requeued": len(requeued), "failed": failed, "resent": len(waiting)}


def compaction_sweep_stuck(*, now=None) -> dict[str, int]:
    """Re-queue RUNNING jobs past their deadline or whose worker restarted since their claim
    (their worker died), fail them after N attempts,
    and re-enqueue QUEUED jobs whose message may have been lost: those last handed to the broker
    (`enqueued_at`, else `created_at`) more than COMPACTOR_REQUEUE_QUEUED_SECONDS ago. Each re-send records
    `enqueued_at`, so a job is re-sent at most once per stale period however often this runs."""
    now = now or timezone.now()
    # Past its deadline (its worker stopped renewing), or claimed by a worker that has restarted
    # since (its heartbeat started after the claim): that attempt died with the worker.
    restarted = WorkerHeartbeat.objects.filter(worker=OuterRef("worker"), started_at__gt=OuterRef("started_at"))
    lost_jobs = Compaction.objects.filter(status=Status.RUNNING).filter(
        Q(deadline_at__lt=now) | (~Q(worker="") & Exists(restarted))
    )
    requeued: list = []
    failed = 0
    for job in lost_jobs:
        outcome = _requeue_lost(job, now=now, why=_lost_why(job, now))
        if outcome == Status.QUEUED:
            requeued.append(job.pk)
        elif outcome == Status.FAILED:
            failed += 1
    stale_before = now - requeue_queued_after()
    candidates = (
        Compaction.objects.filter(status=Status.QUEUED)
        .filter(Q(enqueued_at__lt=stale_before) | Q(enqueued_at__isnull=True, created_at__lt=stale_before))
        .exclude(pk__in=requeued)
        .values_list("pk", "enqueued_at")
    )
    lost: list = []
    for job_id, enqueued_at in candidates:
        # Conditional on the value just read: of two overlapping sweeps, one re-sends.
        if (
            Compaction.objects.filter(pk=job_id, status=Status.QUEUED, enqueued_at=enqueued_at).update(enqueued_at=now)
            == 1
        ):
            lost.append(job_id)
    for job_id in requeued:
        transaction.on_commit(partial(enqueue, job_id, mark=False, resumed=True))
    for job_id in lost:
        transaction.on_commit(partial(enqueue, job_id, mark=False))
    if requeued or failed or lost:
        logger.info("Sweeper: %d re-queued, %d failed, %d re-enqueued", len(requeued), failed, len(lost))
    return {"requeued": len(requeued), "failed": failed, "reenqueued": len(lost)}
