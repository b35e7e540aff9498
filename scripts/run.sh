#!/usr/bin/env bash
# Embedded default: migrate, make sure someone can log in, start a Celery worker (with beat
# for the stuck-job sweeper) and the web server. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
mkdir -p var
$PY manage.py migrate --noinput
$PY manage.py collectstatic --noinput -v 0
$PY manage.py ensure_admin
.venv/bin/celery -A project worker --beat --loglevel=INFO --concurrency=2 \
  --schedule var/celerybeat-schedule >var/worker.log 2>&1 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null; wait $WORKER 2>/dev/null' EXIT INT TERM
echo
echo "Compactor is running:  http://$HOST:$PORT/"
echo "  API docs (Swagger):  http://$HOST:$PORT/api/v1/docs/"
echo "  Admin:               http://$HOST:$PORT/admin/"
echo "  Worker log:          var/worker.log"
echo
$PY manage.py runserver "$HOST:$PORT"
