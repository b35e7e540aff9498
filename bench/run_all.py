"""`make bench`: every benchmark in this folder, one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    status = 0
    # policy_eval.py: the policy's replay of the shared long sessions beside Claude Code; the
    # summary evaluation last: its table ends the output.
    # api_load.py with short phases (about 40 s in all; run it alone for steadier figures),
    # skipped with a note when no PostgreSQL answers.
    runs = [
        *([script] for script in sorted(HERE.glob("*_bench.py"))),
        [HERE / "policy_eval.py"],
        [HERE / "meter_eval.py"],
        [HERE / "api_load.py", "--duration", "3"],
        [HERE / "summary_eval.py"],
    ]
    for script, *args in runs:
        print(f"=== {script.name}", flush=True)
        status |= subprocess.call([sys.executable, str(script), *args])
    raise SystemExit(status)
