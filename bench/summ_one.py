"""Print the offline summary of one transcript (any format the importers read).

    .venv/bin/python bench/summ_one.py TRANSCRIPT [N]

N: summarize only the first N messages (default: all). For reading a summary cold, beside the
agent's own (bench/summary_eval.py scores them).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import summary_eval as se  # noqa: E402
from compaction.core.summarizers.extractive import extractive_summary  # noqa: E402
from compaction.core.transcripts.detect import read_transcript  # noqa: E402

t = read_transcript(sys.argv[1])
msgs = [
    {
        "role": m["role"] if isinstance(m, dict) else m.role,
        "content": m["content"] if isinstance(m, dict) else m.content,
    }
    for m in t.messages
]
n = int(sys.argv[2]) if len(sys.argv) > 2 else len(msgs)
print(extractive_summary(se.as_msgs(msgs[:n])))
