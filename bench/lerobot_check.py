"""Check a `wtf export --format lerobot` with LeRobot's own loader (docs/export.md, "Checked with LeRobot").

LeRobot pins a torch older than ours, so it runs in an environment of its own; `bench/lerobot_check.sh`
makes that environment and runs both halves of this script:

    python bench/lerobot_check.py reference OUT_DIR [ROWS]   # our environment: record, export, write the truth
    LEROBOT_PYTHON bench/lerobot_check.py verify OUT_DIR  # LeRobot's environment: load and compare

`reference` records a small run with the project's collector (two scripted-vs-random episodes of
ROWS rows, default 400, at 60 fps), builds a curriculum from it, exports the run at 60 and 30 fps and the curriculum, and writes
`truth.json`: per export, the episode lengths and, per exported row, the SHA-1 of the frame our
decoder reads from the *recording* (not from the export) at that row, and the action row computed
from the recording's key masks. `verify` imports nothing of wantofight: it loads each export with
`LeRobotDataset(repo_id, root=DIR)` and checks the number of frames and episodes, each episode's
boundaries, every `action` row and every decoded frame, byte for byte, with each video backend
LeRobot offers here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

EXPORTS = {"run-60": {"src": "run", "fps": None}, "run-30": {"src": "run", "fps": 30},
           "clips": {"src": "ds", "fps": None}}


def reference(out: Path, rows: int = 400) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    from wantofight.annotate.curriculum import BuildOptions, build_curriculum
    from wantofight.video import read_video
    from wantofight.collect.run import RunSettings, collect
    from wantofight.export.lerobot import export_lerobot

    out.mkdir(parents=True, exist_ok=False)
    run = out / "run"
    collect(RunSettings(policy="scripted", p2_policy="random", episodes=2, max_frames=rows, fps=60, seed=3), run,
            workers=1, progress=False)
    build_curriculum([run], out / "ds", BuildOptions(clip_frames=33, val_fraction=0.5, seed=0), workers=1,
                     progress=False)
    truth = {}
    for name, spec in EXPORTS.items():
        export_lerobot(out / spec["src"], out / name, fps=spec["fps"], progress=False)
        episodes = pq.read_table(out / name / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
        lengths, frames, actions = [], [], []
        for episode in episodes:
            source = _source_rows(out, spec["src"], episode)
            video, p1, p2, fps = source
            k = 1 if spec["fps"] is None else fps // spec["fps"]
            rows = np.arange(0, len(p1), k)
            lengths.append(len(rows))
            decoded = read_video(video)
            frames += [hashlib.sha1(decoded[r].tobytes()).hexdigest() for r in rows]
            for r in rows:
                back = np.maximum(r - np.arange(k), 0)
                masks = [int(np.bitwise_or.reduce(p1[back])), int(np.bitwise_or.reduce(p2[back]))]
                actions.append([float((m >> i) & 1) for m in masks for i in range(16)])
        truth[name] = {"lengths": lengths, "frames": frames, "actions": actions}
    (out / "truth.json").write_text(json.dumps(truth))
    print(f"wrote {len(EXPORTS)} exports and truth.json in {out}")


def _source_rows(out: Path, src: str, episode: dict):
    """(video, p1 masks, p2 masks, fps) of the recorded rows behind one exported episode."""
    import numpy as np
    import pyarrow.parquet as pq

    if src == "run":
        folder = out / "run" / "episodes" / episode["wtf/episode_id"]
        table = pq.read_table(folder / "frames.parquet")
        meta = json.loads((folder / "meta.json").read_text())
        return (folder / "video.mp4", table.column("p1_keys").to_numpy(), table.column("p2_keys").to_numpy(),
                meta["fps"])
    for shard in sorted((out / "ds").glob("*/*.parquet")):
        for row in pq.read_table(shard).to_pylist():
            if row["clip_id"] == episode["wtf/clip_id"]:
                return (row["video"], np.asarray(row["p1_keys"], dtype=np.uint16),
                        np.asarray(row["p2_keys"], dtype=np.uint16), row["fps"])
    raise SystemExit(f"clip {episode['wtf/clip_id']} not found in {out / 'ds'}")


def verify(out: Path) -> None:
    import importlib.metadata

    import numpy as np
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    truth = json.loads((out / "truth.json").read_text())
    backends = [b for b in ("torchcodec", "pyav") if _backend_works(b)]
    print(f"lerobot {importlib.metadata.version('lerobot')}, torch {torch.__version__}, backends: "
          f"{', '.join(backends)}")
    failures = 0
    for name, want in truth.items():
        for backend in backends:
            ds = LeRobotDataset(f"wantofight/{name}", root=out / name, video_backend=backend)
            problems = []
            if ds.num_frames != len(want["frames"]):
                problems.append(f"{ds.num_frames} frames, want {len(want['frames'])}")
            if ds.num_episodes != len(want["lengths"]):
                problems.append(f"{ds.num_episodes} episodes, want {len(want['lengths'])}")
            starts = np.cumsum([0] + want["lengths"])
            for e in range(min(ds.num_episodes, len(want["lengths"]))):
                ep = ds.meta.episodes[e]
                if (ep["dataset_from_index"], ep["dataset_to_index"]) != (starts[e], starts[e + 1]):
                    problems.append(f"episode {e} spans {ep['dataset_from_index']}:{ep['dataset_to_index']}, "
                                    f"want {starts[e]}:{starts[e + 1]}")
            bad_frames = bad_actions = bad_episode = 0
            for i in range(min(ds.num_frames, len(want["frames"]))):
                item = ds[i]
                image = item["observation.image"]  # (3, H, W) float in [0, 1]
                rgb = (image.permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
                bad_frames += hashlib.sha1(np.ascontiguousarray(rgb).tobytes()).hexdigest() != want["frames"][i]
                bad_actions += item["action"].tolist() != want["actions"][i]
                bad_episode += not (starts[item["episode_index"]] <= i < starts[item["episode_index"] + 1])
            for what, n in (("frames differ", bad_frames), ("action rows differ", bad_actions),
                            ("rows in the wrong episode", bad_episode)):
                if n:
                    problems.append(f"{n} {what}")
            status = "ok" if not problems else "FAILED: " + "; ".join(problems)
            print(f"{name:8s} {backend:10s} {ds.num_episodes} episodes, {ds.num_frames} frames, "
                  f"every frame and action row compared: {status}")
            failures += bool(problems)
    if failures:
        raise SystemExit(f"{failures} check(s) failed")


def _backend_works(name: str) -> bool:
    try:
        if name == "torchcodec":
            import torchcodec.decoders  # noqa: F401  (needs FFmpeg's shared libraries)
        else:
            import av  # noqa: F401
        return True
    except Exception as err:  # noqa: BLE001 - any failure to load a backend means: not checked with it
        print(f"video backend {name} unavailable here: {str(err).splitlines()[0][:120]}")
        return False


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("reference", "verify"):
        raise SystemExit("usage: lerobot_check.py reference OUT_DIR [ROWS] | verify OUT_DIR")
    if sys.argv[1] == "reference":
        reference(Path(sys.argv[2]), *map(int, sys.argv[3:]))
    else:
        verify(Path(sys.argv[2]))
