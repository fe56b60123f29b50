"""Every Python block of python/README.md type-checks (mypy --strict) against the package, as the
TypeScript blocks of the README and docs/ do (test/docs/examples.test.ts). What a block leaves to
the reader (your job, your client and Redis, the activity and workflow of the blocks above it) is
declared once in ``PRELUDE``; the block that defines ``ChatTurn`` is written as chat_workflows.py,
which the others import; a block with a top-level ``await`` is checked as the body of a coroutine."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api

README = Path(__file__).resolve().parent.parent / "README.md"

PRELUDE = """\
from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker as Worker

from chat_workflows import ChatTurn as ChatTurn

async def start_slow_summary_job(text: str) -> str:
    raise NotImplementedError

@activity.defn
async def dispatch_summary(text: str) -> str:
    raise NotImplementedError

client: Client
redis: Redis
"""
"""readme_prelude.py: what the blocks leave to the reader. A block imports each of these names it
uses and does not define or import itself."""

PRELUDE_NAMES = ("Worker", "ChatTurn", "start_slow_summary_job", "dispatch_summary", "client", "redis")


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.MULTILINE | re.DOTALL)


def as_module(block: str) -> str:
    """The block as a module: its top-level ``await``s, if any, in the body of a coroutine, and
    the prelude's names it leaves to the reader imported."""
    own = [name for name in PRELUDE_NAMES if re.search(rf"\b{name}\b", block) and not defines(block, name)]
    prelude = f"from readme_prelude import {', '.join(own)}\n" if own else ""
    if not re.search(r"^await ", block, flags=re.MULTILINE):
        return prelude + block
    imports = [line for line in block.splitlines() if line.startswith(("from ", "import "))]
    body = [line for line in block.splitlines() if not line.startswith(("from ", "import "))]
    return prelude + "\n".join(imports) + "\n\nasync def _snippet() -> None:\n" + textwrap.indent("\n".join(body), "    ") + "\n"


def defines(block: str, name: str) -> bool:
    return re.search(rf"^(async )?def {name}\b|^class {name}\b|^\s*{name} = |^from \S+ import .*\b{name}\b", block, flags=re.MULTILINE) is not None


def test_every_python_block_of_the_readme_type_checks(tmp_path: Path) -> None:
    found = blocks()
    assert len(found) >= 5
    for i, block in enumerate(found):
        name = "chat_workflows.py" if "class ChatTurn" in block else f"snippet_{i + 1}.py"
        text = as_module(block)
        (tmp_path / name).write_text(text)
    (tmp_path / "readme_prelude.py").write_text(PRELUDE)
    out, err, status = api.run(["--strict", "--no-incremental", "--python-version", "3.11", str(tmp_path)])
    assert status == 0, out + err
