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
    # Short phases here (about 40 s in all); run it alone for steadier figures. Skipped, with a
    # note, when no PostgreSQL answers.
    print("=== api_load.py", flush=True)
    status |= subprocess.call([sys.executable, str(HERE / "api_load.py"), "--duration", "3", "--appends", "100"])
    raise SystemExit(status)
