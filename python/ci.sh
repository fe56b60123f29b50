#!/usr/bin/env bash
# The Python package's CI: install it with its test extras, type-check it (mypy --strict, and the
# TypeScript side of the cross-language tests), and run its pytest: unit tests, the protocol
# conformance cases, the worker tests and the cross-language tests. Needs redis-server, the
# Temporal CLI (TEMPORAL_CLI_PATH, or temporal on PATH), and node with the repository's
# node_modules (npm ci at the root). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { printf '\n== %s (%ss)\n' "$1" "$((SECONDS - start))"; }

step "pip install -e 'python[test]'"
python3 -m pip install -q -e 'python[test]'

step "mypy --strict"
(cd python && python3 -m mypy --strict)

step "tsc: the TypeScript worker of the cross-language tests"
npx tsc -p python/tests/ts

step "pytest"
# Three pytest-xdist workers, each with its own redis-server and dev server (tests/conftest.py),
# one test file per worker at a time (--dist loadfile, so a file's module fixtures, such as its
# Redis Cluster, start once). The suite mostly waits on its servers: about 2 minutes this way,
# 5 in one process. pytest-timeout ends a hung test (pyproject.toml); `timeout` bounds what it
# cannot, such as a fixture teardown that hangs after a failed test.
(cd python && timeout 1200 python3 -m pytest -q -p no:cacheprovider -n 3 --dist loadfile)

step "done"
