"""`wtf encode` and `LatentDataset`: the latent round trip, the manifest, training without the VAE."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from datasets_helpers import masks, small_dataset
from wantofight.cli import app
from wantofight.datasets.clip_dataset import ClipDataset
from wantofight.datasets.encoders import load_clip, load_vae
from wantofight.datasets.latent_dataset import LatentDataset
from wantofight.datasets.loader import make_loader
from wantofight.datasets.sampler import CurriculumSampler, CurriculumSchedule

FRAMES, SIZE = 9, (16, 32)


@pytest.fixture(scope="module")
def ds_dir(recorded, tmp_path_factory):
    return small_dataset(recorded, tmp_path_factory)


@pytest.fixture(scope="module")
def latent_dir(ds_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("latents") / "lat"
    args = ["encode", str(ds_dir), "--out", str(out), "--vae", "tiny", "--clip", "tiny", "--frames", str(FRAMES),
            "--size", f"{SIZE[0]}x{SIZE[1]}", "--ref-size", "64", "--tiers", "dual,full", "--batch-size", "8",
            "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out.resolve()}: ") and f"windows of {FRAMES} frames" in result.output
    return out


@pytest.mark.slow
def test_latent_round_trip_returns_what_the_vae_gives_for_the_clip(ds_dir, latent_dir):
    latents = LatentDataset(latent_dir, "train", frames=FRAMES)
    clips = ClipDataset(ds_dir, "train", tiers="dual,full", frames=FRAMES, size=SIZE, ref_size=64)
    manifest = json.loads((latent_dir / "manifest.json").read_text())
    vae, info = load_vae("tiny")
    encoder, clip_info = load_clip("tiny")
    assert manifest["vae"]["sha256"] == info["sha256"] and manifest["clip"]["sha256"] == clip_info["sha256"]
    assert manifest["latent_shape"] == [16, 3, SIZE[0] // 8, SIZE[1] // 8]
    windows = sum(len(clips.cache_starts(i)) for i in range(len(clips)))
    assert len(latents) == windows == sum(c["train"] for c in manifest["counts"].values())
    assert set(latents.item_tiers) == {"dual-action", "full-match"}
    by_id = {r.clip_id: i for i, r in enumerate(clips.refs)}
    for k in (0, latents.item_tiers.index("full-match"), len(latents) - 1):
        item = latents[(k, 3)]
        assert item["latents"].shape == (16, 3, 2, 4) and item["latents"].dtype == torch.float32
        assert item["ref_tokens"].shape == (2, (64 // 16) ** 2, 64) and item["step"] == 3  # patch tokens
        source = clips.load(by_id[item["clip_id"]], item["start"])
        expected = vae.encode(source["frames"].permute(1, 0, 2, 3)[None])[0]  # (16, F, h, w)
        torch.testing.assert_close(item["latents"], expected, atol=1e-5, rtol=1e-4)  # batched vs single conv
        torch.testing.assert_close(item["ref_tokens"], encoder(source["ref_images"][None])[0], atol=1e-5, rtol=1e-4)
        assert torch.equal(item["keys"], source["keys"]) and torch.equal(item["effective"], source["effective"])
        assert item["actions"] == [tuple(a) for a in source["actions"]] and item["tier"] == source["tier"]
        assert np.array_equal(masks(item["keys"]), masks(source["keys"]))


def test_latent_dataset_trains_without_the_vae_and_follows_the_sampler(latent_dir):
    code = (
        "import sys; from wantofight.datasets.latent_dataset import LatentDataset;"
        f"ds = LatentDataset({str(latent_dir)!r}); x = ds[0]['latents'];"
        "print(sorted(m for m in ('diffusers', 'open_clip', 'wantofight_model.vae') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"  # no VAE (nor CLIP) is even imported
    ds = LatentDataset(latent_dir, "train", tiers=["dual-action", "full-match"])
    schedule = CurriculumSchedule.constant({"dual-action": 1, "full-match": 3})
    batches = list(make_loader(ds, CurriculumSampler(ds.item_tiers, schedule, batch_size=2, max_steps=4)))
    assert len(batches) == 4 and batches[0]["latents"].shape == (2, 16, 3, 2, 4)
    assert batches[0]["ref_tokens"].shape[:2] == (2, 2) and batches[0]["keys"].shape == (2, FRAMES, 2, 16)
    with pytest.raises(ValueError, match="9-frame windows"):
        LatentDataset(latent_dir, frames=17)


@pytest.mark.slow
def test_encode_from_a_local_vae_folder_records_the_same_hash(ds_dir, latent_dir, tmp_path):
    vae, info = load_vae("tiny")
    vae.autoencoder.save_pretrained(tmp_path / "wan" / "vae")
    out = tmp_path / "lat"
    args = ["encode", str(ds_dir), "--out", str(out), "--vae", str(tmp_path / "wan"), "--frames", str(FRAMES),
            "--size", f"{SIZE[0]}x{SIZE[1]}", "--tiers", "dual", "--batch-size", "8", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["vae"]["sha256"] == info["sha256"] and manifest["clip"] is None
    assert not list(out.rglob(".tmp-*"))
    local, cached = LatentDataset(out), LatentDataset(latent_dir, tiers="dual")
    assert torch.equal(local[0]["latents"], cached[0]["latents"])
    assert "ref_images" in local[0] and local[0]["ref_images"].shape == (2, 3, 224, 224)


def test_encode_fails_in_one_line_on_bad_input(ds_dir, tmp_path):
    runner = CliRunner()
    for extra, message in ((["--vae", "tiny", "--frames", "12"], "1 + 8k"), (["--vae", "tiny", "--frames", "41"], "shorter than frames=41"),
                           (["--vae", str(tmp_path / "none")], "no VAE at"),
                           (["--vae", "tiny", "--size", "big"], "HEIGHTxWIDTH"),
                           (["--vae", "tiny", "--size", "20x20"], "multiple of 8")):
        result = runner.invoke(app, ["encode", str(ds_dir), "--out", str(tmp_path / "x"), "--frames", "9", *extra])
        assert result.exit_code != 0 and message in result.output, result.output


def test_a_cache_whose_references_may_show_later_frames_is_refused(latent_dir, tmp_path):
    """Format version 1 cropped each window's references from any of its frames; version 2 (the first
    frame only, docs/datasets.md) refuses to train on such a cache and says to re-encode it."""
    assert json.loads((latent_dir / "manifest.json").read_text())["format_version"] == 2
    old = tmp_path / "old"
    old.mkdir()
    manifest = json.loads((latent_dir / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))
    with pytest.raises(ValueError, match="format version 1 .* re-run `wtf encode`"):
        LatentDataset(old, "train")
