#!/usr/bin/env bash
# Starts what Crucible needs: Redis (when none answers), Celery workers (scripts/workers.sh), the web server.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export REDIS_URL
mkdir -p var/log

if ! $BIN/python - "$REDIS_URL" <<'PY' 2>/dev/null
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1).ping()
PY
then
  port=$($BIN/python -c "import sys,urllib.parse as u; print(u.urlparse(sys.argv[1]).port or 6379)" "$REDIS_URL")
  echo "starting a private Redis on 127.0.0.1:$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
    --dir "$PWD/var" --logfile "$PWD/var/log/redis.log" --pidfile "$PWD/var/redis.pid"
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

# To the terminal, never to a file: on the first run it shows the admin's new password once.
# (Earlier versions kept this output, passwords and all, in var/log/seed.txt.)
rm -f var/log/seed.txt
$BIN/python manage.py seed_demo
# The demo's first start queues a validation run and a reward check of each demo suite, once
# (webapp.demo_checks): the workers below run them and the dashboard follows them. In the
# background: the server neither waits for it (one Django start less before the first page) nor
# depends on it; the jobs wait in Redis until the workers are up.
{ $BIN/python manage.py verify_demo \
    || echo "warning: the demo checks were not queued (see above); the suite pages can start them"; } &

# Several checkouts may share one Redis: each keeps its jobs and live events under its own name.
INSTANCE_INFO=$($BIN/python manage.py shell -v 0 -c "
import redis
from django.conf import settings
me = settings.CRUCIBLE_INSTANCE
client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2)
others = sorted({k.decode().split(':', 1)[0] for k in client.scan_iter('*:_kombu.binding.*', count=1000)} - {me})
print(me + ('  (also on this Redis: ' + ', '.join(others[:5]) + '; each runs only its own jobs)' if others else ''))
" 2>/dev/null || echo "?")

. scripts/workers.sh
trap stop_workers EXIT INT TERM
start_workers

echo
echo "  Crucible is at http://$HOST:$PORT/"
echo "  login: admin, password in var/admin_password (reviewer, researcher: var/demo_passwords)"
echo "  instance: $INSTANCE_INFO"
echo "  logs: var/log/  ·  stop with Ctrl-C"
echo
$BIN/daphne -b "$HOST" -p "$PORT" webapp.asgi:application
