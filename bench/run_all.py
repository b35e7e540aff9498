"""`make bench`: every benchmark in this folder, one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    status = 0
    # The summary evaluation last: its table ends the output.
    for script in [*sorted(HERE.glob("*_bench.py")), HERE / "summary_eval.py"]:
        print(f"=== {script.name}", flush=True)
        status |= subprocess.call([sys.executable, str(script)])
    raise SystemExit(status)
