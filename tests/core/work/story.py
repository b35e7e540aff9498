"""Sessions written as stories for the work-model tests: the person asks, the agent says and
calls tools, the tools answer. `Story().person("fix it").run("pytest", "1 failed").state()`."""

from __future__ import annotations

from typing import Any

from compaction.core.tokens import count_content
from compaction.core.types import Msg
from compaction.core.work import WorkState, fold


class Story:
    def __init__(self) -> None:
        self.raw: list[dict[str, Any]] = []

    # --- the person and the harness -----------------------------------------------------------

    def person(self, text: str) -> Story:
        self.raw.append({"role": "user", "content": [{"type": "text", "text": text}]})
        return self

    def harness(self, text: str) -> Story:
        """Text the harness put in the user's turn (its shape tells it apart)."""
        self.raw.append({"role": "user", "content": text})
        return self

    # --- the agent ---------------------------------------------------------------------------

    def says(self, text: str) -> Story:
        self.raw.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        return self

    def tool(self, name: str, inputs: Any, output: Any = "", *, error: bool = False, said: str = "") -> Story:
        """A call (after the agent's words `said`) and the user message with its result."""
        call_id = f"toolu_{len(self.raw):04d}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": said}] if said else []
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": inputs})
        self.raw.append({"role": "assistant", "content": blocks})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
        if error:
            result["is_error"] = True
        self.raw.append({"role": "user", "content": [result]})
        return self

    def call_only(self, name: str, inputs: Any, *, said: str = "") -> Story:
        """A call whose result has not arrived (the history ends, or a compaction cuts here)."""
        call_id = f"toolu_{len(self.raw):04d}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": said}] if said else []
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": inputs})
        self.raw.append({"role": "assistant", "content": blocks})
        return self

    def answer(self, output: str, *, error: bool = False) -> Story:
        """The result of the last `call_only`."""
        call_id = f"toolu_{len(self.raw) - 1:04d}"
        self.raw.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": error}],
            }
        )
        return self

    def run(self, command: str, output: str = "", *, error: bool = False, said: str = "") -> Story:
        return self.tool("Bash", {"command": command}, output, error=error, said=said)

    def edit(self, path: str, old: str, new: str, *, said: str = "", output: str = "") -> Story:
        done = output or f"The file {path} has been updated successfully."
        return self.tool("Edit", {"file_path": path, "old_string": old, "new_string": new}, done, said=said)

    def write(self, path: str, content: str, *, said: str = "", created: bool = True) -> Story:
        done = f"File created successfully at: {path}" if created else f"The file {path} has been updated successfully."
        return self.tool("Write", {"file_path": path, "content": content}, done, said=said)

    def read(self, path: str, output: str = "1→contents", *, said: str = "") -> Story:
        return self.tool("Read", {"file_path": path}, output, said=said)

    def todos(self, *items: tuple[str, str]) -> Story:
        return self.tool(
            "TodoWrite",
            {"todos": [{"content": c, "status": s} for s, c in items]},
            "Todos have been modified successfully",
        )

    # --- folding ------------------------------------------------------------------------------

    def msgs(self) -> list[Msg]:
        return [Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(self.raw)]

    def state(self) -> WorkState:
        return fold(self.msgs())


def commit_output(sha: str, subject: str, branch: str = "main", created: tuple[str, ...] = ()) -> str:
    made = "".join(f"\n create mode 100644 {path}" for path in created)
    return f"[{branch} {sha}] {subject}\n 1 file changed, 2 insertions(+){made}"


def push_output(old: str, new: str, branch: str = "main") -> str:
    return f"To github.com:o/r.git\n   {old}..{new}  {branch} -> {branch}"
