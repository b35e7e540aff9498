import sys

sys.path.insert(0, "/work/wt-summary3")
from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.transcripts.detect import read_transcript

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
