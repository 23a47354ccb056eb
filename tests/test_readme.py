"""The README runs as written: every bash block and the Python example, in order, in a fresh folder.

A block is skipped here when an HTML comment on the line before it marks it, and then its first line
tells the reader so (`# not run by the README test: WHY`):

    <!-- long: skipped by tests/test_readme.py -->    half an hour or more, or until Ctrl-C (PPO, bench/, a server)
    <!-- gpu: skipped by tests/test_readme.py -->     needs a GPU, torchrun or local Wan2.1 weights
    <!-- setup: skipped by tests/test_readme.py -->   installs the package or runs the test suite itself
    <!-- display: skipped by tests/test_readme.py --> a window and a person at the keyboard (wtf play)
    <!-- cluster: skipped by tests/test_readme.py --> a Ray cluster started beforehand (--ray auto)

Every other block runs (bash with `bash -euo pipefail`, Python with this interpreter) in a temporary
folder that holds only links to what the commands read from the repository (the game's key files and
reference pictures), so each example uses only what an earlier one made. Afterwards everything the
examples wrote must lie under `data/` and `runs/` (git-ignored). The test prints each block's wall and
CPU seconds: the README's examples are kept small enough for the whole run to take a few minutes.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_KINDS = ("long", "gpu", "setup", "display", "cluster")
LANGUAGES = ("bash", "python")
MARKER = re.compile(r"<!--\s*(\w+):.*-->")
REPO_LINKS = ("collect",)
"""What the commands read from the checkout (collect/games/duel/keys, collect/games/duel/refs)."""
BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    line: int
    """Line of the opening fence in README.md (1-based)."""
    language: str
    """bash or python."""
    code: str
    skip: str | None
    """The marker's kind when the block is skipped."""


def readme_blocks(text: str) -> list[Block]:
    """Every ```bash and ```python block of `text`, with the marker of the line before it (if any)."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() in tuple("```" + language for language in LANGUAGES):
            start = i
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            mark = MARKER.search(before)
            blocks.append(Block(start + 1, lines[start].strip()[3:], "\n".join(lines[start + 1:j]) + "\n",
                                mark.group(1) if mark else None))
            i = j
        i += 1
    return blocks


def test_every_marker_is_a_known_kind_and_marks_a_code_block():
    text = (ROOT / "README.md").read_text()
    marked_lines = [n for n, line in enumerate(text.splitlines(), start=1) if MARKER.search(line)]
    blocks = readme_blocks(text)
    assert all(MARKER.search(text.splitlines()[n - 1]).group(1) in SKIP_KINDS for n in marked_lines)
    assert len([b for b in blocks if b.skip]) == len(marked_lines), "a marker not right before a code block"
    assert len([b for b in blocks if not b.skip]) >= 10
    assert all(b.code.startswith("# not run by the README test") for b in blocks if b.skip), \
        "a skipped block does not say so to the reader on its first line"


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.slow
def test_readme_blocks_run_in_order_as_written(tmp_path):
    for name in REPO_LINKS:
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "WTF_PROGRESS_SECONDS": "60"}
    timings = []
    for block in readme_blocks((ROOT / "README.md").read_text()):
        if block.skip:
            continue
        command = ["bash", "-euo", "pipefail", "-c", block.code] if block.language == "bash" else [sys.executable, "-"]
        started, cpu_before = time.perf_counter(), children_cpu_seconds()
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                                input=block.code if block.language == "python" else None, timeout=BLOCK_TIMEOUT_S)
        timings.append(f"README.md:{block.line} {block.language}: {time.perf_counter() - started:.0f} s wall, "
                       f"{children_cpu_seconds() - cpu_before:.0f} s CPU")
        assert result.returncode == 0, (f"README.md:{block.line} failed (exit {result.returncode}):\n{block.code}\n"
                                        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    print("\n".join(timings))
    written = sorted(p.name for p in tmp_path.iterdir() if p.name not in REPO_LINKS)
    assert set(written) <= {"data", "runs"}, f"README examples wrote outside data/ and runs/: {written}"
