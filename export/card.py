"""The dataset card (README.md) of an export, written from what was exported: counts per tier and
split, the tasks and moves, the policies that played, the alignment rule, the game and its licence."""

from __future__ import annotations

from collections import Counter

BUILTIN_LICENCE = {"duel": "mit"}
"""Games whose pictures may be shared: `duel` is written for wantofight and ships under its MIT licence."""


def dataset_card(info: dict, episodes: list[dict], skipped: list[dict], settings) -> str:
    games = sorted({e.get("game") or "?" for e in episodes})
    licence = BUILTIN_LICENCE.get(games[0], "other") if len(games) == 1 else "other"
    tiers = Counter(e["tier"] for e in episodes)
    frames = Counter()
    for e in episodes:
        frames[e["tier"]] += e["length"]
    splits = Counter(e["split"] for e in episodes)
    tasks = Counter(e["tasks"][0] for e in episodes)
    policies = Counter(f"P1 {e.get('p1_policy')} vs P2 {e.get('p2_policy')}" for e in episodes)
    fps = info["fps"]
    lines = [
        "---",
        f"license: {licence}",
        "task_categories:",
        "- robotics",
        "tags:",
        "- LeRobot",
        "- wantofight",
        "- fighting-game",
        "- world-model",
        "configs:",
        "- config_name: default",
        "  data_files: data/*/*.parquet",
        "---",
        "",
        f"# {', '.join(games)}: two players' keys and frames, exported by wantofight",
        "",
        f"A LeRobotDataset {info['codebase_version']} of {info['total_episodes']:,} episodes and "
        f"{info['total_frames']:,} frames at {fps} fps ({info['total_frames'] / fps / 60:.1f} minutes), "
        f"{info['features']['observation.image']['shape'][1]}x{info['features']['observation.image']['shape'][0]} "
        f"pixels, exported from a {'recording run' if settings.kind == 'run' else 'curriculum dataset'} by "
        "`wtf export --format lerobot`. Load it with "
        "`LeRobotDataset(REPO_ID, root=THIS_FOLDER)`.",
        "",
        "## Alignment",
        "",
        "Row `j` holds frame `j` (`observation.image`), `observation.state[j]` (RAM read with that frame) and",
        "`action[j]`: the keys both players held during the emulator steps that led from frame `j - 1` to",
        "frame `j`, so **the action of a row caused that row's frame**; row 0's action is all zeros (the",
        "first frame after the savestate). " + (
            "Every recorded row is kept." if all(e["source_rows"] == e["length"] for e in episodes) else
            "Rows were kept every few recorded rows (`--fps`); a kept row's action is the union of the key "
            "rows since the previous kept frame."),
        "The screen of the NES shows RAM one frame late: `observation.state[j]` may describe the picture of",
        "row `j + 1`. Nothing is shifted to hide it.",
        "",
        "## Features",
        "",
        "| feature | shape | meaning |",
        "|---|---|---|",
        "| `observation.image` | H x W x 3 | the emulator's screen, lossless H.264 in RGB (`libx264rgb`, crf 0) |",
        "| `action` | 32 | P1's 16 key slots then P2's (0/1), in the slot order UP DOWN LEFT RIGHT A B C D X Y Z "
        "L R START SELECT MODE |",
        "| `observation.state` | 10 | per player x, y, facing, state, health (RAM; NaN where a game lacks one) |",
        "| `wtf.effective` | 2 | whether each player's new presses could act on this row |",
        "| `wtf.p1_action`, `wtf.p2_action` | 1 | what each fighter does on this row (idle, walk_forward, "
        "attack:&lt;move&gt;, ...) |",
        "| `wtf.events` | 1 | events holding this row, comma-separated (hit, block, side_swap, overlap, ...) |",
        "| `wtf.tier`, `wtf.source_episode`, `wtf.source_row` | 1 | the curriculum tier, and the recorded "
        "episode and row this row comes from |",
        "",
        "## Contents",
        "",
        "| tier | episodes | frames |",
        "|---|---|---|",
        *[f"| {tier} | {tiers[tier]:,} | {frames[tier]:,} |" for tier in sorted(tiers)],
        "",
        "Splits (episode ranges): " + ", ".join(f"{k} `{v}` ({splits[k]:,})" for k, v in info["splits"].items())
        + ".",
        "",
        "| task | episodes |",
        "|---|---|",
        *[f"| {task} | {n:,} |" for task, n in tasks.most_common(30)],
        *([f"| … {len(tasks) - 30} more tasks | |"] if len(tasks) > 30 else []),
        "",
        "| players | episodes |",
        "|---|---|",
        *[f"| {who} | {n:,} |" for who, n in policies.most_common(20)],
        "",
        *([f"{len(skipped)} broken source episodes were skipped."] if skipped else []),
        "## Game and licence",
        "",
        (f"`{games[0]}` is the game built into wantofight (an NES homebrew written for it); its ROM and "
         "pictures are under the project's MIT licence." if licence == "mit" else
         f"The pictures come from {', '.join(games)}, whose ROM belongs to its rights holder: check that you "
         "may share its screens before publishing this dataset."),
        "",
    ]
    return "\n".join(lines)
