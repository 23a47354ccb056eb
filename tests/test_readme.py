"""The README runs as written: every bash block and the Python example, in order, in a fresh folder.

A block is skipped here when an HTML comment on the line before it marks it, and then its first line
tells the reader so (`# not run by the README test: WHY`):

    <!-- long: skipped by tests/test_readme.py -->    half an hour or more, or until Ctrl-C (PPO, bench/, a server)
    <!-- gpu: skipped by tests/test_readme.py -->     needs a GPU, torchrun or local Wan2.1 weights
    <!-- setup: skipped by tests/test_readme.py -->   installs the package or runs the test suite itself
    <!-- display: skipped by tests/test_readme.py --> a window and a person at the keyboard (wtf play)
    <!-- cluster: skipped by tests/test_readme.py --> a Ray cluster started beforehand (--ray auto)

Every other block runs (bash with `bash -euo pipefail`, Python with this interpreter) in an empty
temporary folder with no link to the repository, as in a user's own folder after `pip install`: the
game's key files and reference pictures are named (`keys:duel/walk-under-a`, `--refs duel`) and read
from the installed package, and each example uses only what an earlier one made. Afterwards
everything the examples wrote must lie under `data/` and `runs/` (git-ignored). The test prints each
block's wall and CPU seconds: the README's examples are kept small enough for the whole run to take a
few minutes.
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


def test_the_run_blocks_name_no_file_of_the_checkout():
    """Fast twin of the slow test's empty folder: a path into the repository (`collect/games/duel/...`)
    works only from a clone, so the examples use the package's names for the game's files instead."""
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")
                     and p.name not in ignored_folders())
    into_checkout = re.compile(rf"(?<![\w./-])({'|'.join(map(re.escape, folders))})/")
    comment = re.compile(r"(^|\s)#.*$", re.MULTILINE)  # a pointer to docs/ for the reader is not a path read
    found = [f"README.md:{b.line}: {m.group(0)}" for b in readme_blocks((ROOT / "README.md").read_text())
             if not b.skip for m in into_checkout.finditer(comment.sub("", b.code))]
    assert not found, found


def ignored_folders() -> set[str]:
    """Top-level folders git ignores (a user's data/ and runs/ in a working checkout): the examples may
    name them, since they make them."""
    folders = [p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")]
    try:
        done = subprocess.run(["git", "check-ignore", *folders], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:  # no git: nothing is known to be ignored
        return set()
    return set(done.stdout.split())


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the whole README on 2 cores: ~7-9 min; the suite's default limit is 10 min
def test_readme_blocks_run_in_order_as_written(tmp_path):
    assert not any(tmp_path.iterdir())
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
    written = sorted(p.name for p in tmp_path.iterdir())
    assert set(written) <= {"data", "runs"}, f"README examples wrote outside data/ and runs/: {written}"
