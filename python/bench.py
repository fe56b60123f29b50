"""What the Python guard costs, in the terms of `npm run bench` (bench/RESULTS.md, "Cost"): the
guard and a naive GET + SET NX + SET guard, both in Python on one redis.asyncio client (its connection pool), as
ratios to a bare ``SET key val PX 900000 NX`` on the same client, measured side by side in
one run (order rotated each repetition, SET measured before and after the guards).

    python3 python/bench.py [--reps 5] [--latency-ops 2000] [--throughput-ops 4000] [--concurrency 64]

Starts its own redis-server on a free port (or uses REDIS_URL), and deletes only its own prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from typing import Awaitable, Callable

from redis.asyncio import Redis

from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, GuardOptions

PAYLOAD = os.urandom(256)
LOCK_PX, ARTIFACT_PX = 900_000, 604_800_000
Op = Callable[[int], Awaitable[None]]


def make_paths(redis: Redis, prefix: str) -> dict[str, tuple[Op, Op | None]]:
    """Each path: (fire a fresh step i, fast-forward step i again)."""
    guard = FireOnceGuard(redis, GuardOptions(key_prefix=prefix))

    async def bare(i: int) -> None:
        await redis.set(f"{prefix}:bare:{i}", "1", px=LOCK_PX, nx=True)

    async def ours_fire(i: int) -> None:
        outcome = await guard.acquire(DispatchTarget(f"s{i}", "step", "job"))
        assert isinstance(outcome, Acquired)
        await guard.commit(outcome.lease, PAYLOAD)

    async def ours_ff(i: int) -> None:
        assert isinstance(await guard.acquire(DispatchTarget(f"s{i}", "step", "job")), FastForward)

    async def naive_fire(i: int) -> None:
        assert await redis.get(f"{prefix}:naive:{i}:result") is None
        assert await redis.set(f"{prefix}:naive:{i}:inflight", "1", px=LOCK_PX, nx=True)
        await redis.set(f"{prefix}:naive:{i}:result", PAYLOAD, px=ARTIFACT_PX)

    async def naive_ff(i: int) -> None:
        assert await redis.get(f"{prefix}:naive:{i}:result") is not None

    return {"bare SET NX PX": (bare, None), "python guard": (ours_fire, ours_ff), "naive GET + SET NX + SET": (naive_fire, naive_ff)}


async def latencies(op: Op, base: int, n: int) -> list[float]:
    out = []
    for i in range(base, base + n):
        start = time.perf_counter()
        await op(i)
        out.append((time.perf_counter() - start) * 1e6)
    return out


async def throughput(op: Op, base: int, n: int, concurrency: int) -> float:
    next_i = base

    async def lane() -> None:
        nonlocal next_i
        while next_i < base + n:
            i, next_i = next_i, next_i + 1
            await op(i)

    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return n / (time.perf_counter() - start)


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(url: str, args: argparse.Namespace) -> None:
    redis = Redis.from_url(url)
    prefix = f"bench-py-{uuid.uuid4().hex[:8]}"
    paths = make_paths(redis, prefix)
    names = [n for n in paths if n != "bare SET NX PX"]
    rows: dict[str, dict[str, list[float]]] = {n: {"fire50": [], "fire99": [], "ff50": [], "ff99": [], "ops": []} for n in paths}
    base = 0
    try:
        for rep in range(args.reps + 1):  # repetition 0 is a discarded warm-up
            order = names[rep % len(names) :] + names[: rep % len(names)]
            result: dict[str, dict[str, float]] = {}
            bare_fire, _ = paths["bare SET NX PX"]
            bare_lat: list[float] = []
            bare_ops: list[float] = []
            for name in ["bare SET NX PX", *order, "bare SET NX PX"]:
                fire, ff = paths[name]
                lat = await latencies(fire, base, args.latency_ops)
                ff_lat = await latencies(ff, base, args.latency_ops) if ff is not None else []
                base += args.latency_ops
                ops = await throughput(fire, base, args.throughput_ops, args.concurrency)
                base += args.throughput_ops
                if name == "bare SET NX PX":
                    bare_lat += lat
                    bare_ops.append(ops)
                    continue
                result[name] = {"fire50": p(lat, 0.5), "fire99": p(lat, 0.99), "ff50": p(ff_lat, 0.5), "ff99": p(ff_lat, 0.99), "ops": ops}
            result["bare SET NX PX"] = {"fire50": p(bare_lat, 0.5), "fire99": p(bare_lat, 0.99), "ops": statistics.mean(bare_ops)}
            if rep == 0:
                continue
            bare = result["bare SET NX PX"]
            for name, values in result.items():
                for key, value in values.items():
                    ref = bare["fire50" if key.endswith("50") else "fire99" if key.endswith("99") else "ops"]
                    rows[name][key].append(value / ref)
                    rows[name][key + "_abs"] = [*rows[name].get(key + "_abs", []), value]
    finally:
        keys = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(keys), 1000):
            await redis.delete(*keys[i : i + 1000])
        await redis.aclose()

    def cell(name: str, key: str, unit: str) -> str:
        if not rows[name].get(key):
            return "-"
        absolute = statistics.median(rows[name][key + "_abs"])
        return f"{absolute:.0f}{unit} ({statistics.median(rows[name][key]):.2f}x)"

    print(f"reps {args.reps} (+1 warm-up), latency ops {args.latency_ops}, throughput ops {args.throughput_ops} at concurrency {args.concurrency}")
    print("| path | fire p50 us (x SET) | fire p99 us (x SET) | fast-forward p50 us (x SET) | fast-forward p99 us (x SET) | c64 ops/s (x SET) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in paths:
        print(f"| {name} | {cell(name, 'fire50', '')} | {cell(name, 'fire99', '')} | {cell(name, 'ff50', '')} | {cell(name, 'ff99', '')} | {cell(name, 'ops', '')} |")


def start_redis() -> tuple[str, subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: install it or set REDIS_URL")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="fire-once-bench-")
    proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return f"redis://127.0.0.1:{port}", proc, workdir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--latency-ops", type=int, default=2000)
    parser.add_argument("--throughput-ops", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL")
    proc = None
    if url is None:
        url, proc, workdir = start_redis()
    try:
        asyncio.run(bench(url, args))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
