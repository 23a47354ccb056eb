"""`DS_DIR/manifest.json`: what a curriculum holds and how it was made.

Deterministic: built only from inputs and options (no clock, no worker count, no output path),
keys sorted, so the same inputs and seed give a byte-identical file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from wantofight.annotate.clips import MIN_ACTION_FRAMES
from wantofight.annotate.shards import SCHEMA_VERSION, TMP_PREFIX
from wantofight.collect.keys import LAYOUT_VERSION

MANIFEST_FILE = "manifest.json"


def build_manifest(run_dirs, episodes, good, splits, selected, shards, coverage, dropped, excluded, options,
                   ram_names) -> dict:
    counts = {tier: {"train": 0, "val": 0} for tier in options.tiers}
    moves: dict[str, dict[str, int]] = {}
    for ep in good:
        split = splits[ep.uid]
        for plan in selected[ep.uid]:
            counts[plan["tier"]][split] += 1
            for move in (plan["p1_move"], plan["p2_move"]):
                if move is not None:
                    per_tier = moves.setdefault(move, {})
                    per_tier[plan["tier"]] = per_tier.get(plan["tier"], 0) + 1
    events: dict[str, int] = {}
    for ep in good:
        for name, count in ep.event_counts.items():
            events[name] = events.get(name, 0) + count
    not_computed = sorted({(item["what"], item["reason"]) for ep in good for item in ep.not_computed})
    options_dict = asdict(options)
    options_dict["stride"] = options.window_stride
    options_dict["tiers"] = list(options.tiers)
    return {
        "schema_version": SCHEMA_VERSION,
        "key_layout_version": LAYOUT_VERSION,
        "build_options": options_dict,
        "counts": counts,
        "clips": sum(len(v) for v in selected.values() if v) if good else 0,
        "moves": moves,
        "single_action_coverage": coverage,
        "events": events,
        "episodes": {
            "used": len(good),
            "skipped": [{"path": ep.path, "reason": ep.skipped} for ep in episodes if ep.skipped],
            "duplicates": [{"path": ep.path, "same_as": ep.duplicate_of} for ep in episodes if ep.duplicate_of],
            "split": {split: sorted(f"{ep.run}/{ep.episode_id}" for ep in good if splits[ep.uid] == split)
                      for split in ("train", "val")},
        },
        "dropped": {"excluded": len(dropped["excluded"]), "balance": dropped["balance"],
                    "exclude_ids_not_found": len(set(excluded) - set(dropped["excluded"]))},
        "not_computed": [{"what": w, "reason": r} for w, r in not_computed],
        "ram_columns": [f"ram_{name}" for name in ram_names],
        "sources": sources(run_dirs, good),
        "shards": shards,
        "tiers": {tier: {"padded_frames": options.clip_frames}
                  | ({"min_action_frames": MIN_ACTION_FRAMES[tier]} if tier in MIN_ACTION_FRAMES else {})
                  for tier in options.tiers},
        "padding": "single-/dual-action clips hold only recorded rows; pad_before/pad_after copies of their "
                   "first/last (neutral) frame, with no keys, bring them to padded_frames",
    }


def sources(run_dirs, good) -> list[dict]:
    """Each input run: its settings (run.json) and the meta of every episode used."""
    out = []
    for run in run_dirs:
        run = Path(run)
        run_json = run / "run.json"
        settings = json.loads(run_json.read_text()) if run_json.is_file() else None
        episodes = {ep.episode_id: ep.info["meta"] for ep in good if Path(ep.path).parent.parent == run}
        out.append({"run": str(run), "name": run.name, "run_json": settings, "episodes": episodes})
    return out


def write_manifest(out: Path, manifest: dict) -> None:
    tmp = out / f"{TMP_PREFIX}{MANIFEST_FILE}"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / MANIFEST_FILE)


