"""`wtf stats`: what a dataset covers. Reads every shard without its video bytes.

The numbers (all in one JSON-able dict, `dataset_stats`):
- `clips`: total; `tiers`: clips per tier × split;
- `single_action`: clips per move × side (`left`/`right`); `dual_action`: clips per first move per player;
- `events`: distinct events per type (an event touching several clips counts once, keyed by episode
  and span); `side_swaps`: per kind (`jump_over` / `cross_through`); `clips_with_event`: clips
  touching each type;
- `keys`: per player and slot, new presses and held frames over all clip rows;
- `effective`: per player, rows with a new press, how many of them the game could act on, the ratio;
- `lengths`: per tier min / median / max recorded frames and a histogram;
- `policies`: clips per `p1_policy vs p2_policy` and per policy per player.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from wantofight.annotate.inspect_clip import shard_files
from wantofight.collect.keys import SLOTS

COLUMNS = (
    "clip_id", "tier", "split", "episode_uid", "p1_policy", "p2_policy", "num_frames", "actor", "side",
    "p1_move", "p2_move", "p1_keys", "p2_keys", "p1_pressed", "p2_pressed", "p1_effective", "p2_effective",
    "events", "event_types",
)  # fmt: skip
LENGTH_BINS = (0, 8, 16, 32, 64, 96, 128, 161, 256, 512, 1024)
"""Left edges of the clip-length histogram's bins, the same for every tier (161: the paper's window);
the last bin is open (`1024+`)."""


def dataset_stats(ds_dir: Path, progress=None) -> dict:
    """Coverage statistics of DS_DIR (see the module docstring); `progress(n)` is called per batch."""
    import pyarrow.parquet as pq

    tiers: dict = defaultdict(Counter)
    single: dict = defaultdict(Counter)
    dual = {"p1": Counter(), "p2": Counter()}
    events: dict = {}
    clips_with = Counter()
    presses = np.zeros((2, 16), dtype=np.int64)
    held = np.zeros((2, 16), dtype=np.int64)
    effective = np.zeros((2, 2), dtype=np.int64)  # [player, (new-press rows judged, effective ones)]
    lengths: dict = defaultdict(list)
    pairs, per_player = Counter(), {"p1": Counter(), "p2": Counter()}
    total = 0
    bits = np.arange(16, dtype=np.uint16)
    for path in shard_files(ds_dir):
        parquet = pq.ParquetFile(path)
        names = [c for c in COLUMNS if c in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=256, columns=names):
            for clip in batch.to_pylist():
                total += 1
                tier = clip["tier"]
                tiers[tier][clip["split"]] += 1
                lengths[tier].append(clip["num_frames"])
                if tier == "single-action":
                    single[clip["p1_move"] or clip["p2_move"] or "?"][clip["side"] or "?"] += 1
                elif tier == "dual-action":
                    dual["p1"][clip["p1_move"] or "none"] += 1
                    dual["p2"][clip["p2_move"] or "none"] += 1
                for kind in clip["event_types"] or []:
                    clips_with[kind] += 1
                for e in clip["events"] or []:
                    key = (clip["episode_uid"], e["event"], e["start_frame"], e["end_frame"], tuple(e["players"] or ()))
                    events[key] = e
                pairs[f"{clip['p1_policy']} vs {clip['p2_policy']}"] += 1
                per_player["p1"][clip["p1_policy"]] += 1
                per_player["p2"][clip["p2_policy"]] += 1
                for p in (0, 1):
                    keys = np.asarray(clip[f"p{p + 1}_keys"], dtype=np.uint16)
                    new = np.asarray(clip[f"p{p + 1}_pressed"], dtype=np.uint16)
                    held[p] += ((keys[:, None] >> bits) & 1).sum(axis=0).astype(np.int64)
                    presses[p] += ((new[:, None] >> bits) & 1).sum(axis=0).astype(np.int64)
                    flags = clip[f"p{p + 1}_effective"] or []
                    judged = [f for f, n in zip(flags, new) if n and f is not None]
                    effective[p] += (len(judged), sum(judged))
            if progress is not None:
                progress(batch.num_rows)
    by_type = Counter(e["event"] for e in events.values())
    swaps = Counter(e["detail"] or "unknown" for e in events.values() if e["event"] == "side_swap")
    return {
        "dataset": str(Path(ds_dir)),
        "clips": total,
        "tiers": {t: {"train": c.get("train", 0), "val": c.get("val", 0)} for t, c in sorted(tiers.items())},
        "single_action": {m: dict(sorted(s.items())) for m, s in sorted(single.items())},
        "dual_action": {p: dict(sorted(c.items())) for p, c in dual.items()},
        "events": dict(sorted(by_type.items())),
        "side_swaps": dict(sorted(swaps.items())),
        "clips_with_event": dict(sorted(clips_with.items())),
        "keys": {
            f"p{p + 1}": {slot: {"presses": int(presses[p, i]), "held_frames": int(held[p, i])}
                          for i, slot in enumerate(SLOTS)}
            for p in (0, 1)
        },
        "effective": {
            f"p{p + 1}": {"new_press_rows": int(effective[p, 0]), "effective": int(effective[p, 1]),
                          "ratio": round(float(effective[p, 1] / effective[p, 0]), 4) if effective[p, 0] else None}
            for p in (0, 1)
        },
        "lengths": {t: length_summary(v) for t, v in sorted(lengths.items())},
        "policies": {"pairs": dict(pairs.most_common()),
                     "p1": dict(per_player["p1"].most_common()), "p2": dict(per_player["p2"].most_common())},
    }  # fmt: skip


def length_bin_names() -> list[str]:
    """`0-7`, `8-15`, ..., `1024+`: the names of LENGTH_BINS, in order."""
    return [f"{a}-{b - 1}" for a, b in zip(LENGTH_BINS, LENGTH_BINS[1:])] + [f"{LENGTH_BINS[-1]}+"]


def length_summary(values: list[int]) -> dict:
    """min / median / max and a histogram over LENGTH_BINS (non-empty bins, in order)."""
    array = np.asarray(values)
    counts = np.bincount(np.searchsorted(LENGTH_BINS, array, side="right") - 1, minlength=len(LENGTH_BINS))
    hist = {name: int(c) for name, c in zip(length_bin_names(), counts) if c}
    return {"min": int(array.min()), "median": float(np.median(array)), "max": int(array.max()),
            "histogram": hist}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Terminal and plots


def print_stats(stats: dict, console) -> None:
    """A rich summary: one small table per question."""
    from rich.table import Table

    def table(title: str, *columns: str) -> Table:
        t = Table(title=title, title_justify="left", header_style="bold")
        for c in columns:
            t.add_column(c, justify="right" if c not in columns[:1] else "left")
        return t

    console.print(f"[bold]{stats['dataset']}[/]: {stats['clips']} clips")
    t = table("Clips per tier", "tier", "train", "val")
    for tier, c in stats["tiers"].items():
        t.add_row(tier, str(c["train"]), str(c["val"]))
    console.print(t)
    if stats["single_action"]:
        t = table("Single-action clips per move and side", "move", "left", "right")
        for move, sides in stats["single_action"].items():
            t.add_row(move, str(sides.get("left", 0)), str(sides.get("right", 0)))
        console.print(t)
    if any(stats["dual_action"].values()):
        moves = sorted(set(stats["dual_action"]["p1"]) | set(stats["dual_action"]["p2"]))
        t = table("Dual-action clips per first move", "move", "p1", "p2")
        for move in moves:
            t.add_row(move, str(stats["dual_action"]["p1"].get(move, 0)), str(stats["dual_action"]["p2"].get(move, 0)))
        console.print(t)
    t = table("Events", "event", "distinct", "clips")
    for kind in sorted(set(stats["events"]) | set(stats["clips_with_event"])):
        name = kind
        if kind == "side_swap" and stats["side_swaps"]:
            name += " (" + ", ".join(f"{k} {v}" for k, v in stats["side_swaps"].items()) + ")"
        t.add_row(name, str(stats["events"].get(kind, 0)), str(stats["clips_with_event"].get(kind, 0)))
    console.print(t)
    t = table("Key presses per slot (new presses / held frames)", "slot", "p1", "p2")
    for slot in SLOTS:
        p1, p2 = stats["keys"]["p1"][slot], stats["keys"]["p2"][slot]
        if p1["held_frames"] or p2["held_frames"]:
            t.add_row(slot, f"{p1['presses']} / {p1['held_frames']}", f"{p2['presses']} / {p2['held_frames']}")
    console.print(t)
    t = table("Effective presses", "player", "rows with a new press", "effective", "ratio")
    for p, e in stats["effective"].items():
        t.add_row(p, str(e["new_press_rows"]), str(e["effective"]), "-" if e["ratio"] is None else f"{e['ratio']:.1%}")
    console.print(t)
    t = table("Clip length (recorded frames)", "tier", "min", "median", "max", "histogram")
    for tier, s in stats["lengths"].items():
        hist = "  ".join(f"{k}: {v}" for k, v in s["histogram"].items())
        t.add_row(tier, str(s["min"]), f"{s['median']:g}", str(s["max"]), hist)
    console.print(t)
    t = table("Source policies", "p1 vs p2", "clips")
    for pair, n in stats["policies"]["pairs"].items():
        t.add_row(pair, str(n))
    console.print(t)


def write_plots(stats: dict, out_dir: Path) -> list[Path]:
    """PNG bar charts (matplotlib, Agg) into out_dir; returns the files written. Grouped bars stand side
    by side, never over each other, and legends sit outside the axes, so no bar is hidden."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise ValueError("--plots needs matplotlib: pip install -e \".[curate]\"") from None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def figure(width: float):
        fig, ax = plt.subplots(figsize=(width, 4), layout="constrained")
        return fig, ax

    def save(fig, name: str) -> None:
        path = out_dir / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    def bars(ax, groups: dict[str, dict], labels: list[str], title: str, rotation: int = 60) -> None:
        width = 0.8 / max(1, len(groups))
        x = np.arange(len(labels))
        for i, (name, values) in enumerate(groups.items()):
            ax.bar(x + i * width, [values.get(label, 0) for label in labels], width, label=name)
        ax.set_xticks(x + width * (len(groups) - 1) / 2, labels, rotation=rotation,
                      ha="right" if rotation else "center", fontsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts
        ax.set_title(title)
        if len(groups) > 1:  # beside the plot, where it cannot cover a bar
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, fontsize=8)

    tiers = list(stats["tiers"])
    fig, ax = figure(6)
    bars(ax, {s: {t: stats["tiers"][t][s] for t in tiers} for s in ("train", "val")}, tiers, "Clips per tier")
    save(fig, "tiers.png")
    if stats["single_action"]:
        moves = list(stats["single_action"])
        fig, ax = figure(max(6, len(moves) * 0.5))
        sides = {side: {m: stats["single_action"][m].get(side, 0) for m in moves} for side in ("left", "right")}
        bars(ax, sides, moves, "Single-action clips per move and side")
        save(fig, "moves.png")
    kinds = sorted(stats["events"])
    if kinds:
        fig, ax = figure(max(6, len(kinds) * 0.6))
        bars(ax, {"distinct": stats["events"], "clips": stats["clips_with_event"]}, kinds, "Events per type")
        save(fig, "events.png")
    fig, ax = figure(8)
    bars(ax, {p: {s: v["presses"] for s, v in stats["keys"][p].items()} for p in ("p1", "p2")}, list(SLOTS),
         "New key presses per slot")
    save(fig, "keys.png")
    used = {name for s in stats["lengths"].values() for name in s["histogram"]}
    names = [name for name in length_bin_names() if name in used]  # numeric order, one set for every tier
    fig, ax = figure(7)
    bars(ax, {tier: s["histogram"] for tier, s in stats["lengths"].items()}, names,
         "Clip length (recorded frames) per tier", rotation=0)
    ax.set_xlabel("frames")
    save(fig, "lengths.png")
    pairs = stats["policies"]["pairs"]
    fig, ax = figure(6)
    ax.barh(list(pairs), list(pairs.values()))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Clips per source policy (p1 vs p2)")
    save(fig, "policies.png")
    return written


def stats_json(stats: dict) -> str:
    return json.dumps(stats, indent=2, sort_keys=False)
