"""Models shipped with the project, loaded by name: `wtf generate --checkpoint duel-tiny`.

    inference/shipped/NAME/
        config.json                     the trainer checkpoint's config (model.vae.pretrained = "vae", in its
                                        `train` section and at its top level)
        model.safetensors               the DiT's EMA weights (config.json: "ema_only": true); a folder
                                        exported before 2026-12-07 keeps the raw ones here and the EMA ones in
                                        ema.safetensors
        reference_encoder.safetensors   the reference-image encoder
        vae/                            the VAE the model decodes with (a `wtf train vae` folder)
        MODEL_CARD.md                   data, recipe, commit, benchmark table

`export_checkpoint` writes such a folder from any trainer checkpoint; a VAE path relative to the
checkpoint folder is resolved against it (`read_checkpoint_model_config`), so the folder can move.
The optimiser, sampler and RNG state stay behind: a shipped model samples and initialises stage 2/3,
it does not resume a run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

SHIPPED_ROOT = Path(__file__).resolve().parent / "shipped"
SAMPLING_FILES = ("config.json", "model.safetensors", "ema.safetensors", "reference_encoder.safetensors")
VAE_WEIGHTS = "diffusion_pytorch_model.safetensors"
VAE_FILES = ("config.json", VAE_WEIGHTS, "report.json")
VAE_SUBDIR = "vae"


def shipped_names(root: Path | None = None) -> list[str]:
    root = root or SHIPPED_ROOT
    return sorted(p.name for p in root.iterdir() if (p / "config.json").is_file()) if root.is_dir() else []


def shipped_path(name: str, root: Path | None = None) -> Path | None:
    """The folder of the shipped model `name`, or None when `name` is not a shipped model's name."""
    return (root or SHIPPED_ROOT) / name if name in shipped_names(root) else None


def unknown_checkpoint_message(path: str | Path, root: Path | None = None) -> str:
    names = shipped_names(root)
    hint = f"shipped models: {', '.join(names)}" if names else f"no model is shipped under {root or SHIPPED_ROOT}"
    return f"no checkpoint at {path} (a run folder, a checkpoint folder, or a shipped model's name; {hint})"


def own_vae(folder: Path, pretrained: str | None) -> str | None:
    """A checkpoint config's `vae.pretrained` as a path to load: a relative one naming a folder inside the checkpoint
    folder (a shipped model's own VAE, `export_checkpoint`) is resolved against it; any other is as saved."""
    if pretrained is not None and not Path(pretrained).is_absolute() and (Path(folder) / pretrained).is_dir():
        return str(Path(folder) / pretrained)
    return pretrained


def export_checkpoint(checkpoint: Path, out: Path, ema_only: bool = True) -> Path:
    """Copy what sampling needs from a trainer checkpoint folder, and its VAE, into `out` (new). `ema_only`: keep
    the weights sampling and `--init-from` read (the EMA ones, in model.safetensors; half the size), not the raw
    weights beside them."""
    checkpoint, out = Path(checkpoint), Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists; pass a new folder")
    config = json.loads((checkpoint / "config.json").read_text())
    staged = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    for name in SAMPLING_FILES[1:]:
        if (checkpoint / name).is_file() and not (ema_only and name in ("model.safetensors", "ema.safetensors")):
            shutil.copy2(checkpoint / name, staged / name)
    if ema_only:
        from safetensors.torch import save_file

        from wantofight.inference.checkpoints import EMA_ONLY, read_weights

        save_file(read_weights(checkpoint, "ema")[0], str(staged / "model.safetensors"))
        config[EMA_ONLY] = True
    vae = config["train"].get("model", {}).get("vae", {}).get("pretrained")
    if vae is not None:
        (staged / VAE_SUBDIR).mkdir()
        for name in VAE_FILES:
            if (Path(vae) / name).is_file():
                shutil.copy2(Path(vae) / name, staged / VAE_SUBDIR / name)
        config["train"]["model"]["vae"]["pretrained"] = VAE_SUBDIR
        if config.get("model", {}).get("vae", {}).get("pretrained"):  # the same VAE, as the checkpoint's model names it
            config["model"]["vae"]["pretrained"] = VAE_SUBDIR
    (staged / "config.json").write_text(json.dumps(config, indent=2))
    os.replace(staged, out)
    return out
