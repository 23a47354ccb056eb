"""Atomic checkpoints that hold everything needed to continue a run exactly.

    RUN_DIR/checkpoints/step_00000020/
        config.json                    train config, resolved model config, stage, preset, world size
        model.safetensors              the DiT (full, unsharded)
        reference_encoder.safetensors  the frozen CLIP tower, only when it is randomly initialised
        ema.safetensors                EMA shadows of the trainable weights
        optimizer.pt                   AdamW state (full, unsharded)
        trainer.pt                     LR scheduler, step, samples seen, data sampler state
        rng_rank{r}.pt                 python / numpy / torch (/ CUDA) RNG states of each rank
    RUN_DIR/checkpoints/latest         name of the newest complete checkpoint

A checkpoint is written into a hidden temporary folder and renamed into place when complete, then
`latest` is replaced atomically; a crash at any moment leaves the previous checkpoint usable.
Finding the newest and reading what sampling needs (config.json, the safetensors) is
inference/checkpoints.py's; this module writes checkpoints and reads back the trainer's own state.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from wantofight.inference.checkpoints import CHECKPOINT_DIR, PREFIX, list_checkpoints


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step:08d}"


# ---------------------------------------------------------------------------------------------
# RNG
# ---------------------------------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(path))


def staging_dir(run_dir: Path, step: int) -> Path:
    """The hidden folder a checkpoint is assembled in (same file system, so the rename is atomic)."""
    return Path(run_dir) / CHECKPOINT_DIR / f".{checkpoint_name(step)}.tmp"


def begin(run_dir: Path, step: int) -> Path:
    """Rank 0: make a fresh staging folder."""
    tmp = staging_dir(run_dir, step)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def write_rank_state(tmp: Path, rank: int) -> None:
    torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")


def write_main(tmp: Path, *, config: dict, model: dict[str, torch.Tensor], optimizer: dict, trainer: dict,
               ema: dict[str, torch.Tensor] | None = None, reference_encoder: dict[str, torch.Tensor] | None = None
               ) -> None:
    """Rank 0: everything but the per-rank RNG; config.json last (its presence marks completeness)."""
    _save_tensors(model, tmp / "model.safetensors")
    if reference_encoder is not None:
        _save_tensors(reference_encoder, tmp / "reference_encoder.safetensors")
    if ema is not None:
        _save_tensors(ema, tmp / "ema.safetensors")
    torch.save(optimizer, tmp / "optimizer.pt")
    torch.save(trainer, tmp / "trainer.pt")
    (tmp / "config.json").write_text(json.dumps(config, indent=2))


def commit(run_dir: Path, tmp: Path, step: int, keep_last: int) -> Path:
    """Rank 0: rename the staging folder into place, move `latest`, delete checkpoints beyond `keep_last`."""
    for f in tmp.iterdir():
        with f.open("rb") as handle:
            os.fsync(handle.fileno())
    root = Path(run_dir) / CHECKPOINT_DIR
    final = root / checkpoint_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    pointer_tmp = root / ".latest.tmp"
    pointer_tmp.write_text(final.name)
    os.replace(pointer_tmp, root / "latest")
    _fsync_dir(root)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

SAMPLING_FIELDS = ("gradient_checkpointing", "cache_write", "cache_write_step", "context_sigma")
"""Model-config fields that say how the weights are run, not what they are: a checkpoint initialises a
model that differs in them (an old teacher seeds a student with the clean cache write)."""


def model_differences(saved: dict, mine: dict) -> list[str]:
    """Model-config fields (of `to_dict()`) in which a checkpoint's saved model differs from `mine`, as
    "field=saved value"; `SAMPLING_FIELDS` are not part of the model, a VAE named by a relative and by
    an absolute path of the same folder is the same VAE, and so are two folders holding the same weights (a
    shipped model's copy of its VAE and the folder it was copied from), and fields a saved config predates
    (`LEGACY_FIELDS`; the VAE's `kind`, `norm_groups`) count as the values every such model was made with."""
    from dataclasses import asdict

    from wantofight_model.config import LEGACY_FIELDS, VAEConfig

    def vae_fields(model: dict):
        vae = dict(model.get("vae") or {})
        if vae:
            try:  # as the model loads it (`ModelConfig.from_dict`); one that cannot load differs as saved
                vae = json.loads(json.dumps(asdict(VAEConfig.from_dict(vae))))
            except (TypeError, ValueError):
                pass
        return vae

    def same_vae(a: dict, b: dict) -> bool:
        a, b = vae_fields(a), vae_fields(b)
        folders = a.pop("pretrained", None), b.pop("pretrained", None)
        return a == b and (folders[0] == folders[1] or (None not in folders and same_vae_weights(*folders)))

    mine = json.loads(json.dumps(mine))  # tuples -> lists, as saved
    saved = {**LEGACY_FIELDS, **saved}  # a field the saved config predates: the value it was made with
    return [f"{k}={saved.get(k)!r}" for k in sorted(mine) if k not in SAMPLING_FIELDS
            and (not same_vae(saved, mine) if k == "vae" else saved.get(k) != mine[k])]


def same_vae_weights(a: str, b: str) -> bool:
    """Whether two VAE folders are one folder, or hold byte-identical weights (`inference.shipped.VAE_WEIGHTS`)."""
    import filecmp

    from wantofight.inference.shipped import VAE_WEIGHTS

    a, b = Path(a).resolve(), Path(b).resolve()
    if a == b:
        return True
    wa, wb = a / VAE_WEIGHTS, b / VAE_WEIGHTS
    return wa.is_file() and wb.is_file() and filecmp.cmp(wa, wb, shallow=False)


def read_torch(path: Path, name: str) -> Any:
    # weights_only=False: these files hold numpy RNG tuples and plain python state we wrote ourselves
    return torch.load(Path(path) / name, map_location="cpu", weights_only=False)


def read_rng(path: Path, rank: int) -> dict[str, Any] | None:
    file = Path(path) / f"rng_rank{rank}.pt"
    return read_torch(path, file.name) if file.exists() else None


# ---------------------------------------------------------------------------------------------
# The run folder: the trainer's checkpointing part
# ---------------------------------------------------------------------------------------------

class RunFolder:
    """Where a run's checkpoints go, and the collective write of one.

    `output` is the folder the user named; `path` is where the run writes: `output` itself, or with
    --overwrite a staging folder beside it that replaces `output` once the run is complete
    (wantofight/outputs.py). Every rank calls `write` (a barrier between the ranks' parts)."""

    def __init__(self, output: Path, path: Path):
        self.output, self.path = Path(output), Path(path)

    @classmethod
    def claim(cls, output: Path, overwrite: bool, resume: bool) -> RunFolder:
        from wantofight import outputs
        from wantofight.inference.checkpoints import latest_checkpoint

        path = outputs.claim(output, overwrite, resume=resume, resumable=latest_checkpoint(output) is not None)
        return cls(output, path)

    def resume_point(self, resume: bool) -> Path | None:
        """The checkpoint --resume continues (None for a fresh run); a fresh run into a folder that holds
        checkpoints, or --resume with none, is refused in one line."""
        from wantofight.inference.checkpoints import latest_checkpoint
        from wantofight.train.errors import TrainError

        found = latest_checkpoint(self.path)
        if resume and found is None:
            raise TrainError(f"--resume: {self.path} holds no complete checkpoint "
                             f"({self.path / CHECKPOINT_DIR} is missing or empty); start without --resume")
        if not resume and found is not None:
            raise TrainError(f"{self.path} already holds checkpoints (latest {found.name}); pass --resume to "
                             "continue that run or choose another --out")
        return found

    def create(self, dist) -> None:
        """Make the folder once every rank has claimed it (a run that fails to start leaves no empty --out)."""
        from wantofight.train import distributed as dist_utils

        dist_utils.barrier(dist)
        if dist.is_main:
            self.path.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, dist, keep_last: int, main: Callable[[], dict]) -> Path | None:
        """Checkpoint `step`: each rank's RNG, and from the main rank `write_main(**main())`. `main` is called
        on the main rank only, after the staging folder exists. The checkpoint's path on the main rank."""
        from wantofight.train import distributed as dist_utils

        tmp = staging_dir(self.path, step)
        if dist.is_main:
            begin(self.path, step)
        dist_utils.barrier(dist)
        write_rank_state(tmp, dist.rank)
        final = None
        if dist.is_main:
            write_main(tmp, **main())
        dist_utils.barrier(dist)
        if dist.is_main:
            final = commit(self.path, tmp, step, keep_last)
        dist_utils.barrier(dist)
        return final

    def complete(self, dist) -> None:
        """A complete --overwrite run replaces the old `output` now."""
        from wantofight import outputs
        from wantofight.train import distributed as dist_utils

        if self.path != self.output:
            if dist.is_main:
                outputs.swap_in(self.path, self.output)
            dist_utils.barrier(dist)
            self.path = self.output


class NetworkState:
    """A second network's part of a checkpoint (a critic): its weights under `name` and its optimiser's state
    under `name_optimizer` in trainer.pt, full and on the CPU (gathered on every rank under FSDP). `missing`
    says why a checkpoint without it cannot be resumed."""

    def __init__(self, name: str, wrapped, optimizer, missing: str):
        self.name, self.wrapped, self.optimizer, self.missing = name, wrapped, optimizer, missing

    def state_dict(self) -> dict:
        from wantofight.train import distributed as dist_utils

        return {self.name: dist_utils.model_state(self.wrapped),
                f"{self.name}_optimizer": dist_utils.optimizer_state(self.wrapped, self.optimizer)}

    def load_state_dict(self, state: dict) -> None:
        from wantofight.train import distributed as dist_utils
        from wantofight.train.errors import TrainError

        if self.name not in state:
            raise TrainError(self.missing)
        dist_utils.load_model_state(self.wrapped, state[self.name])
        dist_utils.load_optimizer_state(self.wrapped, self.optimizer, state[f"{self.name}_optimizer"])
