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
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "head_digest"], name="gateway_conv_owner_head")]

    def __str__(self) -> str:
        return f"{self.session} ({self.message_count} messages)"
