#!/usr/bin/env bash
# Install the agent CLIs the conformance suite (tests/agents) runs, from npm, into
# ${COMPACTOR_AGENTS_CLI_DIR:-var/agents-cli}/<pinned|latest>/ (var/ is gitignored). A rerun with
# the same versions installs nothing.
#   scripts/agents_cli.sh           the pinned versions of tests/agents/versions.txt (.ci/run)
#   scripts/agents_cli.sh latest    the newest published versions (scripts/agents_latest.sh)
# Without npm it says so and exits 0: the suite then skips (and fails under REQUIRE_SERVICES=1).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-pinned}
dir="${COMPACTOR_AGENTS_CLI_DIR:-var/agents-cli}/$which"
if [ "$which" = pinned ]; then
  mapfile -t packages < <(grep -v '^#' tests/agents/versions.txt | grep .)
else
  mapfile -t packages < <(grep -v '^#' tests/agents/versions.txt | grep . | sed -E 's/@[^@]+$/@latest/')
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: the agent CLIs (${packages[*]}) are not installed; tests/agents will skip"
  exit 0
fi
stamp="$dir/.installed"
if [ "$which" = pinned ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ]; then
  echo "agent CLIs already installed in $dir: ${packages[*]}"
  exit 0
fi
mkdir -p "$dir"
echo "installing ${packages[*]} into $dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${packages[@]}" >"$dir/npm.log" 2>&1 ||
  { cat "$dir/npm.log"; exit 1; }
echo "${packages[*]}" >"$stamp"
for bin in claude codex pi; do "$dir/node_modules/.bin/$bin" --version 2>&1 | head -1 | sed "s/^/  $bin: /"; done
