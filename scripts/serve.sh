#!/usr/bin/env bash
# Production run: gunicorn (web), a Celery worker and Celery beat, on PostgreSQL and Redis from
# the environment. Refuses to start without SECRET_KEY, DATABASE_URL (postgres) or REDIS_URL.
# The web server is the service: when it exits, or on SIGTERM/SIGINT (systemd, Docker, Ctrl-C),
# all three stop. A worker or beat that dies is restarted with backoff (1 s doubling to 60 s,
# back to 1 s after a minute up) while the web server keeps serving: jobs wait in the broker
# (and the sweeper re-sends any lost) until the worker is back. Their pids: $VAR/run/*.pid.
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

RUN_DIR="${COMPACTOR_VAR_DIR:-var}/run"
mkdir -p "$RUN_DIR"
MAX_BACKOFF=${COMPACTOR_SUPERVISE_MAX_BACKOFF:-60}

# Runs one process again and again until told to stop. Its own subshell: a TERM stops the
# process it runs (gracefully, as the signal asks) and then the loop.
supervise() {
  local name=$1 delay=1 child=0 started status
  shift
  trap 'trap - TERM INT; [ "$child" -gt 0 ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; rm -f "$RUN_DIR/$name.pid"; exit 0' TERM INT
  while true; do
    started=$SECONDS
    "$@" &
    child=$!
    echo "$child" > "$RUN_DIR/$name.pid"
    status=0
    wait "$child" || status=$?
    if (( SECONDS - started >= 60 )); then delay=1; fi
    echo "make serve: $name (pid $child) exited with status $status; restarting in ${delay}s" >&2
    sleep "$delay" &
    wait $! || true
    delay=$(( delay * 2 > MAX_BACKOFF ? MAX_BACKOFF : delay * 2 ))
  done
}

pids=()
stop() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT INT TERM

# Without mingle and gossip (nothing here uses what they exchange: revoked ids, peer events) a
# restarted worker is consuming within ~2 s, and it re-queues at once the jobs its killed process
# was running (compaction.tasks, on worker_ready).
supervise worker "$BIN/celery" -A project worker --loglevel="${LOG_LEVEL:-INFO}" \
  --concurrency="${CELERY_CONCURRENCY:-2}" --without-mingle --without-gossip &
pids+=($!)
supervise beat "$BIN/celery" -A project beat --loglevel="${LOG_LEVEL:-INFO}" \
  --schedule "${COMPACTOR_VAR_DIR:-var}/celerybeat-schedule" &
pids+=($!)
# Web: settings (gthread, keep-alive 5 s, timeouts) in deploy/gunicorn.conf.py.
HOST="$HOST" PORT="$PORT" "$BIN/gunicorn" -c deploy/gunicorn.conf.py project.wsgi:application &
web=$!
pids+=($web)
echo "$web" > "$RUN_DIR/web.pid"
echo "Compactor serving on http://$HOST:$PORT/ (web pid $web; worker and beat supervised, pids in $RUN_DIR)"
# The web server's exit ends the service (systemd or Docker restarts it as a whole).
status=0
wait "$web" || status=$?
echo "make serve: the web server exited with status $status; stopping" >&2
exit "$status"
