"""The repository stands alone: its docs hold every contract the code relies on, and nothing cites a
document users do not have."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tracked_text_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in names.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file():
            data = path.read_bytes()
            if b"\0" not in data[:8192]:  # text, not a ROM, picture or savestate
                files.append(path)
    return files


def test_no_tracked_file_cites_the_spec():
    """Contracts are written in docs/ (docs/contracts.md, docs/recording-format.md, …), not in a
    specification file users do not have."""
    cite = re.compile(r"\bSPEC\b")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in tracked_text_files() if path != Path(__file__).resolve()
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
             if cite.search(line)]
    assert not found, "cites the specification:\n" + "\n".join(found)


def readme_commands() -> list[str]:
    """The README's bash blocks as commands (continuation lines joined, comments dropped)."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            commands.append(command)
    return commands


WRITES = re.compile(r"(?:--out|--report|--keys-dir|--plots)[ =](\S+)|(?<![0-9&])>\s*'?([^\s'|;&]+)")


def test_readme_examples_write_only_under_data_and_runs():
    """Everything a README example writes goes under data/ or runs/ (git-ignored), never the repository root."""
    outside = []
    for command in readme_commands():
        for match in WRITES.finditer(command.split(" #")[0]):
            target = match.group(1) or match.group(2)
            if not target.startswith(("data/", "runs/", "/dev/null", "$OUT")):
                outside.append(f"{target}  ({command.strip()})")
    assert not outside, "README examples write outside data/ and runs/:\n" + "\n".join(outside)
