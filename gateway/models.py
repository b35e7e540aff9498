from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions.models import Session


class Conversation(models.Model):
    """The client's side of a session used through the gateway: where its resent history ends.

    `head_digest` is gateway.history's chain digest of the client's messages up to the newest one
    this session holds (the last request plus the reply sent back), `message_count` how many
    messages that is. A request continues the session when the digest of its first
    `message_count` messages is `head_digest`: one indexed lookup per request.
    """

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="gateway_conversation")
    # Denormalised from the session so the lookup by digest needs no join.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    head_digest = models.CharField(max_length=64)
    message_count = models.PositiveIntegerField(default=0)
    # The client's own name for the conversation when it sends one (Claude Code's
    # metadata.user_id "…_session_<uuid>", Codex's prompt_cache_key): every call carrying it
    # is looked up by it first. Subagents and rewound histories of one client conversation
    # share it, each in its own session, so it is not unique.
    client_session = models.CharField(max_length=100, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "head_digest"], name="gateway_conv_owner_head"),
            models.Index(
                fields=["owner", "client_session"],
                name="gateway_conv_owner_client",
                condition=~models.Q(client_session=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session} ({self.message_count} messages)"


class MessageExtra(models.Model):
    """What an OpenAI-format message carries beyond the blocks Compactor stores (a developer
    role, `name`, `refusal`, image `detail`, tool-call arguments as sent, a string content), so a
    stored message goes back upstream exactly as the client wrote it. Keyed by the message's
    fingerprint digest (gateway.extras.extra_key), not its seq: it is written before the
    append assigns one, and a pruned copy keeps its fingerprint."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64)
    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="gateway_extra_unique_key")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.key[:8]}"
