"""`make bench`: every benchmark in this folder, one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    status = 0
    # policy_eval.py: issue 13's replay of the shared long Claude Code sessions beside Claude Code.
    for script in [*sorted(HERE.glob("*_bench.py")), HERE / "policy_eval.py"]:
        print(f"=== {script.name}", flush=True)
        status |= subprocess.call([sys.executable, str(script)])
    raise SystemExit(status)
