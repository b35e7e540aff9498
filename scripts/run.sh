#!/usr/bin/env bash
# Embedded default: migrate, make sure someone can log in, start a Celery worker (with beat
# for the stuck-job sweeper) and the web server. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
# Everything the processes write goes under COMPACTOR_VAR_DIR (relative: under this directory,
# as project/settings.py reads it), so the server, the worker and later commands agree.
VAR=${COMPACTOR_VAR_DIR:-var}
mkdir -p "$VAR"
$PY manage.py migrate --noinput
$PY manage.py collectstatic --noinput -v 0
$PY manage.py ensure_admin
# Prometheus' multiprocess mode (ops/metrics.py): the web workers and the Celery worker write
# their figures here and /metrics adds them up; emptied before they start, as prometheus_client asks.
export PROMETHEUS_MULTIPROC_DIR=${PROMETHEUS_MULTIPROC_DIR:-$VAR/prometheus}
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db
.venv/bin/celery -A project worker --beat --loglevel=INFO --concurrency=2 --without-mingle --without-gossip \
  --schedule "$VAR/celerybeat-schedule" >"$VAR/worker.log" 2>&1 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null; wait $WORKER 2>/dev/null' EXIT INT TERM
echo
echo "Compactor is running:  http://$HOST:$PORT/"
echo "  API docs (Swagger):  http://$HOST:$PORT/api/v1/docs/"
echo "  Admin:               http://$HOST:$PORT/admin/"
echo "  Worker log:          $VAR/worker.log"
echo "  Data directory:      $VAR (COMPACTOR_VAR_DIR; give commands the same environment)"
echo "  Health:              http://$HOST:$PORT/healthz  http://$HOST:$PORT/readyz"
echo
# gunicorn with threaded workers, as in production (deploy/gunicorn.conf.py): a streaming
# gateway call holds one thread, never the server. WEB_RELOAD=1 restarts on code changes.
HOST=$HOST PORT=$PORT WEB_RELOAD=${WEB_RELOAD:-0} .venv/bin/gunicorn -c deploy/gunicorn.conf.py project.wsgi
