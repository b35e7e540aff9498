#!/usr/bin/env bash
# Production run: gunicorn (web), a Celery worker and Celery beat, on PostgreSQL and Redis from
# the environment. Refuses to start without SECRET_KEY, DATABASE_URL (postgres) or REDIS_URL.
# Stops all three when any one exits or on SIGTERM/SIGINT (systemd, Docker, Ctrl-C).
# README.md "Deploy" shows the same processes as systemd units and a Procfile.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${COMPACTOR_BIN:-.venv/bin}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}

fail() { echo "make serve: $*" >&2; exit 2; }
[ -n "${SECRET_KEY:-}" ] || fail "SECRET_KEY is not set (generate one: python3 -c 'import secrets; print(secrets.token_urlsafe(50))')"
case "${DATABASE_URL:-}" in
  postgres://*|postgresql://*) ;;
  *) fail "DATABASE_URL must be a PostgreSQL URL (postgres://user:password@host:5432/db), got '${DATABASE_URL:-}'" ;;
esac
case "${REDIS_URL:-}" in
  redis://*|rediss://*|unix://*) ;;
  *) fail "REDIS_URL must be set (redis://host:6379/0), got '${REDIS_URL:-}'" ;;
esac
export DEBUG=0

"$BIN/python" manage.py migrate --noinput
"$BIN/python" manage.py collectstatic --noinput -v 0
# Prometheus' multiprocess mode (ops/metrics.py): gunicorn's workers and Celery's write their
# figures here and /metrics adds them up; emptied before they start, as prometheus_client asks.
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-${COMPACTOR_VAR_DIR:-var}/prometheus}
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db

pids=()
stop() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT INT TERM

"$BIN/celery" -A project worker --loglevel="${LOG_LEVEL:-INFO}" --concurrency="${CELERY_CONCURRENCY:-2}" &
pids+=($!)
"$BIN/celery" -A project beat --loglevel="${LOG_LEVEL:-INFO}" \
  --schedule "${COMPACTOR_VAR_DIR:-var}/celerybeat-schedule" &
pids+=($!)
# Web: settings (gthread, keep-alive 5 s, timeouts) in deploy/gunicorn.conf.py.
HOST="$HOST" PORT="$PORT" "$BIN/gunicorn" -c deploy/gunicorn.conf.py project.wsgi:application &
pids+=($!)
echo "Compactor serving on http://$HOST:$PORT/ (web pid ${pids[2]}, worker ${pids[0]}, beat ${pids[1]})"
# The first process to exit stops the others: a half-running service is worse than a restart.
wait -n "${pids[@]}"
