"""Helpers for the annotation and curriculum tests: key-file recordings whose outcome game.json
predicts, and readers for what annotation wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from wantofight.annotate.annotate import annotate_path, read_annotation
from wantofight.collect.game_registry import builtin_games

INFO = builtin_games()["duel"].info
MOVES = {m["name"]: m for m in INFO["moves"]}


def keys_run(recorded, folder: Path, name: str, lines: list[str], state: str = "Close", fps: int = 60) -> Path:
    """Record a key file (one `FRAMES P1 P2` segment per line) with the project's collector."""
    path = folder / f"{name}.keys"
    path.write_text("\n".join(lines) + "\n")
    return recorded(policy=f"keys:{path}", state=state, fps=fps, episodes=1)


def episode(run: Path) -> Path:
    return sorted((run / "episodes").iterdir())[0]


def annotated(run: Path):
    """(frames as dict of lists, events as list of dicts, RAM as dict of lists) of a run's episode 0."""
    path = episode(run)
    report = annotate_path(path)
    assert report["status"] in ("annotated", "up_to_date"), report
    annotation = read_annotation(path)
    ram = pq.read_table(path / "frames.parquet").to_pydict()
    return annotation.frames.to_pydict(), annotation.events.to_pylist(), ram


def spans(events: list[dict], kind: str) -> list[tuple[int, int]]:
    return [(e["start_frame"], e["end_frame"]) for e in events if e["event"] == kind]


def only(events: list[dict], kind: str) -> dict:
    found = [e for e in events if e["event"] == kind]
    assert len(found) == 1, found
    return found[0]


def copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to
