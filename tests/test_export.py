"""`wtf export --format lerobot`: the LeRobotDataset v3.0 layout, frames and actions equal to the
recording's, resampling that keeps every press, the clip export, resume, and bad input.

LeRobot's own loader is checked apart (bench/lerobot_check.sh): it pins an older torch than ours."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from annotate_helpers import keys_run
from datasets_helpers import small_dataset
from wantofight.cli import app
from wantofight.export import lerobot
from wantofight.export.lerobot import export_lerobot
from wantofight.export.sources import STATE_NAMES, ExportError
from wantofight.video import read_video

runner = CliRunner()
TAPS = ["10 - -", "1 A -", "1 B -", "12 - -", "1 - RIGHT", "1 - LEFT", "14 - -"]
"""Two one-row taps per player on consecutive rows: one of each pair lands on a row that a 30-fps
export drops, so only the union of the dropped and the kept row keeps both presses."""


@pytest.fixture(scope="module")
def run(recorded):
    return recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=120, fps=30, seed=5)


@pytest.fixture(scope="module")
def taps(recorded, tmp_path_factory):
    return keys_run(recorded, tmp_path_factory.mktemp("taps"), "taps", TAPS, state="Close", fps=60)


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("lr") / "lr"
    summary = export_lerobot(run, out, progress=False)
    return out, summary


def data(out: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted((out / "data").glob("*/*.parquet"))], ignore_index=True)


def episodes(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "meta/episodes/chunk-000/file-000.parquet")


def key_bits(masks) -> np.ndarray:
    return ((np.asarray(masks, dtype=np.uint16)[:, None] >> np.arange(16, dtype=np.uint16)) & 1).astype(np.float32)


# ------------------------------------------------------------------------------------------------

def test_layout_is_lerobot_v3(exported):
    out, summary = exported
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["total_episodes"] == summary["episodes"] == 2
    assert info["total_frames"] == summary["frames"] == 240
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    features = info["features"]
    assert features["observation.image"]["dtype"] == "video"
    assert features["observation.image"]["shape"] == [224, 240, 3]
    assert features["observation.image"]["info"]["video.fps"] == 30
    assert features["action"]["shape"] == [32] and features["action"]["names"][:2] == ["p1.UP", "p1.DOWN"]
    assert features["action"]["names"][16] == "p2.UP"
    assert features["observation.state"]["names"] == list(STATE_NAMES)
    for name in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert name in features
    rows = data(out)
    assert set(features) - {"observation.image"} == set(rows.columns)
    for i in range(2):
        assert (out / f"data/chunk-000/file-{i:03d}.parquet").is_file()
        assert (out / f"videos/observation.image/chunk-000/file-{i:03d}.mp4").is_file()
    tasks = pd.read_parquet(out / "meta/tasks.parquet")  # what LeRobot reads: indexed by the task text
    assert list(tasks.index) == ["duel match: P1 scripted vs P2 random"] and list(tasks.task_index) == [0]
    stats = json.loads((out / "meta/stats.json").read_text())
    assert np.asarray(stats["observation.image"]["mean"]).shape == (3, 1, 1)
    assert stats["action"]["count"] == [240] and len(stats["action"]["max"]) == 32
    assert (out / "README.md").read_text().startswith("---\nlicense: mit\n")
    assert not any(p.name.startswith(".") for p in out.rglob("*")), "a temporary file was left behind"


def test_episodes_frames_actions_and_state_equal_the_recording(run, exported):
    out, _ = exported
    rows, eps = data(out), episodes(out)
    assert list(eps.dataset_from_index) == [0, 120] and list(eps.dataset_to_index) == [120, 240]
    assert list(rows["index"]) == list(range(240))
    for e, folder in enumerate(sorted((run / "episodes").iterdir())):
        recorded = pq.read_table(folder / "frames.parquet").to_pandas()
        mine = rows[rows.episode_index == e]
        assert list(mine.frame_index) == list(range(120))
        assert np.allclose(mine.timestamp, np.arange(120) / 30)
        action = np.stack(mine.action.to_numpy())
        assert np.array_equal(action, np.concatenate([key_bits(recorded.p1_keys), key_bits(recorded.p2_keys)], 1))
        state = np.stack(mine["observation.state"].to_numpy())
        assert np.array_equal(state[:, 0], recorded.p1_x) and np.array_equal(state[:, 9], recorded.p2_health)
        assert list(mine["wtf.source_row"]) == list(range(120))
        video = out / f"videos/observation.image/chunk-000/file-{e:03d}.mp4"
        assert np.array_equal(read_video(video), read_video(folder / "video.mp4"))
        assert eps.loc[e, "wtf/episode_id"] == folder.name


def test_a_lower_frame_rate_keeps_every_press_between_kept_frames(taps, tmp_path):
    """Ablation: keep only the kept row's own keys (no union over the dropped row) and the taps on
    dropped rows vanish: this test goes red."""
    out = tmp_path / "lr30"
    summary = export_lerobot(taps, out, fps=30, progress=False)
    folder = sorted((taps / "episodes").iterdir())[0]
    recorded = pq.read_table(folder / "frames.parquet").to_pandas()
    assert summary["fps"] == 30 and summary["frames"] == (len(recorded) + 1) // 2
    rows = data(out)
    action = np.stack(rows.action.to_numpy())
    names = json.loads((out / "meta/info.json").read_text())["features"]["action"]["names"]
    pressed = {names[i] for i in np.flatnonzero(action.any(0))}
    assert pressed == {"p1.A", "p1.B", "p2.LEFT", "p2.RIGHT"}
    # each exported row j is the union of recorded rows 2j-1 and 2j
    p1 = recorded.p1_keys.to_numpy()
    union = p1[0::2] | np.concatenate([[0], p1[1::2]])[: len(p1[0::2])]
    assert np.array_equal(action[:, :16], key_bits(union))
    frames = read_video(out / "videos/observation.image/chunk-000/file-000.mp4")
    assert np.array_equal(frames, read_video(folder / "video.mp4")[0::2])
    assert list(rows["wtf.source_row"]) == list(range(0, len(recorded), 2))


def test_a_curriculum_dataset_exports_one_episode_per_clip(recorded, tmp_path_factory, tmp_path):
    ds = small_dataset(recorded, tmp_path_factory)
    out = tmp_path / "clips"
    summary = export_lerobot(ds, out, tiers="single,dual", progress=False)
    eps = episodes(out)
    shard = pd.concat([pd.read_parquet(p) for p in sorted(ds.glob("*-action/*.parquet"))], ignore_index=True)
    assert summary["episodes"] == len(shard) == len(eps)
    assert set(eps["wtf/tier"]) == {"single-action", "dual-action"}
    rows = data(out)
    tasks = pd.read_parquet(out / "meta/tasks.parquet")
    for _, clip in shard.iterrows():
        ep = eps[eps["wtf/clip_id"] == clip.clip_id].iloc[0]
        assert ep.length == clip.num_frames
        mine = rows[rows.episode_index == ep.episode_index]
        action = np.stack(mine.action.to_numpy())
        assert np.array_equal(action[:, 16:], key_bits(clip.p2_keys))
        assert list(mine["wtf.source_row"]) == list(range(clip.start_frame, clip.start_frame + clip.num_frames))
        task = tasks.index[mine.task_index.iloc[0]]
        if clip.tier == "single-action":
            actor = int(clip.actor)
            move = clip.p1_move if actor == 1 else clip.p2_move
            assert task == f"P{actor} {move} while P{3 - actor} stands still"
        video = out / f"videos/observation.image/chunk-000/file-{ep.episode_index:03d}.mp4"
        assert hashlib.sha1(video.read_bytes()).digest() == hashlib.sha1(clip.video).digest()


def test_an_interrupted_overwrite_keeps_the_old_output_and_continues_where_it_stopped(run, exported, tmp_path,
                                                                                     monkeypatch):
    out = tmp_path / "lr"
    original = lerobot._Writer.write
    calls = []

    def write_then_stop(self, source, fps):
        if len(calls) == 1:
            raise KeyboardInterrupt
        calls.append(source.key)
        original(self, source, fps)

    monkeypatch.setattr(lerobot._Writer, "write", write_then_stop)
    out.mkdir()
    (out / "old.txt").write_text("an earlier export")
    with pytest.raises(KeyboardInterrupt):
        export_lerobot(run, out, progress=False, overwrite=True)
    assert [p.name for p in out.iterdir()] == ["old.txt"], "an interrupted --overwrite touched the old output"
    monkeypatch.setattr(lerobot._Writer, "write", original)
    with pytest.raises(ExportError, match="other settings"):
        export_lerobot(run, out, fps=15, progress=False, overwrite=True)
    summary = export_lerobot(run, out, progress=False, overwrite=True)
    assert summary["resumed"] == 1 and summary["episodes"] == 2
    assert not (out / "old.txt").exists() and not any(p.name.startswith(".") for p in out.parent.iterdir())
    whole, _ = exported
    for rel in ("meta/info.json", "meta/stats.json", "data/chunk-000/file-001.parquet",
                "meta/episodes/chunk-000/file-000.parquet"):
        assert (out / rel).read_bytes() == (whole / rel).read_bytes(), rel


# ------------------------------------------------------------------------------------------------
# The command and bad input

def test_cli_prints_episodes_frames_and_features(run, tmp_path):
    result = runner.invoke(app, ["export", str(run), "--format", "lerobot", "--out", str(tmp_path / "x"),
                                 "--no-progress"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    line = result.output.strip()
    assert "\n" not in line
    assert line.startswith(f"wrote {(tmp_path / 'x').resolve()}: 2 episodes (train 0:2), 240 frames at 30 fps")
    assert "features: observation.image, observation.state, action," in line


@pytest.mark.parametrize("case", ["format", "mixed", "neither", "not-empty", "tier-of-run", "fps"])
def test_bad_input_is_one_line_and_writes_nothing(run, tmp_path, case):
    out = tmp_path / "out"
    args = [str(run), "--format", "lerobot", "--out", str(out)]
    expect = {"format": "--format 'parquet': expected one of lerobot", "mixed": "holds both a recording run",
              "neither": "neither a recording run", "not-empty": "already exists and is not empty: add --overwrite",
              "tier-of-run": "--tier applies to a curriculum dataset", "fps": "--fps 7: a recording at 30 fps"}[case]
    if case == "format":
        args[2] = "parquet"
    elif case in ("mixed", "neither"):
        src = tmp_path / "src"
        (src / "episodes").mkdir(parents=True)
        if case == "mixed":
            (src / "manifest.json").write_text("{}")
        else:
            (src / "episodes").rmdir()
        args[0] = str(src)
    elif case == "not-empty":
        out.mkdir()
        (out / "mine.txt").write_text("keep me")
    elif case == "tier-of-run":
        args += ["--tier", "single"]
    else:
        args += ["--fps", "7"]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = runner.invoke(app, ["export", *args, "--no-progress"], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], result.output
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    if case == "not-empty":
        assert (out / "mine.txt").read_text() == "keep me"
