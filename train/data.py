"""Opening `--data` for training: a curriculum DS_DIR (clips, VAE on the fly) or a latent cache, and
the checks that fail early when the data and the model preset disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KEY_LAYOUT_VERSION = 1  # docs/contracts.md


def datasets_api(name: str):
    """`wantofight.datasets.<name>` (the agreed API), read from its module while the package's
    `__init__` does not re-export it yet."""
    import importlib

    package = importlib.import_module("wantofight.datasets")
    if hasattr(package, name):
        return getattr(package, name)
    modules = {"ClipDataset": "clip_dataset", "LatentDataset": "latent_dataset", "CurriculumSampler": "sampler",
               "CurriculumSchedule": "sampler", "make_loader": "loader"}
    return getattr(importlib.import_module(f"wantofight.datasets.{modules[name]}"), name)


class DataError(ValueError):
    """Data that does not fit the run's preset; the message names both sides."""


def detect_source(path: Path) -> str:
    """`latents` for a latent cache folder, `clips` for a curriculum DS_DIR."""
    manifest = path / "manifest.json"
    if not path.is_dir():
        raise DataError(f"--data {path} does not exist or is not a folder")
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        kind = str(data.get("kind", data.get("type", ""))).lower()
        if "latent" in kind or "vae" in data or "latent_shape" in data:
            return "latents"
        return "clips"
    if any(path.glob("**/latents*.parquet")) or (path / "latents.json").exists():
        return "latents"
    raise DataError(f"--data {path} is neither a curriculum dataset (no manifest.json; build one with "
                    "`wtf build-curriculum`) nor a latent cache (`wtf encode`)")


def _manifest(path: Path) -> dict:
    file = path / "manifest.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def check_manifest(path: Path, config, model_config) -> None:
    """Key layout version and, for a latent cache, the resolution it was encoded at."""
    manifest = _manifest(path)
    layout = manifest.get("key_layout_version", manifest.get("keys", {}).get("layout_version")
                          if isinstance(manifest.get("keys"), dict) else None)
    if layout is not None and int(layout) != KEY_LAYOUT_VERSION:
        raise DataError(f"{path} uses key layout version {layout}; this trainer reads version {KEY_LAYOUT_VERSION} "
                        "(docs/contracts.md): rebuild the dataset")
    size = manifest.get("size")
    if "vae" in manifest and size is not None and tuple(size) != (model_config.height, model_config.width):
        raise DataError(f"{path} was encoded at {size[0]}x{size[1]} pixels; preset {config.preset} trains at "
                        f"{model_config.height}x{model_config.width}: re-run `wtf encode --size "
                        f"{model_config.height}x{model_config.width}` or choose the matching preset")
    if isinstance(manifest.get("vae"), dict):
        kind = "frame" if manifest["vae"].get("class") == "FrameAutoencoder" else "wan"
        if kind != model_config.vae.kind:
            raise DataError(f"{path} was encoded with a {manifest['vae'].get('class')} (vae.kind {kind}); "
                            f"model.vae.kind is {model_config.vae.kind}: pass --set model.vae.kind={kind}")
        check_cache_vae(path, manifest["vae"].get("spec"), model_config.vae.pretrained)
    if "vae" in manifest and manifest.get("frames") not in (None, config.data.frames):
        raise DataError(f"{path} holds {manifest['frames']}-frame windows, data.frames is {config.data.frames}: "
                        f"pass --set data.frames={manifest['frames']} or re-run `wtf encode --frames "
                        f"{config.data.frames}`")


def check_cache_vae(path: Path, spec: str | None, pretrained: str | None) -> None:
    """A latent cache trains only a model whose config names the VAE it was encoded with (that folder, or one
    holding the same weights), since the checkpoint's `model.vae` is what `wtf generate` / `wtf eval` decode with."""
    from wantofight.train.checkpoint import same_vae_weights

    if spec in (None, "tiny"):
        if pretrained is not None:
            raise DataError(f"{path} was encoded with the tiny random VAE (`wtf encode --vae tiny`) but "
                            f"model.vae.pretrained is {pretrained}: re-encode with `--vae {pretrained}`")
        return
    if pretrained is None or not same_vae_weights(pretrained, spec):
        raise DataError(f"{path} was encoded with the VAE in {spec}; model.vae.pretrained is {pretrained}: pass "
                        f"--set model.vae.pretrained={spec} so validation videos and `wtf generate` decode with it")


def vae_spec(path: Path) -> str | None:
    """The VAE a latent cache was encoded with (`tiny` or a local folder), to decode validation videos
    with the same one; None for a clip dataset."""
    vae = _manifest(Path(path)).get("vae")
    return vae.get("spec") if isinstance(vae, dict) else None


def open_datasets(path: Path, config, model_config) -> dict[str, Any]:
    """{"train": dataset, "val": dataset or None} for `--data`."""
    ClipDataset = datasets_api("ClipDataset")
    path = Path(path)
    source = config.data.source if config.data.source != "auto" else detect_source(path)
    check_manifest(path, config, model_config)
    tiers = config.data.tiers or sorted({t for p in config.data.curriculum for t in p["weights"]})
    out = {}
    for split in ("train", "val"):
        try:
            if source == "latents":
                ds = datasets_api("LatentDataset")(path, split, tiers, config.data.frames)
            else:
                ds = ClipDataset(path, split=split, tiers=tiers, frames=config.data.frames,
                                 size=(model_config.height, model_config.width),
                                 ref_size=config.data.ref_size or model_config.clip_image_size,
                                 skip_corrupt=config.data.skip_corrupt, seed=config.seed,
                                 pixels="uint8")  # native uint8 frames; resized on the device (4x the loader rate)
        except (FileNotFoundError, ValueError) as err:
            if split == "val":
                ds = None
            else:
                raise DataError(f"--data {path}: {err}") from err
        out[split] = ds if ds is None or len(ds) > 0 else None
    if out["train"] is None:
        raise DataError(f"--data {path} has no train clips of tiers {', '.join(tiers)}")
    return out


def check_item(item: dict, config, model_config, where: str) -> None:
    """One item against the preset: resolution, latent channels, key layout, frames, reference width."""
    m = model_config
    T = config.data.frames
    F = 1 + (T - 1) // m.vae_time_factor
    keys = item["keys"]
    if tuple(keys.shape[1:]) != (m.num_players, m.num_keys):
        raise DataError(f"{where}: keys of shape {tuple(keys.shape)}, the preset expects (T, {m.num_players}, "
                        f"{m.num_keys}) (key layout version {KEY_LAYOUT_VERSION})")
    if keys.shape[0] != T:
        raise DataError(f"{where}: items hold {keys.shape[0]} frames, data.frames is {T}")
    if "latents" in item:
        lat = item["latents"]
        want = (m.latent_channels, F, m.latent_height, m.latent_width)
        if tuple(lat.shape) != want:
            s = m.vae_space_factor
            raise DataError(f"{where}: latents of shape {tuple(lat.shape)} (= {lat.shape[-2] * s}x{lat.shape[-1] * s} "
                            f"pixels), preset {config.preset} expects {want} (= {m.height}x{m.width} pixels, "
                            f"{T} frames, model.vae.kind={m.vae.kind}): re-encode with the preset's resolution and VAE, "
                            "or choose the matching preset")
        tokens = item.get("ref_tokens")
        if tokens is not None and tokens.shape[-1] != m.clip_dim:
            raise DataError(f"{where}: reference tokens of width {tokens.shape[-1]}, preset {config.preset}'s CLIP "
                            f"tower gives {m.clip_dim}: the cache was encoded with another reference encoder")
    else:
        frames = item["frames"]
        if frames.dtype.is_floating_point and tuple(frames.shape[-2:]) != (m.height, m.width):
            raise DataError(f"{where}: frames of {frames.shape[-2]}x{frames.shape[-1]}, preset {config.preset} "
                            f"expects {m.height}x{m.width}")
