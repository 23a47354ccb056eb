"""Typed training configuration: one `TrainConfig`, presets per model size, file and `--set` overrides.

One source of truth: a run's config is `preset(name)` -> YAML/JSON file -> `--set key=value` flags,
applied in that order, validated, printed at start and written into every checkpoint. Nothing else
in `train/` holds a number a user may want to change.

    config = resolve_config("tiny", file=None, sets=["optim.lr=1e-4", "data.frames=33"])
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

STAGES = ("stage1", "stage2", "stage3", "vae")
PRECISIONS = ("auto", "fp32", "bf16")
PARALLELS = ("auto", "none", "ddp", "fsdp")
LR_SCHEDULES = ("constant", "cosine")
DATA_SOURCES = ("auto", "clips", "latents")


class ConfigError(ValueError):
    """A bad configuration value; the message names the field, the value and the valid choices."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _choice(name: str, value: str, valid: tuple[str, ...]) -> None:
    _check(value in valid, f"{name}={value!r}; valid: {', '.join(valid)}")


def default_curriculum() -> list[dict]:
    """The paper's order (docs/training.md): single-player actions -> two players at once -> full matches (mixed in, never alone)."""
    return [
        {"until": 2000, "weights": {"single-action": 1.0}},
        {"until": 6000, "weights": {"single-action": 0.3, "dual-action": 0.7}},
        {"until": None, "weights": {"single-action": 0.1, "dual-action": 0.3, "full-match": 0.6}},
    ]


@dataclass
class OptimConfig:
    """AdamW, LR schedule, clipping and accumulation."""

    lr: float = 1e-4
    """Peak learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (not applied to norms, biases, modulation tables)."""
    eps: float = 1e-8
    """AdamW epsilon."""
    warmup_steps: int = 100
    """Linear warm-up from 0 to `lr` over this many optimiser steps."""
    schedule: str = "constant"
    """After warm-up: `constant` or `cosine` (down to `min_lr_ratio * lr` at `max_steps`)."""
    min_lr_ratio: float = 0.1
    """Floor of the cosine schedule, as a fraction of `lr`."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value; 0 disables clipping."""
    grad_accum: int = 1
    """Micro-batches per optimiser step (each `data.batch_size` per rank)."""

    def __post_init__(self) -> None:
        _check(self.lr > 0, f"optim.lr must be > 0, got {self.lr}")
        _check(self.warmup_steps >= 0, f"optim.warmup_steps must be >= 0, got {self.warmup_steps}")
        _choice("optim.schedule", self.schedule, LR_SCHEDULES)
        _check(0 <= self.min_lr_ratio <= 1, f"optim.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        _check(self.grad_clip >= 0, f"optim.grad_clip must be >= 0, got {self.grad_clip}")
        _check(self.grad_accum >= 1, f"optim.grad_accum must be >= 1, got {self.grad_accum}")
        _check(len(self.betas) == 2, f"optim.betas needs 2 values, got {self.betas}")


@dataclass
class DataConfig:
    """What a batch is made of, and the curriculum that picks its tiers."""

    frames: int = 161
    """Pixel frames per sample, 1 + 8 n (161 = chunk 0 + 20 chunks of 8, docs/model.md)."""
    batch_size: int = 1
    """Samples per micro-batch *per rank*; the global batch is batch_size x world size x grad_accum."""
    source: str = "auto"
    """`clips` (ClipDataset, VAE on the fly), `latents` (the latent cache) or `auto` (from the folder)."""
    num_workers: int = 0
    """DataLoader worker processes per rank."""
    tiers: list[str] | None = None
    """Tiers to load (None = every tier the curriculum names)."""
    curriculum: list[dict] = field(default_factory=default_curriculum)
    """CurriculumSchedule phases: [{"until": optimiser step or null, "weights": {tier: weight}}]."""
    ref_size: int = 0
    """Reference image side fed to the CLIP encoder; 0 = the model's `clip_image_size`."""
    skip_corrupt: bool = False
    """Skip unreadable clips instead of failing."""

    def __post_init__(self) -> None:
        _check(self.frames >= 9 and (self.frames - 1) % 8 == 0,
               f"data.frames={self.frames} must be 1 + 8 n with n >= 1 (chunk 0 + whole chunks of 8)")
        _check(self.batch_size >= 1, f"data.batch_size must be >= 1, got {self.batch_size}")
        _choice("data.source", self.source, DATA_SOURCES)
        _check(self.num_workers >= 0, f"data.num_workers must be >= 0, got {self.num_workers}")
        _check(len(self.curriculum) >= 1 and self.curriculum[-1].get("until") is None,
               "data.curriculum must be a list of phases whose last one has until: null")


@dataclass
class ContextConfig:
    """How chunk 0 (latent frame 0) is given to the model as context (GameNGen noise augmentation), and,
    in stage 2, which later chunks are clean context for the chunks after them (docs/stages.md)."""

    noise_prob: float = 0.5
    """Probability that a sample's context is noised at all (else it is given clean, t = 0)."""
    noise_max: float = 0.7
    """Context noise level sigma_ctx ~ U(0, noise_max) when noised; told to the model as t = 1000 sigma_ctx."""
    chunk_share: float = 0.5
    """Stage 2: probability that a chunk c >= 1 (not the last) is a context chunk, at sigma ~ U(0,
    chunk_sigma_max) and with no loss, as the clean cache write shows it at inference; 0 = every chunk
    is a diffusion-forcing target."""
    chunk_sigma_max: float = 0.1
    """Stage 2: a context chunk's noise level sigma ~ U(0, chunk_sigma_max)."""

    def __post_init__(self) -> None:
        _check(0 <= self.noise_prob <= 1, f"context.noise_prob must be in [0, 1], got {self.noise_prob}")
        _check(0 <= self.noise_max < 1, f"context.noise_max must be in [0, 1), got {self.noise_max}")
        _check(0 <= self.chunk_share < 1, f"context.chunk_share must be in [0, 1), got {self.chunk_share}")
        _check(0 <= self.chunk_sigma_max < 1,
               f"context.chunk_sigma_max must be in [0, 1), got {self.chunk_sigma_max}")


@dataclass
class CheckpointConfig:
    """When checkpoints are written and how many are kept."""

    every: int = 500
    """Write a checkpoint every N optimiser steps (and always at exit)."""
    keep_last: int = 3
    """Keep the newest K checkpoints; older ones are deleted after a new one is complete."""

    def __post_init__(self) -> None:
        _check(self.every >= 1, f"checkpoint.every must be >= 1, got {self.every}")
        _check(self.keep_last >= 1, f"checkpoint.keep_last must be >= 1, got {self.keep_last}")


@dataclass
class ValidationConfig:
    """Validation on the val split: loss per tier and a generated clip with the key HUD."""

    every: int = 500
    """Validate every N optimiser steps (and at the last step); 0 disables validation."""
    batches: int = 4
    """Val batches (per rank) for the loss; the noise is fixed so the numbers compare across steps."""
    video: bool = True
    """Write a generated MP4 with the key HUD (RUN_DIR/val/step_XXXXXX.mp4)."""
    video_frames: int = 33
    """Frames of the generated clip (1 + 8 n): frame 0 from the val clip, the rest generated."""
    sample_steps: int = 20
    """Euler steps of the multi-step sampler."""
    fps: int = 30
    """Frame rate written into the MP4."""

    def __post_init__(self) -> None:
        _check(self.every >= 0, f"validation.every must be >= 0, got {self.every}")
        _check(self.video_frames >= 9 and (self.video_frames - 1) % 8 == 0,
               f"validation.video_frames={self.video_frames} must be 1 + 8 n")
        _check(self.sample_steps >= 1, f"validation.sample_steps must be >= 1, got {self.sample_steps}")


@dataclass
class TrainConfig:
    """A whole training run. `model` holds overrides of the model preset's fields."""

    stage: str = "stage1"
    """Training stage (docs/training.md, docs/stages.md): stage1 (bidirectional pretraining)."""
    preset: str = "tiny"
    """Model preset (`wantofight_model.presets`): tiny, wan-1.3b."""
    model: dict[str, Any] = field(default_factory=dict)
    """Overrides of the model preset's fields, e.g. {"gradient_checkpointing": true}."""
    seed: int = 0
    """Seeds model init, data order and every training noise draw."""
    max_steps: int = 10000
    """Optimiser steps of the run (a resumed run continues up to this)."""
    precision: str = "auto"
    """`bf16` autocast (GPU), `fp32`, or `auto` = bf16 on CUDA, fp32 on CPU."""
    parallel: str = "auto"
    """Multi-GPU strategy under torchrun: ddp, fsdp (FSDP2 fully_shard), none, or auto (fsdp for wan-1.3b)."""
    ema_decay: float = 0.999
    """EMA of the trainable weights; 0 disables it."""
    train_shift: float = 0.0
    """Shift of the training sigma distribution (sigma = shift(u), u ~ U(0,1)); 0 = the model's timestep_shift."""
    fighter_weight: float = 0.0
    """Extra flow-matching loss weight on the latent cells that differ from the stage latent (the fighters,
    the HUD), stages 1 and 2 (train/fighter_cells.py); 0 = a plain MSE."""
    log_every: int = 1
    """Progress/TensorBoard refresh period in steps (metrics.jsonl gets every step)."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def __post_init__(self) -> None:
        from wantofight_model.presets import PRESETS

        _choice("stage", self.stage, STAGES)
        _choice("preset", self.preset, tuple(sorted(PRESETS)))
        _choice("precision", self.precision, PRECISIONS)
        _choice("parallel", self.parallel, PARALLELS)
        _check(self.max_steps >= 1, f"max_steps must be >= 1, got {self.max_steps}")
        _check(0 <= self.ema_decay < 1, f"ema_decay must be in [0, 1), got {self.ema_decay}")
        _check(self.train_shift >= 0, f"train_shift must be >= 0, got {self.train_shift}")
        _check(self.fighter_weight >= 0, f"fighter_weight must be >= 0, got {self.fighter_weight}")
        _check(self.log_every >= 1, f"log_every must be >= 1, got {self.log_every}")

    def model_config(self):
        """The model preset with `model` overrides applied (validated by ModelConfig itself)."""
        from wantofight.inference.checkpoints import model_config

        try:
            return model_config(self.preset, self.model)
        except ValueError as err:
            raise ConfigError(str(err)) from err

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        return build_config(cls, data, "")


# ---------------------------------------------------------------------------------------------
# Presets
# ---------------------------------------------------------------------------------------------

def tiny() -> TrainConfig:
    """CPU-sized: the tiny model, short curriculum phases, frequent checkpoints and validation."""
    return TrainConfig(
        preset="tiny",
        max_steps=200,
        optim=OptimConfig(lr=1e-3, warmup_steps=5, weight_decay=0.0),
        data=DataConfig(frames=161, batch_size=2, curriculum=[
            {"until": 50, "weights": {"single-action": 1.0}},
            {"until": 100, "weights": {"single-action": 0.3, "dual-action": 0.7}},
            {"until": None, "weights": {"single-action": 0.1, "dual-action": 0.3, "full-match": 0.6}},
        ]),
        ema_decay=0.99,
        checkpoint=CheckpointConfig(every=50, keep_last=2),
        validation=ValidationConfig(every=100, batches=2, video_frames=33, sample_steps=8),
    )


def wan_1_3b() -> TrainConfig:
    """The paper's 1.3B model at 161 frames, 512x384: bf16, gradient checkpointing, FSDP2 under torchrun."""
    return TrainConfig(
        preset="wan-1.3b",
        model={"gradient_checkpointing": True},
        max_steps=20000,
        precision="auto",
        parallel="auto",
        optim=OptimConfig(lr=2e-5, warmup_steps=500, weight_decay=0.01, grad_clip=1.0),
        data=DataConfig(frames=161, batch_size=1, num_workers=4),
        ema_decay=0.999,
        checkpoint=CheckpointConfig(every=500, keep_last=3),
        validation=ValidationConfig(every=1000, batches=8, video_frames=81, sample_steps=30),
    )


TRAIN_PRESETS: dict[str, Callable[[], TrainConfig]] = {"tiny": tiny, "wan-1.3b": wan_1_3b}


def train_preset(name: str) -> TrainConfig:
    if name not in TRAIN_PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {', '.join(sorted(TRAIN_PRESETS))}")
    return TRAIN_PRESETS[name]()


# ---------------------------------------------------------------------------------------------
# Overrides: file, then --set key=value
# ---------------------------------------------------------------------------------------------

def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, hint: Any, name: str) -> Any:
    """Turn a parsed YAML value (a file's or a `--set`'s) into the field's declared type (tuples, nested
    dataclasses, floats), or fail naming the field and the type it needs."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], name)
    if is_dataclass(hint):
        _check(isinstance(value, dict), f"{name} must be a mapping, got {value!r}")
        return build_config(hint, value, name + ".")
    if origin is tuple:
        _check(isinstance(value, (list, tuple)), f"{name} must be a list, got {value!r}")
        return tuple(_coerce(v, args[0], name) for v in value)
    if origin is list:
        _check(isinstance(value, list), f"{name} must be a list, got {value!r}")
        return list(value)
    if origin is dict:
        _check(isinstance(value, dict), f"{name} must be a mapping, got {value!r}")
        return dict(value)
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string; the field says it is a number
            try:
                value = float(value)
            except ValueError:
                pass
        _check(isinstance(value, (int, float)) and not isinstance(value, bool), f"{name} must be a number, got {value!r}")
        return float(value)
    if hint is int:
        _check(isinstance(value, int) and not isinstance(value, bool), f"{name} must be an integer, got {value!r}")
        return value
    if hint is bool:
        _check(isinstance(value, bool), f"{name} must be true or false, got {value!r}")
        return value
    if hint is str:
        _check(isinstance(value, str), f"{name} must be a string, got {value!r}")
        return value
    return value


def build_config(cls, data: dict, prefix: str = ""):
    """Dataclass `cls` from a dict of its fields, each coerced to its declared type; an unknown field
    lists the valid ones. `prefix` names the section in messages (`optim.`)."""
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    _check(not unknown, f"unknown field(s) {[prefix + u for u in unknown]}; valid: "
                        f"{', '.join(prefix + n for n in sorted(names))}")
    return cls(**{k: _coerce(v, hints[k], prefix + k) for k, v in data.items()})


def _merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "model":
            out[key] = _merge(out[key], value)
        elif key == "model" and isinstance(value, dict):
            out[key] = {**out.get(key, {}), **value}
        else:
            out[key] = value
    return out


def parse_set(assignment: str) -> tuple[list[str], str]:
    """`optim.lr=1e-4` -> (["optim", "lr"], "1e-4"): the key's path and the value's text, which
    `apply_sets` types by the field the path names. The one `--set` parser of every trainer."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key=value, e.g. optim.lr=1e-4")
    key, text = assignment.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    _check(bool(path), f"--set {assignment!r}: empty key")
    return path, text


def split_sets(sets, section: str) -> tuple[list[str], list[str]]:
    """(`SECTION.*` assignments, the others) of a `--set` list: stage 3's `dmd.*`, the VAE's `vae.*` and
    the decoder's `decoder.*` settings are configs of their own beside the `TrainConfig`."""
    mine = [s for s in sets if s.strip().startswith(section + ".")]
    return mine, [s for s in sets if not s.strip().startswith(section + ".")]


def _section_type(owner, name: str, hint: Any):
    """The dataclass whose fields `name.*` sets, or None when `name` is a plain field."""
    if owner is TrainConfig and name == "model":  # a dict of overrides, each a ModelConfig field
        from wantofight_model.config import ModelConfig

        return ModelConfig
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    return hint if is_dataclass(hint) else None


def apply_sets(cls, data: dict, sets, section: str = "") -> dict:
    """Apply `--set` assignments to `data`, a dict of dataclass `cls`'s fields (in place, and returned).
    Each value is read as YAML and then coerced to the declared type of the field it names (so
    `optim.lr=1e-4`, a string to YAML, is the float 1e-4); `section` is the key's first part when `cls`
    is a config of its own (`dmd`, `vae`, `decoder`). An unknown field lists the valid ones; a value of
    the wrong type names the field and the type it needs."""
    import yaml

    for assignment in sets:
        path, text = parse_set(assignment)
        key = ".".join(path)
        if section:
            _check(path[0] == section and len(path) > 1, f"--set {key}: not a {section}.* field; valid: "
                                                         f"{', '.join(sorted(section + '.' + f.name for f in fields(cls)))}")
            path = path[1:]
        node, owner, prefix = data, cls, section + "." if section else ""
        for i, part in enumerate(path):
            hints = _hints(owner)
            if part not in hints:
                what = "model field" if prefix.startswith("model.") else "field"
                raise ConfigError(f"--set {key}: unknown {what}; valid here: "
                                  f"{', '.join(sorted(prefix + f.name for f in fields(owner)))}")
            sub = _section_type(owner, part, hints[part])
            if i == len(path) - 1:
                try:
                    value = yaml.safe_load(text) if text.strip() else ""
                except yaml.YAMLError as err:
                    raise ConfigError(f"--set {assignment!r}: cannot parse the value ({err})") from err
                if value is not None and not isinstance(value, str) and str in (hints[part], *typing.get_args(hints[part])):
                    value = text.strip()  # a string field takes the text as written (a folder named 2024, `yes`)
                if sub is not None:  # a whole section given as a mapping, checked when the config is built
                    _check(isinstance(value, dict), f"{prefix}{part} must be a mapping, got {value!r}")
                    node[part] = value
                else:
                    node[part] = _coerce(value, hints[part], prefix + part)
                break
            if sub is None:
                sections = [prefix + n for n, h in hints.items() if _section_type(owner, n, h)]
                raise ConfigError(f"--set {key}: {prefix}{part} is a field, not a section"
                                  + (f"; sections here: {', '.join(sorted(sections))}" if sections else ""))
            if not isinstance(node.get(part), dict):  # model overrides hold only the fields given
                node[part] = {}
            node, owner, prefix = node[part], sub, prefix + part + "."
    return data


def load_file(path: str | Path) -> dict:
    """A YAML or JSON file of (partial) TrainConfig fields."""
    import yaml

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    _check(isinstance(data, dict), f"config file {path} must hold a mapping of fields")
    return data


def resolve_config(preset: str, file: str | Path | None = None, sets: list[str] | tuple[str, ...] = (),
                   base: dict | None = None, **fields_: Any) -> TrainConfig:
    """preset (or `base`, a resumed run's saved config) -> file -> keyword fields (CLI flags such as
    max_steps) -> `--set` assignments."""
    if base is not None:
        _check(base.get("preset") == preset,
               f"the run to resume was trained with preset {base.get('preset')!r}, not {preset!r}")
    data = dict(base) if base is not None else train_preset(preset).to_dict()
    if file is not None:
        data = _merge(data, load_file(file))
        _check(data.get("preset", preset) == preset,
               f"config file {file} is for preset {data.get('preset')!r} but --preset is {preset!r}")
    for key, value in fields_.items():
        if value is not None:
            data[key] = value
    apply_sets(TrainConfig, data, sets)
    config = TrainConfig.from_dict(data)
    config.model_config()  # validate the model overrides now, with a config error
    return config


def format_config(config: TrainConfig) -> str:
    """The resolved config as YAML (printed at start)."""
    import yaml

    return yaml.safe_dump(config.to_dict(), sort_keys=False, default_flow_style=None).rstrip()


__all__ = [
    "ConfigError", "TrainConfig", "OptimConfig", "DataConfig", "ContextConfig", "CheckpointConfig",
    "ValidationConfig", "TRAIN_PRESETS", "train_preset", "resolve_config", "parse_set", "apply_sets",
    "build_config", "split_sets", "format_config", "load_file",
]
