from __future__ import annotations

from typing import Any

from django import forms

from .queries import SORT_CHOICES, STATUS_CHOICES


class SessionFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search title or agent")
    model = forms.ChoiceField(required=False, label="Model")
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES, label="Status")
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES, label="Sort by")
    single = forms.BooleanField(
        required=False,
        label="Single calls",
        help_text="Lone gateway calls that no conversation continued (kept out of the list otherwise).",
    )

    def __init__(self, *args, models: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [("", "Any model")] + [(m, m) for m in models]

    def filters(self) -> dict[str, Any]:
        if not self.is_valid():
            return {"q": "", "model": "", "status": "", "sort": "activity", "single": False}
        data = self.cleaned_data
        return {
            "q": data["q"].strip(),
            "model": data["model"],
            "status": data["status"],
            "sort": data["sort"] or "activity",
            "single": bool(data["single"]),
        }


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=50, label="Key name", help_text="Where the key is used, e.g. “laptop agent”.")


class ImportForm(forms.Form):
    file = forms.FileField(
        label="Transcript file",
        help_text="Claude Code, pi or Codex .jsonl, SWE-agent .traj, Anthropic Messages or OpenAI chat .json.",
    )
    format = forms.ChoiceField(required=False, label="Format", help_text="Detected from the file unless chosen.")
    title = forms.CharField(required=False, max_length=200, label="Title", help_text="Default: the transcript's.")
    replay = forms.BooleanField(
        required=False,
        label="Replay message by message",
        help_text="Auto-compaction fires as it would have live (jobs run in the workers).",
    )

    def __init__(self, *args, formats: tuple[str, ...], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["format"].choices = [("", "Detect")] + [(f, f) for f in formats]
