"""Shared fixtures: small real recordings made by the project's own collector."""

from __future__ import annotations

import os
import signal
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores (pyproject's addopts): one thread each, for torch here and for every `wtf`
    # the tests start, instead of four threads fighting over two cores. Set before torch is imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A shell that starts a job in the background (`nohup pytest &`, `.ci/run &` from a script) starts it with
    # Ctrl-C ignored, and every command the tests start would inherit that: the Ctrl-C tests would fail
    # because nothing can be interrupted. They test what a terminal's Ctrl-C does, so give them Python's
    # own handler back (a command started after this gets SIGINT's default at exec).
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest

from wantofight.collect.run import RunSettings, collect


# The longest test files, first: xdist hands files out in collection order (pyproject's
# --no-loadscope-reorder), so the README's run (~7 min on its own) starts at once instead of after
# everything else. The LeRobot check builds its own venv on a fresh machine (~2.5 min).
FIRST = ("test_readme.py", "test_benchmark.py", "test_ray.py", "test_stage2.py", "test_train.py", "test_stage3.py",
         "test_export_lerobot.py", "test_vae_train.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: the rest keep their order


def record(out: Path, **settings) -> Path:
    """Record a run with `collect()` (worker processes, the real emulator) and return its folder."""
    workers = settings.pop("workers", 1)
    collect(RunSettings(**settings), out, workers=workers, progress=False)
    return out


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    """A cache of small runs keyed by their settings, shared by every test of the session."""
    runs: dict[tuple, Path] = {}

    def get(**settings) -> Path:
        key = tuple(sorted(settings.items()))
        if key not in runs:
            runs[key] = record(tmp_path_factory.mktemp("run"), **settings)
        return runs[key]

    return get
