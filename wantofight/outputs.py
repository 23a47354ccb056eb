"""Output folders are never replaced by surprise (docs/contracts.md, "Output folders").

    work = claim(out, overwrite)        # `out` itself, or `.OUT.partial` beside it with --overwrite
    ...                                 # write everything into `work`
    swap_in(work, out)                  # the old folder aside, the new one in, the old one removed

A command writes into a new or empty folder, or continues its own leftovers there (`ours`: part files
of an interrupted run, a run's checkpoints with --resume). Anything else is refused in one line naming
--overwrite; with it, the new output is built in the sibling staging folder and swapped in only once
complete, so a Ctrl-C (or a crash) before `swap_in` leaves the old output as it was.

One file is written the same way: `write_atomic(path, data)`, or `with written(path) as tmp:` for a
library that writes the file itself (a figure, a model, an image). Readers skip `.tmp-*` names.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from wantofight.interrupts import ctrl_c_held


class OutputExists(ValueError):
    """An output that holds something this job did not make; the message names --overwrite."""

    def __init__(self, out: Path, option: str = "--out", resumable: bool = False, what: str = ""):
        state = f"holds {what}" if what else "already holds a run" if resumable else "already exists and is not empty"
        remedy = "add --resume to continue it, or --overwrite to replace it" if resumable else \
            "add --overwrite to replace it" if what else \
            "add --overwrite to replace it (the new one is swapped in once complete), or choose another folder"
        super().__init__(f"{option} {out} {state}: {remedy}".lstrip())


def staging_dir(out: Path) -> Path:
    """Where an output is built before it replaces `out`: `.OUT.partial` beside it (same filesystem,
    so the swap is a rename)."""
    out = Path(out)
    return out.parent / f".{out.name}.partial"


def holds_other(out: Path, ours: Callable[[Path], bool] = lambda path: False) -> bool:
    """True when `out` is a file, or a folder with an entry that `ours` does not claim."""
    out = Path(out)
    if not out.exists():
        return False
    return not out.is_dir() or any(not ours(entry) for entry in out.iterdir())


def claim(out: Path, overwrite: bool = False, *, ours: Callable[[Path], bool] = lambda path: False,
          resume: bool = False, resumable: bool = False, option: str = "--out") -> Path:
    """The folder to write into: `out` when it holds nothing but `ours`; with `overwrite`, the staging
    folder (cleared of what is not `ours`, so a rerun of the same job reuses its leftovers); else
    OutputExists. With `resume` (a command that continues runs), the run to continue: the staging
    one after an interrupted --overwrite, else `out`. `resumable` says `out` holds a run --resume
    would continue, so the refusal names it."""
    out = Path(out)
    if resume:
        return staging_dir(out) if overwrite else out
    if not holds_other(out, ours):
        return out
    if not overwrite:
        raise OutputExists(out, option, resumable)
    staging = staging_dir(out)
    if staging.is_dir():
        for entry in staging.iterdir():
            if not ours(entry):
                remove(entry)
    elif staging.exists():
        remove(staging)
    return staging


def swap_in(work: Path, out: Path) -> None:
    """Make the complete folder `work` the output `out`: the old `out` aside, `work` in, the old removed.
    A Ctrl-C during the two renames waits for them, so `out` is never missing."""
    work, out = Path(work), Path(out)
    if work.resolve() == out.resolve():
        return
    old = out.parent / f".{out.name}.old"
    remove(old)
    with ctrl_c_held():
        if out.exists() or out.is_symlink():
            os.replace(out, old)
        os.replace(work, out)
    remove(old)


def remove(path: Path) -> None:
    """Delete a file, link or folder if it is there."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


TMP_PREFIX = ".tmp-"


def is_temporary(path: Path) -> bool:
    """A file or folder being written (`.tmp-*`): never read as a result."""
    return Path(path).name.startswith(TMP_PREFIX)


@contextmanager
def written(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write; renamed to `path` when the block ends, removed when it
    raises (a Ctrl-C included), so `path` is the old file or the whole new one and nothing is left over."""
    path = Path(path)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write text or bytes to `path` through `written`."""
    with written(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data)
