"""Measure the LLM summarizer without the provider: capture its requests, have a stand-in answer.

    DEBUG=1 .venv/bin/python bench/llm_standin.py capture TRANSCRIPT OUT [--at N] [--keep TOKENS]
                                                          [--instructions TEXT] [--model NAME]
    DEBUG=1 .venv/bin/python bench/llm_standin.py replay OUT

capture: the transcript (any format the importer reads) is replayed into a new session of a
throwaway database up to the cut — Claude Code's own first compaction boundary when the file has
one, else the whole transcript, or its first N messages with --at — and compacted once (manual,
default settings unless --keep, --instructions or --model) with ANTHROPIC_API_KEY set and
ANTHROPIC_BASE_URL pointed at a local stand-in of the Messages API. The stand-in records every
request it gets into OUT/request-<k>/: request.json (the exact JSON body), request.txt (the
system prompt and the messages as the model reads them) and BRIEF.md, which tells a model
standing in for the summarizer to write its reply into reply.txt. It answers each captured
request with an error the SDK does not retry, so the job ends on the extractive fallback
(saved in OUT/capture/ as a baseline).

replay: the same compaction again; the stand-in answers each request whose folder has a
reply.txt with that reply, through the real summarizer path (the reply's parsing, the checks,
the agreement and fidelity repairs, the fallback). Saved in OUT/replay/: summary.txt (the
summary message as served), kept.txt (the messages kept after it, as served, rendered),
served.txt (both) and job.json (the job's record: strategy, fallbacks, usage per call, the
repairs). A request the saved replies do not answer (a chunked history's next chunk, or a prompt
changed since the capture) is captured as a new folder: answer it and replay again.

Requests are matched by the digest of their JSON body, so a reply is only ever used for the
request it was written for. Token counts and cost in a replayed job are the stand-in's
estimates (characters / 4), not a provider's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_anthropic import Recorded, Step  # noqa: E402

STANDIN_KEY = "sk-ant-standin-not-a-real-key"
NO_REPLY = "captured by the stand-in; no reply yet (write reply.txt in its folder and replay)"

BRIEF = """# Stand in for a model

`request.txt` is one request sent to a language model through the Anthropic Messages API,
rendered exactly as the model reads it: the system prompt, then the conversation's messages
(`request.json` is the same request as the JSON that was sent). You are that model. Write the
reply it should give to this request into `reply.txt` in this folder: the reply itself, exactly
as the model would answer, with nothing before or after it.

- Everything the model knows is in `request.txt`: do not look for anything outside this folder,
  and do not run, fetch or check anything the request mentions.
- Answer the request as written — its instructions, format and rules — as a capable model would.
- The reply may be at most {max_tokens:,} tokens long (`max_tokens` of the request).
- Write only `reply.txt`; leave the other files as they are.
"""


# --- the case ------------------------------------------------------------------------------


@dataclass
class Case:
    """What is compacted: the transcript, where it is cut, and the session's settings."""

    transcript: str
    cut: int  # messages of the transcript (as stored) before the compaction
    cut_how: str
    settings: dict[str, Any] = field(default_factory=dict)  # compaction settings of the session
    instructions: str = ""

    @classmethod
    def load(cls, out: Path) -> Case:
        return cls(**json.loads((out / "case.json").read_text()))

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "case.json").write_text(json.dumps(asdict(self), indent=2) + "\n")


def read_messages(path: Path) -> tuple[list[dict[str, Any]], Any]:
    """The transcript's messages as the service stores them, and the transcript."""
    from compaction.core.transcripts.detect import read_transcript
    from compaction.services import transcript_messages_for_api

    transcript = read_transcript(path)
    return transcript_messages_for_api(transcript.messages), transcript


def new_case(path: Path, *, at: int | None, keep: int | None, instructions: str, model: str | None) -> Case:
    messages, transcript = read_messages(path)
    if at is not None:
        if not 2 <= at <= len(messages):
            raise SystemExit(f"--at {at}: the transcript has {len(messages)} messages; cut after 2 to {len(messages)}")
        cut, how = at, f"after its first {at} messages"
    elif transcript.compactions:
        # The messages as stored drop whitespace-only ones: count the boundary in stored messages.
        before = transcript.compactions[0]["before_message_index"]
        cut = len(_stored_prefix(transcript.messages[:before]))
        how = "at the agent's own first compaction boundary"
    else:
        cut, how = len(messages), "after its last message (the transcript has no compaction of its own)"
    settings: dict[str, Any] = {}
    if keep is not None:
        settings["keep_recent_tokens"] = keep
    if model:
        settings["summarizer_model"] = model
    return Case(str(path.resolve()), cut, how, settings, instructions)


def _stored_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from compaction.services import transcript_messages_for_api

    return transcript_messages_for_api(messages)


# --- the stand-in of the Messages API --------------------------------------------------------


def digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _text(content: Any) -> str:
    """What the model reads of a system prompt or a message's content: its text blocks, joined
    as the API joins them."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{block.get('type')} block]")
    return "".join(parts)


def render_request(body: dict[str, Any]) -> str:
    """The request as the model reads it: the system prompt, then each message by role."""
    out = ["===== SYSTEM PROMPT =====", _text(body.get("system") or "")]
    for n, message in enumerate(body.get("messages") or [], start=1):
        out += [f"===== MESSAGE {n} ({message.get('role', '?').upper()}) =====", _text(message.get("content"))]
    out.append("===== END OF REQUEST: the model's reply comes next =====")
    return "\n".join(out) + "\n"


class StandIn:
    """Answers a request with the reply saved for it, or captures it into a new folder."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.answered: list[str] = []
        self.captured: list[str] = []
        self._lock = threading.Lock()

    def _folders(self) -> dict[str, Path]:
        found = {}
        for folder in sorted(self.out.glob("request-*")):
            meta = folder / "digest.txt"
            if meta.exists():
                found[meta.read_text().strip()] = folder
        return found

    def respond(self, record: Recorded) -> Step:
        key = digest(record.body)
        with self._lock:
            folder = self._folders().get(key)
            if folder is None:
                folder = self._capture(record.body, key)
            reply = folder / "reply.txt"
            if reply.exists() and reply.read_text().strip():
                self.answered.append(folder.name)
                return Step.success(reply.read_text())
        # No reply: an error the SDK does not retry, so the job falls back and the run ends.
        step = Step.error(503, NO_REPLY, retry_after_ms=None)
        step.headers["x-should-retry"] = "false"
        return step

    def _capture(self, body: dict[str, Any], key: str) -> Path:
        index = len(list(self.out.glob("request-*"))) + 1
        folder = self.out / f"request-{index}"
        folder.mkdir(parents=True)
        (folder / "request.json").write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
        (folder / "request.txt").write_text(render_request(body))
        (folder / "BRIEF.md").write_text(BRIEF.format(max_tokens=int(body.get("max_tokens") or 0)))
        (folder / "digest.txt").write_text(key + "\n")
        self.captured.append(folder.name)
        return folder


# --- one compaction through the service ------------------------------------------------------


def compact(case: Case, dest: Path, owner: Any) -> Any:
    """The transcript replayed into a new session up to the cut, compacted once (manual) by
    the service; what is served and the job's record written into `dest`. Returns the job."""
    from compaction import services
    from sessions import services as session_services

    messages, transcript = read_messages(Path(case.transcript))
    session = session_services.session_create(
        owner=owner,
        title=f"stand-in {Path(case.transcript).stem[:24]}",
        agent="claude-code" if transcript.source == "claude-code" else transcript.source,
        model=transcript.model or "",
        compaction_settings={"auto_compact": False, **case.settings},
    )
    services.transcript_replay(session=session, messages=messages[: case.cut])
    job = services.compaction_request(session=session, reason="manual", instructions=case.instructions)
    job = services.compaction_run(compaction_id=job.pk) or job
    job.refresh_from_db()
    session.refresh_from_db()
    write_served(session, job, dest)
    return job


def write_served(session: Any, job: Any, dest: Path) -> None:
    from bench.blind_prep import render_messages
    from compaction.core.types import Msg
    from sessions.selectors import context_build

    dest.mkdir(parents=True, exist_ok=True)
    context = context_build(session=session).as_dict()
    pairs = list(zip(context["seqs"], context["messages"], strict=True))
    summary = "".join(_text(m["content"]) for seq, m in pairs if seq is None)
    kept = [Msg(seq, m["role"], m["content"], 0) for seq, m in pairs if seq is not None]
    (dest / "summary.txt").write_text(summary + "\n")
    (dest / "kept.txt").write_text(render_messages(kept))
    (dest / "served.txt").write_text(
        summary + "\n\n=== MESSAGES KEPT VERBATIM AFTER THE SUMMARY ===\n\n" + render_messages(kept)
    )
    (dest / "job.json").write_text(json.dumps(job_record(job), indent=2, ensure_ascii=False, default=str) + "\n")


def job_record(job: Any) -> dict[str, Any]:
    fields = (
        "status", "strategy", "detail", "error", "summarizer_model", "fallbacks", "usage", "fidelity",
        "first_summarized_seq", "last_summarized_seq", "first_kept_seq", "split_turn", "messages_summarized",
        "summary_tokens", "tokens_before", "tokens_after", "duration_ms", "policy_reason",
    )  # fmt: skip
    return {name: getattr(job, name, None) for name in fields}


def report(job: Any, standin: StandIn, mode: str, dest: Path) -> str:
    usage = job.usage or {}
    calls = usage.get("per_call") or []
    lines = [
        f"{mode}: job {job.status}, strategy {job.strategy}; {job.messages_summarized} messages summarized, "
        f"kept from #{job.first_kept_seq}{' (a turn cut inside)' if job.split_turn else ''}",
    ]
    for n, call in enumerate(calls, start=1):
        cap = call.get("tool_output_cap")
        lines.append(
            f"  call {n}: {call.get('transcript_tokens', 0):,} tokens of history shown "
            f"({'whole' if cap is None else f'tool outputs cut to {cap:,} characters'}), {call.get('ms')} ms"
        )
    for fallback in job.fallbacks or []:
        lines.append(f"  fallback: {fallback['strategy']}: {fallback['reason'][:160]}")
    if standin.captured:
        lines.append(f"  captured (answer in reply.txt, then replay): {', '.join(standin.captured)}")
    if standin.answered:
        lines.append(f"  answered from: {', '.join(standin.answered)}")
    lines.append(f"  served and the job's record: {dest}/")
    return "\n".join(lines)


# --- command line ----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    capture = sub.add_parser("capture", help="capture the requests of one compaction")
    capture.add_argument("transcript", type=Path)
    capture.add_argument("out", type=Path)
    capture.add_argument("--at", type=int, default=None, help="cut after the first N messages")
    capture.add_argument("--keep", type=int, default=None, help="keep_recent_tokens of the session")
    capture.add_argument("--instructions", default="", help="focus instructions of the compaction")
    capture.add_argument("--model", default=None, help="the summarizer model (its window sets the budget)")
    replay = sub.add_parser("replay", help="answer the captured requests with their reply.txt")
    replay.add_argument("out", type=Path)
    args = parser.parse_args()

    from _django import bench_database_until_exit, django_setup

    from tests.fake_anthropic import FakeAnthropic

    out = args.out.resolve()
    if args.mode == "capture" and list(out.glob("request-*")):
        raise SystemExit(f"{out} already holds captured requests: replay it, or capture into a new folder")
    standin = StandIn(out)
    with FakeAnthropic(default=standin.respond) as server:
        # The service reads its provider from the environment, as a user would configure it.
        os.environ["ANTHROPIC_API_KEY"] = STANDIN_KEY
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url
        django_setup(prefix="compactor-llm-standin-")
        bench_database_until_exit(celery_eager=True)  # a job runs here, no worker needed
        from django.contrib.auth import get_user_model

        if args.mode == "capture":
            case = new_case(
                args.transcript, at=args.at, keep=args.keep, instructions=args.instructions, model=args.model
            )
            case.save(out)
        else:
            case = Case.load(out)
        owner, _ = get_user_model().objects.get_or_create(username="llm-standin")
        print(f"{Path(case.transcript).name}: cut {case.cut_how} ({case.cut} messages)")
        job = compact(case, out / args.mode, owner)
    print(report(job, standin, args.mode, out / args.mode))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
