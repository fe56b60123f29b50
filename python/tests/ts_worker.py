"""Start the TypeScript worker of the cross-language tests (tests/ts/worker.ts) as a child
process, as `npx tsx` would, and wait for it to print READY."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from .conftest import REPO
from .ts_cli import tsx


@dataclass
class TsWorker:
    process: asyncio.subprocess.Process
    stderr: bytearray

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except asyncio.TimeoutError:
                self.process.kill()
                await self.process.wait()


async def start_ts_worker(env: dict[str, str], ready_timeout: float = 180) -> TsWorker:
    process = await asyncio.create_subprocess_exec(
        *tsx(REPO / "python" / "tests" / "ts" / "worker.ts"),
        cwd=str(REPO),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stderr = bytearray()

    async def drain() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(4096):
            stderr.extend(chunk)

    asyncio.get_running_loop().create_task(drain())
    worker = TsWorker(process, stderr)
    assert process.stdout is not None
    try:
        async with asyncio.timeout(ready_timeout):
            while (line := await process.stdout.readline()) != b"READY\n":
                if line == b"":
                    raise RuntimeError(f"the TypeScript worker exited before READY:\n{stderr.decode(errors='replace')}")
    except BaseException:
        await worker.stop()
        raise

    async def keep_reading() -> None:
        assert process.stdout is not None
        while await process.stdout.readline():
            pass

    asyncio.get_running_loop().create_task(keep_reading())
    return worker
