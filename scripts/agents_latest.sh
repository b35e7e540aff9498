#!/usr/bin/env bash
# Not part of CI: run the CLI conformance suite (tests/agents) against the newest published
# Claude Code, Codex and pi instead of the pinned ones, and report what breaks.
#   scripts/agents_latest.sh            installs them into var/agents-cli/latest, runs the suite
# Exit status: the suite's (0 when the newest versions pass too). A failure here is news about a
# new release, to look into before moving the pins in tests/agents/versions.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
scripts/agents_cli.sh latest || exit 1
dir="${COMPACTOR_AGENTS_CLI_DIR:-var/agents-cli}/latest"
echo "--- pinned: $(grep -v '^#' tests/agents/versions.txt | tr '\n' ' ')"
echo "--- newest:"
for bin in claude codex pi; do echo "  $bin $("$dir/node_modules/.bin/$bin" --version 2>&1 | head -1)"; done
COMPACTOR_AGENTS_CLI=latest DEBUG=1 "$PY" -m pytest -p no:cacheprovider -q -rfE tests/agents "$@"
status=$?
if [ $status -eq 0 ]; then
  echo "--- the newest versions pass the suite"
else
  echo "--- the newest versions break the suite (above: what failed, with each CLI's output)"
fi
exit $status
