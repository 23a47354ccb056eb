"""Shared fixtures: small real recordings made by the project's own collector."""

from __future__ import annotations

from pathlib import Path

import pytest

from wantofight.collect.run import RunSettings, collect


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
