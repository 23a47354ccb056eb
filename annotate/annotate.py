"""`wtf annotate`: write `annotations.parquet`, `events.parquet` and `annotation.json` per episode.

Everything comes from the recorded RAM and keys (no video decoding). Files are written under
temporary names and renamed; `annotation.json` is written last, so its presence means the
episode's annotation is complete. It records what could not be computed for the episode's game.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from wantofight.annotate import events as ev
from wantofight.annotate import labels as lb
from wantofight.annotate.episode import Episode, EpisodeError, episode_dirs, load_episode
from wantofight.annotate.rules import rules_for
from wantofight.outputs import TMP_PREFIX

ANNOTATION_VERSION = 1
ANNOTATIONS_FILE = "annotations.parquet"
EVENTS_FILE = "events.parquet"
META_FILE = "annotation.json"
STATE_NAMES = ("p1_state", "p2_state")


@dataclass
class Annotation:
    """An episode's annotation, in memory."""

    frames: pa.Table
    events: pa.Table
    meta: dict


def annotate_episode(episode: Episode) -> Annotation:
    rules = rules_for(episode.meta["game"])
    ctx = ev.Context(episode.columns, rules, episode.frame_skip)
    if rules.states and episode.has(*STATE_NAMES):
        ctx.players = {p: lb.PlayerTimeline(episode.columns, p, rules, episode.frame_skip) for p in (1, 2)}
    elif not rules.states:
        ctx.not_computed["action"] = "no state ids for this game (game.json)"
    else:
        ctx.not_computed["action"] = "RAM lacks p1_state/p2_state"
    if episode.has("phase") and rules.phase_id("fighting") is not None:
        ctx.fighting = episode.columns["phase"] == rules.phase_id("fighting")
    fighting = ctx.fighting if ctx.fighting is not None else np.ones(episode.rows, dtype=bool)
    columns: dict[str, pa.Array] = {"frame_index": pa.array(np.arange(episode.rows, dtype=np.int32))}
    columns["gameplay"] = pa.array(fighting)
    columns["segment"] = pa.array(segments(episode, ctx), type=pa.int32())
    for p in (1, 2):
        keys = episode.columns[f"p{p}_keys"]
        pressed, released = lb.key_edges(keys)
        if ctx.players:
            tl = ctx.players[p]
            ctx.labels[p] = lb.action_labels(tl)
            action = pa.array(list(ctx.labels[p]), type=pa.string())
            effective = pa.array(lb.effective_flags(tl, fighting))
        else:
            action = pa.nulls(episode.rows, pa.string())
            effective = pa.nulls(episode.rows, pa.bool_())
        columns[f"p{p}_action"] = action
        columns[f"p{p}_effective"] = effective
        columns[f"p{p}_keys"] = pa.array(keys.astype(np.uint16))
        columns[f"p{p}_pressed"] = pa.array(pressed)
        columns[f"p{p}_released"] = pa.array(released)
    if not ctx.players:
        ctx.not_computed["effective"] = ctx.not_computed["action"]
    events = ev.detect_events(ctx)
    meta = {
        "annotation_version": ANNOTATION_VERSION,
        "episode_id": episode.episode_id,
        "game": rules.game,
        "rows": episode.rows,
        "frame_skip": episode.frame_skip,
        "identity": episode.identity(),
        "labels": lb.label_vocabulary(rules) if ctx.players else [],
        "event_types": list(ev.EVENT_TYPES),
        "not_computed": [{"what": k, "reason": v} for k, v in sorted(ctx.not_computed.items())],
        "event_counts": count_events(events),
    }
    return Annotation(pa.table(columns), ev.events_table(events), meta)


def segments(episode: Episode, ctx: ev.Context) -> np.ndarray:
    """Gameplay segment id per row (-1 outside gameplay): a new one at every fighting span and
    every change of the `round` variable, so no segment crosses a round or non-gameplay rows."""
    fighting = ctx.fighting if ctx.fighting is not None else np.ones(episode.rows, dtype=bool)
    round_no = episode.columns.get("round")
    out = np.full(episode.rows, -1, dtype=np.int32)
    current = -1
    for t in range(episode.rows):
        if not fighting[t]:
            continue
        if t == 0 or not fighting[t - 1] or (round_no is not None and round_no[t] != round_no[t - 1]):
            current += 1
        out[t] = current
    return out


def count_events(events: list[ev.Event]) -> dict[str, int]:
    counts = {name: 0 for name in ev.EVENT_TYPES}
    for e in events:
        counts[e.event] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# Files


def write_annotation(path: Path, annotation: Annotation) -> None:
    """Write the three files atomically; annotation.json last marks the set complete."""
    meta_path = path / META_FILE
    if meta_path.exists():
        meta_path.unlink()
    for name, table in ((ANNOTATIONS_FILE, annotation.frames), (EVENTS_FILE, annotation.events)):
        tmp = path / f"{TMP_PREFIX}{name}"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path / name)
    tmp = path / f"{TMP_PREFIX}{META_FILE}"
    tmp.write_text(json.dumps(annotation.meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, meta_path)


def read_annotation(path: Path) -> Annotation:
    meta = json.loads((path / META_FILE).read_text())
    return Annotation(pq.read_table(path / ANNOTATIONS_FILE), pq.read_table(path / EVENTS_FILE), meta)


def is_annotated(path: Path, episode: Episode | None = None) -> bool:
    """True when a complete annotation of this version exists (and matches the episode's rows)."""
    meta_path = path / META_FILE
    if not meta_path.is_file():
        return False
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if meta.get("annotation_version") != ANNOTATION_VERSION:
        return False
    if episode is not None and meta.get("identity") != episode.identity():
        return False
    return (path / ANNOTATIONS_FILE).is_file() and (path / EVENTS_FILE).is_file()


def annotation_version(path: Path):
    """The version recorded in an episode's annotation.json, or None when it has none (or it is unreadable)."""
    try:
        return json.loads((path / META_FILE).read_text()).get("annotation_version")
    except (OSError, ValueError, AttributeError):
        return None


def annotate_path(path: Path, force: bool = False) -> dict:
    """Annotate one episode folder unless it already is; returns a small report (or the error)."""
    try:
        episode = load_episode(path)
        if force or not is_annotated(path, episode):
            annotation = annotate_episode(episode)
            write_annotation(path, annotation)
            return {"path": str(path), "status": "annotated", "not_computed": annotation.meta["not_computed"]}
        return {"path": str(path), "status": "up_to_date"}
    except EpisodeError as err:
        # An annotation left from before the episode broke must not be read as valid.
        (path / META_FILE).unlink(missing_ok=True)
        return {"path": str(path), "status": "skipped", "reason": str(err)}


def annotate_runs(run_dirs: list[Path], workers: int = 1, force: bool = False, progress: bool = True,
                  cluster=None, warn=None) -> list[dict]:
    """Annotate every episode of the runs, K episodes at a time (on a Ray `cluster`'s actors if given);
    reports in episode order. Annotations of another version are refused (OutputExists) before any
    episode is touched, unless `force` (--overwrite) replaces them, each episode's set whole."""
    from wantofight.annotate.parallel import map_ordered
    from wantofight.outputs import OutputExists

    paths = [p for run in run_dirs for p in episode_dirs(run)]
    other = [p for p in paths if not force and annotation_version(p) not in (None, ANNOTATION_VERSION)]
    if other:
        raise OutputExists(other[0] / META_FILE, option="", what=f"annotations of version "
                           f"{annotation_version(other[0])} (this wtf writes {ANNOTATION_VERSION}; "
                           f"{len(other)} episode(s) like it)")
    return map_ordered(annotate_path, [(p, force) for p in paths], workers, "annotate", progress, cluster, warn)
