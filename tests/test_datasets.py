"""`ClipDataset` and `make_loader` on a curriculum the test builds with the project's own tools."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from datasets_helpers import CLIP_FRAMES, masks, shard_rows, small_dataset
from wantofight.annotate.video import decode_mp4
from wantofight.datasets.clip_dataset import ClipDataset, DatasetError
from wantofight.datasets.frames import REF_CROP
from wantofight.datasets.loader import frames_to_model, make_loader
from wantofight.datasets.sampler import CurriculumSampler, CurriculumSchedule
from wantofight.video import read_video

NATIVE = (224, 240)


@pytest.fixture(scope="module")
def ds_dir(recorded, tmp_path_factory):
    return small_dataset(recorded, tmp_path_factory)


def test_items_have_the_documented_shapes_and_dtypes(ds_dir):
    ds = ClipDataset(ds_dir, "train", frames=17, size=(384, 512), ref_size=224)
    assert len(ds) == len(ds.item_tiers) > 0 and set(ds.item_tiers) == {"single-action", "dual-action", "full-match"}
    for i in (0, ds.item_tiers.index("dual-action"), len(ds) - 1):
        item = ds[(i, 7)]
        assert item["frames"].shape == (17, 3, 384, 512) and item["frames"].dtype == torch.float32
        assert item["frames"].min() >= -1 and item["frames"].max() <= 1
        assert item["keys"].shape == (17, 2, 16) and item["keys"].dtype == torch.float32
        assert item["effective"].shape == (17, 2) and item["effective"].dtype == torch.bool
        assert item["padding"].shape == (17,) and item["padding"].dtype == torch.bool
        assert len(item["actions"]) == 17 and all(len(pair) == 2 for pair in item["actions"])
        assert item["ref_images"].shape == (2, 3, 224, 224) and item["ref_images"].dtype == torch.float32
        assert item["tier"] == ds.item_tiers[i] and isinstance(item["clip_id"], str) and item["step"] == 7
        assert item["meta"]["game"] == "duel" and item["skipped"] == 0
        assert not torch.equal(item["ref_images"][0], item["ref_images"][1])  # two different fighters
    assert torch.equal(ds[3]["keys"], ds[(3, 0)]["keys"]) and ds[3]["start"] == ds[(3, 0)]["start"]


def test_bad_arguments_fail_with_clear_messages(ds_dir, tmp_path):
    with pytest.raises(ValueError, match="1 \\+ 8k"):
        ClipDataset(ds_dir, frames=32)
    with pytest.raises(ValueError, match="shorter than frames=41"):
        ClipDataset(ds_dir, frames=41)  # full-match windows are 33 frames and never padded
    assert len(ClipDataset(ds_dir, tiers=["single-action", "dual"], frames=41)) > 0  # action clips are padded
    with pytest.raises(ValueError, match="valid tiers"):
        ClipDataset(ds_dir, tiers=["solo"])
    with pytest.raises(ValueError, match="valid splits"):
        ClipDataset(ds_dir, split="test")
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        ClipDataset(tmp_path)


def test_a_window_shows_its_source_rows_keys_labels_and_frames(ds_dir):
    """Keys, labels, effective flags and pixels of a sampled window equal the recording's rows."""
    ds = ClipDataset(ds_dir, "train", frames=CLIP_FRAMES, size=NATIVE, seed=5)
    rows = shard_rows(ds_dir)
    episodes = {}
    checked = {"single-action": 0, "dual-action": 0, "full-match": 0}
    for i in range(0, len(ds), 3):
        item = ds[(i, 11)]
        row = rows[item["clip_id"]]
        meta = json.loads(row["source_meta"])
        run = next(r for r in _runs(ds_dir) if r.name == row["run"])
        path = run / "episodes" / row["episode_id"]
        if path not in episodes:
            episodes[path] = (pq.read_table(path / "frames.parquet").to_pydict(), read_video(path / "video.mp4"))
        frames, video = episodes[path]
        assert meta["episode_id"] == row["episode_id"]
        n, start = row["num_frames"], item["start"]
        t = np.arange(start, start + CLIP_FRAMES)
        recorded = (t >= 0) & (t < n)
        assert np.array_equal(item["padding"].numpy(), ~recorded)
        episode_rows = row["start_frame"] + np.clip(t, 0, n - 1)
        got = masks(item["keys"].numpy())  # (T, 2)
        for p in (1, 2):
            want = np.asarray(frames[f"p{p}_keys"])[episode_rows]
            want[~recorded] = 0  # padding holds no keys
            assert np.array_equal(got[:, p - 1], want), (item["clip_id"], p)
            labels = [a[p - 1] for a in item["actions"]]
            assert labels == [row[f"p{p}_action"][r] for r in np.clip(t, 0, n - 1)]
            assert item["effective"][:, p - 1].tolist() == [row[f"p{p}_effective"][r] for r in np.clip(t, 0, n - 1)]
        pixels = ((item["frames"].permute(0, 2, 3, 1).numpy() + 1) * 127.5).round().astype(np.uint8)
        assert np.array_equal(pixels, video[episode_rows])  # native size: the lossless pixels themselves
        checked[item["tier"]] += 1
    assert all(checked.values()), checked


def _runs(ds_dir):
    manifest = json.loads((ds_dir / "manifest.json").read_text())
    from pathlib import Path

    return [Path(s["run"]) for s in manifest["sources"]]


def test_windows_vary_with_the_step_and_stay_inside_the_clip(ds_dir):
    ds = ClipDataset(ds_dir, "train", tiers="single", frames=17, size=(32, 32))
    i = max(range(len(ds)), key=lambda k: ds.refs[k].num_frames)
    lo, hi = ds.start_range(i)
    n = ds.refs[i].num_frames
    assert lo <= 0 <= hi or n > 17
    starts = {ds[(i, step)]["start"] for step in range(40)}
    assert len(starts) > 1 and all(lo <= s <= hi for s in starts)
    assert ds[(i, 4)]["start"] == ds[(i, 4)]["start"]  # deterministic


def test_resize_keeps_the_whole_picture_hud_and_stage_edges(ds_dir):
    """stretch: every source row and column reaches the model frame (no crop); letterbox: the whole
    picture inside black bars."""
    native = ClipDataset(ds_dir, "train", tiers="full", frames=9, size=NATIVE)[0]
    src = native["frames"]  # (T, 3, 224, 240)
    stretched = ClipDataset(ds_dir, "train", tiers="full", frames=9, size=(384, 512))[0]["frames"]
    rows = np.floor((np.arange(384) + 0.5) * 224 / 384).astype(int)
    cols = np.floor((np.arange(512) + 0.5) * 240 / 512).astype(int)
    assert set(rows) == set(range(224)) and set(cols) == set(range(240))
    assert torch.equal(stretched, src[:, :, rows][:, :, :, cols])
    assert torch.equal(stretched[:, :, :2, :2], src[:, :, :1, :1].expand(-1, -1, 2, 2))  # HUD corner kept
    boxed = ClipDataset(ds_dir, "train", tiers="full", frames=9, size=(384, 512), resize="letterbox")[0]["frames"]
    width = round(240 * 384 / 224)  # 411
    left = (512 - width) // 2
    assert (boxed[..., :left] == -1).all() and (boxed[..., left + width:] == -1).all()
    inner = boxed[..., left:left + width]
    cols = nearest_columns(240, width)
    assert set(cols) == set(range(240))
    assert torch.equal(inner, src[:, :, rows][:, :, :, cols])
    u8 = ClipDataset(ds_dir, "train", tiers="full", frames=9, size=(384, 512), pixels="uint8")[0]["frames"]
    assert u8.dtype == torch.uint8 and u8.shape == (9, 3, 224, 240)
    assert torch.equal(frames_to_model(u8[None], (384, 512))[0], stretched)


def nearest_columns(src: int, dst: int) -> np.ndarray:
    """torch's nearest-exact source index per target column (floor((i + 0.5) src / dst), computed
    in float32, so a boundary may land one lower than in exact arithmetic)."""
    index = torch.nn.functional.interpolate(torch.arange(float(src)).view(1, 1, 1, src), size=(1, dst),
                                            mode="nearest-exact")[0, 0, 0].long().numpy()
    exact = np.floor((np.arange(dst) + 0.5) * src / dst).astype(int)
    assert np.abs(index - exact).max() <= 1
    return index


def test_reference_images_are_crops_of_each_fighter(ds_dir):
    ds = ClipDataset(ds_dir, "train", tiers="single", frames=17, size=NATIVE, ref_size=REF_CROP)
    rows = shard_rows(ds_dir)
    item = ds[0]
    row = rows[item["clip_id"]]
    refs = ((item["ref_images"].permute(0, 2, 3, 1).numpy() + 1) * 127.5).round().astype(np.uint8)
    frames = ((item["frames"].permute(0, 2, 3, 1).numpy() + 1) * 127.5).round().astype(np.uint8)
    found = []
    for p in (1, 2):
        hits = [(t, top, left) for t in range(len(frames)) for top in range(224 - REF_CROP + 1)
                for left in range(0, 240 - REF_CROP + 1)
                if frames[t, top, left, 0] == refs[p - 1][0, 0, 0]
                and np.array_equal(frames[t, top:top + REF_CROP, left:left + REF_CROP], refs[p - 1])]
        assert hits, f"P{p}'s reference is not a crop of the window"
        found.append(hits[0])
    # each crop is centred on its fighter (image column = x - 8, duel's screen offset)
    for p, (t, top, left) in zip((1, 2), found):
        xs = np.asarray(row[f"ram_p{p}_x"]) - 8
        assert any(abs(left + REF_CROP // 2 - x) <= 1 for x in xs) or left in (0, 240 - REF_CROP)


def test_reference_images_come_from_the_first_frame_of_the_window_only(ds_dir):
    """The references must not show where the fighters will be later in the window (the frames the model
    is asked to generate): they are cropped from the window's first frame, the prompt, which is all that
    inference has too. So a 17-frame window and a 1-frame window that start at the same row have the same
    references. Before, the crop came from the frame where both fighters stood idle furthest apart,
    anywhere in the window: the references of 11 of the 16 windows checked differed."""
    window = ClipDataset(ds_dir, "train", frames=17, size=NATIVE, ref_size=REF_CROP)
    prompt = ClipDataset(ds_dir, "train", frames=1, size=NATIVE, ref_size=REF_CROP)
    assert [r.clip_id for r in window.refs] == [r.clip_id for r in prompt.refs]
    windows = [(i, start) for i in range(0, len(window), max(1, len(window) // 8))
               for lo, hi in [window.start_range(i)] for start in sorted({lo, (lo + hi) // 2, hi})]
    differ = [(i, start) for i, start in windows
              if not torch.equal(window.load(i, start)["ref_images"], prompt.load(i, start)["ref_images"])]
    assert len(windows) >= 12 and not differ, f"{len(differ)} of {len(windows)} windows: {differ}"


def test_curators_exclude_lists_are_honoured(ds_dir, tmp_path):
    full = ClipDataset(ds_dir, "train", frames=9, size=(16, 16))
    dropped = [full.refs[0].clip_id, full.refs[-1].clip_id]
    exclude = tmp_path / "exclude.json"
    exclude.write_text(json.dumps({"version": 1, "clips": [{"clip_id": c, "reason": "glitch"} for c in dropped]}))
    trimmed = ClipDataset(ds_dir, "train", frames=9, size=(16, 16), exclude=exclude)
    assert len(trimmed) == len(full) - 2 and trimmed.stats["excluded"] == 2
    assert not set(dropped) & {r.clip_id for r in trimmed.refs}
    copy = shutil.copytree(ds_dir, tmp_path / "ds")
    (copy / "exclude.json").write_text(exclude.read_text())  # dropped in place by a curator
    assert len(ClipDataset(copy, "train", frames=9, size=(16, 16))) == len(full) - 2
    (copy / "exclude.json").write_text('{"clips": []}')
    with pytest.raises(ValueError, match="version"):
        ClipDataset(copy, "train", frames=9)


def test_a_corrupt_row_raises_naming_shard_and_row_or_is_skipped_and_counted(ds_dir, tmp_path):
    copy = shutil.copytree(ds_dir, tmp_path / "ds")
    shard = sorted((copy / "full-match").glob("train-*.parquet"))[0]
    table = pq.read_table(shard)
    videos = table.column("video").to_pylist()
    videos[1] = videos[1][:300]  # truncated MP4
    table = table.set_column(table.schema.get_field_index("video"), "video", pa.array(videos, pa.binary()))
    pq.write_table(table, shard, row_group_size=8)
    bad_id = table.column("clip_id")[1].as_py()
    ds = ClipDataset(copy, "train", tiers="full", frames=9, size=(16, 16))
    i = next(k for k, r in enumerate(ds.refs) if r.clip_id == bad_id)
    with pytest.raises(DatasetError, match=f"{shard.name} row 1 .*{bad_id}"):
        ds[i]
    lenient = ClipDataset(copy, "train", tiers="full", frames=9, size=(16, 16), skip_corrupt=True)
    with pytest.warns(UserWarning, match="row 1"):
        item = lenient[i]
    assert item["skipped"] == 1 and item["clip_id"] != bad_id and item["tier"] == "full-match"
    assert len(lenient.skipped) == 1 and "row 1" in lenient.skipped[0]


@pytest.mark.slow
def test_loader_batches_are_the_same_with_0_and_2_workers(ds_dir):
    ds = ClipDataset(ds_dir, "train", frames=9, size=(32, 48), ref_size=32)
    schedule = CurriculumSchedule([{"until": 2, "weights": {"single-action": 1.0}},
                                   {"until": None, "weights": {"dual-action": 1, "full-match": 1}}])
    batches = {}
    for workers in (0, 2):
        sampler = CurriculumSampler(ds.item_tiers, schedule, batch_size=3, seed=4, max_steps=5)
        loader = make_loader(ds, sampler, num_workers=workers, pin_memory=False)
        batches[workers] = list(loader)
    assert len(batches[0]) == 5
    for a, b in zip(batches[0], batches[2]):
        assert a["frames"].shape == (3, 9, 3, 32, 48) and a["keys"].shape == (3, 9, 2, 16)
        assert a["ref_images"].shape == (3, 2, 3, 32, 32) and a["step"].dtype == torch.int64
        assert isinstance(a["clip_id"], list) and isinstance(a["tier"][0], str) and len(a["actions"]) == 3
        assert a["clip_id"] == b["clip_id"] and torch.equal(a["frames"], b["frames"]) and torch.equal(a["keys"], b["keys"])
    assert set(batches[0][0]["tier"]) == {"single-action"} and batches[0][1]["step"].tolist() == [1, 1, 1]
