"""Learned fighters as collect policies: `ppo:CHECKPOINT` and `ppo-ladder:RUN_DIR`.

A checkpoint is a stable-baselines3 PPO `.zip` written by `wtf agents train`. The policy sees the
RAM of the last recorded row through the same `PlayerCodec` the training env used, so it observes
and presses exactly what it learned with. Sampled actions are drawn with the episode's seeded rng
(not torch's global one), so a run with the same `--seed` records the same episodes.

`ppo-ladder:DIR` draws one checkpoint of a training run per episode (`DIR/checkpoints/*.zip` and
`DIR/final.zip`), so a dataset spans play from random to skilled (GameNGen); meta.json names the
checkpoint each player used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import zipfile
from pathlib import Path

import numpy as np

from wantofight.collect.fight_env import ACTION_NVEC, OBS_VERSION, PlayerCodec
from wantofight.collect.policies import PlayerContext, PolicyError, require_ram

INSTALL_HINT = "install the [ppo] extra: pip install -e '.[ppo]'"
SB3_ENTRIES = {"data", "policy.pth"}
"""Files every stable-baselines3 checkpoint zip holds."""


def make(kind: str, argument: str) -> "PpoPolicy":
    """The policy for `ppo:CHECKPOINT` or `ppo-ladder:DIR`; raises PolicyError on a bad argument."""
    if importlib.util.find_spec("stable_baselines3") is None:
        raise PolicyError(f"policy {kind}:{argument} needs stable-baselines3; {INSTALL_HINT}")
    if kind == "ppo":
        return PpoPolicy(f"ppo:{argument}", [check_checkpoint(Path(argument))], ladder=None)
    if kind == "ppo-ladder":
        run = Path(argument)
        return PpoPolicy(f"ppo-ladder:{argument}", [check_checkpoint(p) for p in ladder_checkpoints(run)], ladder=run)
    raise PolicyError(f"unknown learned policy kind {kind!r}; valid: ppo, ppo-ladder")


def ladder_checkpoints(run: Path) -> list[Path]:
    """A training run's checkpoints in step order, then `final.zip`."""
    if not run.is_dir():
        raise PolicyError(f"ppo-ladder: {run} is not a training run folder (wtf agents train --out DIR)")
    found = sorted((run / "checkpoints").glob("step_*.zip"))
    if (run / "final.zip").is_file():
        found.append(run / "final.zip")
    if not found:
        raise PolicyError(f"ppo-ladder: {run} holds no checkpoints (expected checkpoints/step_*.zip or final.zip)")
    return found


def check_checkpoint(path: Path) -> Path:
    """Fail with one line unless `path` looks like a stable-baselines3 checkpoint (cheap: no torch)."""
    if not path.is_file():
        raise PolicyError(f"checkpoint {path} does not exist")
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        raise PolicyError(f"checkpoint {path} is corrupt: not a stable-baselines3 .zip") from None
    if not SB3_ENTRIES <= names:
        raise PolicyError(f"checkpoint {path} is not a stable-baselines3 checkpoint (no {', '.join(sorted(SB3_ENTRIES - names))})")
    return path


# ---------------------------------------------------------------------------------------------
# Loading (cached per process: the recorder builds a fresh policy for every episode)


_models: dict[tuple[str, float], object] = {}


def load_model(path: Path):
    """The PPO model in `path` on the CPU; PolicyError if it cannot be loaded or does not fit."""
    key = (str(path.resolve()), path.stat().st_mtime)
    if key in _models:
        return _models[key]
    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError:
        raise PolicyError(f"loading {path} needs stable-baselines3 and torch; {INSTALL_HINT}") from None
    # One small MLP per decision: more threads only fight the emulator workers for the cores.
    torch.set_num_threads(1)
    try:
        model = PPO.load(str(path), device="cpu")
    except Exception as err:  # zip members present but unreadable: truncated or foreign file
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PolicyError(f"cannot load checkpoint {path}: {first_line}") from None
    check_spaces(model, path)
    _models[key] = model
    return model


def check_spaces(model, path: Path) -> None:
    meta = getattr(model, "wantofight", None)
    if not isinstance(meta, dict) or meta.get("obs_version") != OBS_VERSION:
        raise PolicyError(
            f"checkpoint {path} was not trained by `wtf agents train` with observation version {OBS_VERSION}"
        )
    nvec = tuple(int(n) for n in getattr(model.action_space, "nvec", ()))
    if nvec != ACTION_NVEC:
        raise PolicyError(f"checkpoint {path} has action space {nvec}, expected {ACTION_NVEC}")


def sha1_of(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def choose(model, obs: np.ndarray, rng: np.random.Generator, deterministic: bool) -> np.ndarray:
    """One action for one observation: the most likely one, or sampled with `rng`."""
    import torch

    with torch.no_grad():
        obs_tensor, _ = model.policy.obs_to_tensor(obs)
        dist = model.policy.get_distribution(obs_tensor)
        probs = [d.probs[0].numpy().astype(np.float64) for d in dist.distribution]
    if deterministic:
        return np.array([int(p.argmax()) for p in probs])
    return np.array([int(rng.choice(len(p), p=p / p.sum())) for p in probs])


# ---------------------------------------------------------------------------------------------
# The policy


class PpoPolicy:
    """Plays a PPO checkpoint for one player (either side, P1 or P2)."""

    def __init__(self, spec: str, checkpoints: list[Path], ladder: Path | None):
        self.spec, self.checkpoints, self.ladder = spec, checkpoints, ladder

    def reset(self, ctx: PlayerContext) -> None:
        require_ram(ctx, self.spec, ("p1_x", "p2_x", "p1_health", "p2_health", "phase"))
        self.rng, self.deterministic = ctx.rng, ctx.deterministic
        # the most likely action from the same RAM is the same: only a seeded start tells episodes apart
        self.variation = "start" if ctx.deterministic else "seed"
        index = int(ctx.rng.integers(len(self.checkpoints))) if len(self.checkpoints) > 1 else 0
        self.checkpoint = self.checkpoints[index]
        self.model = load_model(self.checkpoint)
        self.frame_skip = self.model.wantofight.get("frame_skip")
        self.codec = PlayerCodec(ctx.player, ctx.game.info)

    def act(self, ram: dict[str, int], t: int) -> int:
        action = choose(self.model, self.codec.observe(ram), self.rng, self.deterministic)
        return self.codec.mask(action, ram)

    def finished(self, t: int) -> bool:
        return False

    def describe(self) -> dict:
        described = {
            "checkpoint": str(self.checkpoint),
            "checkpoint_sha1": sha1_of(self.checkpoint),
            "checkpoint_step": int(self.model.num_timesteps),
            "deterministic": self.deterministic,
            "trained_frame_skip": self.frame_skip,
        }
        if self.ladder is not None:
            described["ladder"] = str(self.ladder)
            described["ladder_size"] = len(self.checkpoints)
        return described
