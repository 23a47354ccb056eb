"""`wtf eval`: replays clips' key streams from their first frames on a real curriculum dataset and
reports PSNR / SSIM / LPIPS per tier and latency per chunk; key files written match the clips."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from datasets_helpers import small_dataset
from model_helpers import one_torch_thread  # noqa: F401
from train_helpers import synthetic_datasets, tiny_config
from wantofight.collect.keyfile import read_key_file
from wantofight.collect.keys import array_to_masks
from wantofight.datasets.clip_dataset import ClipDataset
from wantofight.fidelity import EvalError, lpips_metric, score
from wantofight.benchmark import cli as benchmark_cli
from wantofight.train.stage2 import Stage2Trainer


def test_scores_are_perfect_for_identical_frames_and_worse_for_noise():
    rng = np.random.default_rng(0)
    real = rng.integers(0, 255, (4, 32, 32, 3), dtype=np.uint8)
    psnr, ssim, _ = score(real, real)
    assert psnr == float("inf") or psnr > 80
    assert ssim == pytest.approx(1.0, abs=1e-4)
    noisy = np.clip(real.astype(int) + rng.integers(-40, 40, real.shape), 0, 255).astype(np.uint8)
    p2, s2, _ = score(noisy, real)
    assert 10 < p2 < 30 and s2 < 0.99


@pytest.fixture()
def alexnet_file(tmp_path):
    """A randomly initialised torchvision AlexNet state dict, in the format of torchvision's weights file."""
    import torchvision

    torch.manual_seed(0)
    path = tmp_path / "alexnet.pth"
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    return path


def test_lpips_loads_its_backbone_from_a_local_file_and_scores(alexnet_file, tmp_path):
    net, backend = lpips_metric(alexnet_file)
    assert net is not None and "alexnet.pth" in backend
    saved = torch.load(alexnet_file, weights_only=True)
    trunk = net.net.state_dict()
    assert torch.equal(trunk["slice1.0.weight"], saved["features.0.weight"])  # conv 1
    assert torch.equal(trunk["slice5.10.bias"], saved["features.10.bias"])  # conv 5
    rng = np.random.default_rng(0)
    real = rng.integers(0, 255, (2, 64, 64, 3), dtype=np.uint8)
    noisy = np.clip(real.astype(int) + rng.integers(-60, 60, real.shape), 0, 255).astype(np.uint8)
    assert score(real, real, net)[2] == pytest.approx(0.0, abs=1e-6)
    assert score(noisy, real, net)[2] > 0
    with pytest.raises(EvalError, match="--lpips-backbone .*missing.pth: no such file"):
        lpips_metric(tmp_path / "missing.pth")
    torch.save({"classifier.1.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(EvalError, match="other.pth: not torchvision AlexNet weights"):
        lpips_metric(tmp_path / "other.pth")


def test_lpips_without_a_backbone_says_what_to_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))  # an empty torchvision cache
    net, backend = lpips_metric()
    assert net is None and "--lpips-backbone" in backend and "alexnet-owt-7be5be79.pth" in backend


@pytest.mark.slow
def test_wtf_eval_replays_clips_and_reports_per_tier(recorded, tmp_path_factory, tmp_path, alexnet_file):
    torch.set_num_threads(1)
    ds = small_dataset(recorded, tmp_path_factory)
    config = tiny_config("max_steps=1")
    config = type(config).from_dict({**config.to_dict(), "stage": "stage2"})
    Stage2Trainer(config, None, tmp_path / "s2", datasets=synthetic_datasets(), progress=False).fit()
    root = typer.Typer()
    benchmark_cli.register(root)
    result = CliRunner().invoke(root, ["benchmark", "eval", "--checkpoint", str(tmp_path / "s2"), "--data", str(ds), "--split",
                                       "train", "--frames", "17", "--max-clips", "3", "--steps", "2",
                                       "--keys-dir", str(tmp_path / "keys"), "--report", str(tmp_path / "r.json"),
                                       "--lpips-backbone", str(alexnet_file)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["tiers"]["all"]["clips"] == 3
    for tier, row in report["tiers"].items():
        assert np.isfinite(row["psnr"]) and -1 <= row["ssim"] <= 1 and row["chunk_ms_mean"] > 0
        assert row["lpips"] is not None and row["lpips"] >= 0
    assert "alexnet.pth" in report["lpips_backend"]
    clips = ClipDataset(ds, split="train", frames=17, size=(64, 64), ref_size=64)
    for i in range(3):
        item = clips[(i, 0)]
        masks = array_to_masks(np.asarray(item["keys"]))
        script = read_key_file(tmp_path / "keys" / f"{item['clip_id']}.keys")
        assert np.array_equal(script.p1, masks[1:, 0]) and np.array_equal(script.p2, masks[1:, 1])
        assert len(report["clips"][i]["chunk_seconds"]) == 2  # 16 generated rows = 2 chunks
