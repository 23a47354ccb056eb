"""`wtf benchmark run`: generate every case of a suite with a model (or a baseline), read the frames
with the probe, and score them against the emulator's RAM (benchmark/scoring.py).

    variants = plan_variants(checkpoint="runs/s3", keys=["real", "zero"], baselines=True)
    run_benchmark(Suite("suite/"), load_probe("probe/"), variants, Path("report/"))

A variant is a model and a key mode: `emulator` (the recorded frames: the ceiling, i.e. the probe's
own accuracy), `first-frame` (the prompt repeated: the floor), `last-frame` (over each 8-row chunk, the
recorded row just before it: the floor of a teacher-forced score, what continuing the true context
without moving anything scores), `vae` (the recorded frames encoded and
decoded by a VAE: the ceiling of any model that decodes with it), or a checkpoint with the case's keys
(`real`), no keys (`zero`) or each player given the other's keys (`swap-players`). Generation is the
`wtf generate` path: `inference.generation.stream_chunks`, chunk by chunk over the rolling KV cache.
The emulator takes the ablated key modes too (`--model emulator --keys zero`): it replays the case's
recorded episode up to the prompt and then presses the ablated keys, which is what a model that follows
the keys perfectly would show, so an ablation row of a checkpoint has a reference to be read against.

Each scored case is written at once to REPORT_DIR/variants/<variant>/cases/<case>.json (temporary
name, then rename), so an interrupted run keeps what it scored and `--resume` scores the rest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from wantofight.benchmark import scoring as sc
from wantofight.benchmark.episodes import GameInfo
from wantofight.benchmark.labels import STATE_CLASSES
from wantofight.benchmark.probe import Probe, ProbeError, probe_digest, to_probe_pixels
from wantofight.benchmark.scenarios import SCENARIOS
from wantofight.benchmark.suite import Case, Suite
from wantofight.outputs import write_atomic

MODELS = ("checkpoint", "emulator", "first-frame", "last-frame", "vae")
CHUNK_ROWS = 8
"""Rows of a model's chunk (L = 8, docs/model.md): the `last-frame` baseline holds a recorded row that long."""
KEY_MODES = ("real", "zero", "swap-players")
REPORT_VERSION = 1
PIECE_ROWS = 64
"""A case's rows go through the producer, the probe, the metrics and the side-by-side video this many at a
time, so memory does not grow with a case's length (a 60-s case at 60 fps is 3,600 rows; its side-by-side
video at 3x alone would hold about 10 GB at once)."""
PSNR_CAP = 100.0
"""dB given to identical frames (the emulator against itself), so the report holds numbers, not inf."""

FIDELITY_FRAMES = 64
"""SSIM and LPIPS read at most this many generated frames of a case, spread evenly (SSIM costs
~30 ms a frame on a CPU, and a long case has 1,800); PSNR reads every frame."""


class BenchmarkError(ValueError):
    """Inputs that cannot be benchmarked together; the message names the mismatch."""


@dataclass(frozen=True)
class Variant:
    model: str
    keys: str = "real"
    checkpoint: str | None = None
    steps: int | None = None
    sampler: str | None = None
    vae: str | None = None
    """For model `vae`: `tiny` or a `wtf train vae` / Wan2.1 diffusers folder."""
    teacher_forced: bool = False
    """For model `checkpoint`: each chunk is generated from the recorded (encoded) chunks before it, not
    from the model's own: its error is the model's one-chunk error, not its past's (`--teacher-forced`)."""

    @property
    def name(self) -> str:
        if self.model == "vae":
            return f"vae {Path(self.vae).name}"
        if self.model != "checkpoint":
            return self.model if self.keys == "real" else f"{self.model} keys={self.keys}"
        label = (Path(self.checkpoint).name if self.checkpoint else "checkpoint") + \
            (" teacher-forced" if self.teacher_forced else "")
        return label if self.keys == "real" else f"{label} keys={self.keys}"

    @property
    def slug(self) -> str:
        if self.model == "vae":  # by the weights, so results of a retrained VAE in the same folder are not reused
            return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"vae-{Path(self.vae).name}-{vae_digest(self.vae)}")
        if self.model != "checkpoint":
            return self.model if self.keys == "real" else f"{self.model}-{self.keys}"
        digest = hashlib.sha1(str(Path(self.checkpoint).resolve()).encode()).hexdigest()[:8]
        forced = "-teacher-forced" if self.teacher_forced else ""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{Path(self.checkpoint).name}-{digest}-{self.keys}{forced}")


@functools.lru_cache(maxsize=None)
def vae_digest(spec: str) -> str:
    """SHA-1 of a VAE folder's weights (a Wan2.1 VAE is hundreds of MB: read once per process)."""
    weights = sorted(Path(spec).glob("**/*.safetensors")) if spec != "tiny" else []
    digest = hashlib.sha1(spec.encode() if spec == "tiny" else b"")
    for f in weights:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:8]


def plan_variants(checkpoint: str | Path | None = None, models: list[str] | None = None,
                  keys: list[str] | None = None, baselines: bool = True, steps: int = 4,
                  sampler: str | None = None, vae: str | Path | None = None,
                  teacher_forced: bool = False) -> list[Variant]:
    """The variants one `wtf benchmark run` scores, in report order (baselines first); `teacher_forced`
    adds each checkpoint variant's teacher-forced twin after it."""
    keys = keys or ["real"]
    bad = [k for k in keys if k not in KEY_MODES]
    if bad:
        raise BenchmarkError(f"--keys {','.join(bad)}: valid key modes are {', '.join(KEY_MODES)}")
    models = list(models or (["checkpoint"] if checkpoint else ["emulator", "first-frame"]))
    replayed = "emulator" in models  # named: the emulator also replays the ablated key modes
    bad = [m for m in models if m not in MODELS]
    if bad:
        raise BenchmarkError(f"--model {','.join(bad)}: valid models are {', '.join(MODELS)}")
    if "checkpoint" in models and checkpoint is None:
        raise BenchmarkError("--model checkpoint needs --checkpoint CKPT (a trainer run or checkpoint folder)")
    if checkpoint is not None and "checkpoint" not in models:
        models.append("checkpoint")
    if "vae" in models and vae is None:
        raise BenchmarkError("--model vae needs --vae VAE_DIR (a `wtf train vae` folder, a Wan2.1 diffusers "
                             "folder, or tiny)")
    if vae is not None and "vae" not in models:
        models.append("vae")
    if vae is not None and str(vae) != "tiny" and not (Path(vae) / "config.json").is_file():
        raise BenchmarkError(f"--vae {vae}: no VAE there (a `wtf train vae` folder or a Wan2.1 diffusers folder "
                             "holds config.json; or pass tiny)")
    if checkpoint is not None and not Path(checkpoint).exists():  # a shipped model's name: its folder
        from wantofight.inference.generation import resolve_checkpoint

        try:
            checkpoint = resolve_checkpoint(checkpoint)
        except FileNotFoundError as err:
            raise BenchmarkError(str(err)) from None
    if teacher_forced and "checkpoint" not in models:
        raise BenchmarkError("--teacher-forced scores a checkpoint from the recorded context: give --checkpoint")
    if keys != ["real"] and "checkpoint" not in models and not replayed:
        raise BenchmarkError(f"--keys {','.join(keys)} changes what a checkpoint or the emulator is given; the "
                             "first-frame and vae baselines have no keys to change")
    if baselines:
        floors = ["first-frame", "last-frame"] if teacher_forced else ["first-frame"]
        models = ["emulator", *floors] + [m for m in models if m not in ("emulator", *floors)]
    out = []
    for model in dict.fromkeys(models):
        if model == "checkpoint":
            out += [Variant("checkpoint", k, str(checkpoint), steps, sampler, teacher_forced=forced)
                    for k in keys for forced in ((False, True) if teacher_forced else (False,))]
        elif model == "vae":
            out.append(Variant("vae", vae=str(vae)))
        elif model == "emulator":
            out += [Variant("emulator")] + [Variant("emulator", k) for k in keys if k != "real" and replayed]
        else:
            out.append(Variant(model))
    return out


# ---------------------------------------------------------------------------------------------
# Producing a case's frames
# ---------------------------------------------------------------------------------------------

def case_masks(case: Case, mode: str) -> np.ndarray:
    """(N + 1, 2) key masks for a key mode; row 0 (the prompt's) stays as recorded."""
    masks = case.keys.copy()
    if mode == "zero":
        masks[1:] = 0
    elif mode == "swap-players":
        masks[1:] = case.keys[1:, ::-1]
    return masks


def recording_of(case: Case) -> Path:
    """The episode folder a case was cut from; the emulator's ablations replay it."""
    path = Path(case.episode_path or "")
    if not case.episode_path or not (path / "inputs.bk2").is_file():
        raise BenchmarkError(f"case {case.case_id}: its recording {case.episode_path} is not here (the emulator "
                             "replays it to press other keys; run from the folder the suite was built in, where "
                             "its paths lead, or score the emulator with --keys real)")
    return path


def resized(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(T, h, w, 3) uint8 -> (T, H, W, 3) uint8 by the training data path."""
    return to_probe_pixels(frames, size).permute(0, 2, 3, 1).numpy()


class Producer:
    """Frames of a case at the scoring size for one variant, piece by piece beside the recorded ones
    (`pairs`), or whole (`__call__`: (N + 1, H, W, 3) uint8 and the wall time of each generated chunk,
    none for the baselines)."""

    def __init__(self, variant: Variant, size: tuple[int, int], loaded=None, seed: int = 0):
        self.variant, self.size, self.loaded, self.seed = variant, size, loaded, seed
        self.seconds: list[float] = []

    def __call__(self, case: Case, real: np.ndarray) -> tuple[np.ndarray, list[float]]:
        return np.concatenate([made for _, made in self.pairs(case, iter([real]))]), self.seconds

    def pairs(self, case: Case, pieces) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(recorded piece, produced piece) of equal length for each recorded piece of rows 0..N in
        turn. The emulator, the first frame and a checkpoint keep one piece (or chunk) in memory; the
        replayed emulator and the VAE's round trip make the whole case at once."""
        self.seconds = []
        pieces = iter(pieces)
        first = next(pieces)
        model, keys = self.variant.model, self.variant.keys
        if model == "emulator" and keys == "real":
            for piece in chain([first], pieces):  # the recorded frames themselves
                yield piece, piece
            return
        if model == "first-frame":
            for piece in chain([first], pieces):
                yield piece, np.repeat(first[:1], len(piece), axis=0)
            return
        if model == "last-frame":
            yield from held_chunks(chain([first], pieces))
            return
        if model == "vae":
            real = np.concatenate([first, *pieces])
            pieces, made = iter([real]), iter([self.roundtrip(real)])
        elif model == "emulator":
            pieces, made = chain([first], pieces), iter([self.replayed(case)])
        else:
            pieces, made = chain([first], pieces), self.generate(case, first[:1])
        yield from aligned(pieces, made)

    def replayed(self, case: Case) -> np.ndarray:
        """The case's episode replayed up to the prompt, then with the variant's keys (collect/replay.py)."""
        from wantofight.collect.replay import ReplayError, replay_frames

        try:
            native = replay_frames(recording_of(case), case.start_row, case_masks(case, self.variant.keys))
        except ReplayError as err:
            raise BenchmarkError(f"case {case.case_id}: {err}") from None
        return resized(native, self.size)

    @torch.no_grad()
    def roundtrip(self, real: np.ndarray) -> np.ndarray:
        """The case's frames encoded and decoded by the VAE (padded to 1 + 4k frames with the last one)."""
        from wantofight.datasets.frames import resize_to_model
        from wantofight.inference.generation import to_uint8

        if self.loaded is None:
            from wantofight.datasets.encoders import load_vae

            self.loaded = load_vae(self.variant.vae)[0]
        frames = resize_to_model(real, real.shape[1:3]).transpose(0, 1)  # (3, T, H, W) in [-1, 1], the data path's
        pad = (-(len(real) - 1)) % 4
        frames = torch.cat([frames, frames[:, -1:].expand(-1, pad, -1, -1)], dim=1)[None]
        return to_uint8(self.loaded.decode(self.loaded.encode(frames))[0, :, :len(real)])

    def generate(self, case: Case, real: np.ndarray, masks: np.ndarray | None = None) -> Iterator[np.ndarray]:
        """The prompt frame, then each generated chunk as it comes; its wall time goes to self.seconds
        (the time spent in the model only: scoring a chunk happens between two of them). `masks` (rows 0..n,
        2) are pressed instead of the variant's keys (bench/key_directions.py's counterfactual keys)."""
        from wantofight.datasets.frames import square_resize
        from wantofight.inference.generation import prompt_frames, stream_chunks

        config = self.loaded.config
        prompt = prompt_frames(real[:1], config, 1)
        refs = torch.stack([square_resize(r, config.clip_image_size) for r in case.refs])[None]
        truth = case.frame_pieces(config.chunk_frames, start=1) if self.variant.teacher_forced else None
        masks = case_masks(case, self.variant.keys) if masks is None else masks
        yield real[:1]
        t0 = time.perf_counter()
        chunks = stream_chunks(self.loaded, prompt, masks, refs, self.variant.steps or 4, self.variant.sampler,
                               self.seed, true_frames=truth)
        for k, (frames, _) in enumerate(chunks):
            if k > 0:  # chunk 0 is the decoded prompt; the case's own prompt frame stands for it
                self.seconds.append(time.perf_counter() - t0)
                yield frames
            t0 = time.perf_counter()


def held_chunks(pieces) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(recorded piece, produced piece): row 0 as it is, then over each chunk of CHUNK_ROWS rows the recorded
    row just before the chunk (rows 1-8 show row 0, rows 9-16 row 8, ...)."""
    held = previous = None
    row = 0
    for piece in pieces:
        made = np.empty_like(piece)
        for i in range(len(piece)):
            if row == 0 or (row - 1) % CHUNK_ROWS == 0:
                held = piece[i] if row == 0 else previous
            made[i] = held
            previous = piece[i]
            row += 1
        yield piece, made


def aligned(pieces, made) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Recorded pieces and produced frames in chunks of any length -> pairs of equal length."""
    buffer = None
    for piece in pieces:
        while buffer is None or len(buffer) < len(piece):
            more = next(made)
            buffer = more if buffer is None else np.concatenate([buffer, more])
        yield piece, buffer[:len(piece)]
        buffer = buffer[len(piece):]


# ---------------------------------------------------------------------------------------------
# Scoring one case
# ---------------------------------------------------------------------------------------------

@dataclass
class Stage:
    """What a case's frames are compared with to count extra fighters (scoring.extra_fighter_pixels)."""

    picture: np.ndarray
    """(H, W, 3) uint8: the per-pixel median of the case's recorded frames."""
    band: tuple[int, int]
    """Model rows [top, bottom) the fighters are drawn in."""
    x: np.ndarray
    """(N + 1, 2) both fighters' true x as model columns (nan where unknown)."""


def stage_of(case: Case, game: GameInfo, native: tuple[int, int], size: tuple[int, int]) -> Stage:
    """The stage of a case of `game`, recorded at `native` (H, W) and scored at `size`."""
    from wantofight.benchmark.probe_net import Screen

    screen = Screen(tuple(native), game.crop_left, game.crop_top)
    picture = sc.stage_picture(resized(case.frames_at(sc.spread(case.rows, sc.STAGE_FRAMES)), size))
    return Stage(picture, sc.fighter_band(case.truth, game.rules.sprites, screen, size),
                 sc.model_x(case.truth, screen, size[1]))


class CaseScore:
    """Every number of one case, fed its rows 0..N a piece at a time (row 0 is the prompt, never
    scored): what is kept per row is a few numbers, plus the FIDELITY_FRAMES frames SSIM and LPIPS read."""

    def __init__(self, case: Case, probe: Probe, stage: Stage):
        self.case, self.probe, self.stage = case, probe, stage
        self.fidelity_rows = sc.spread(case.rows - 1, FIDELITY_FRAMES) + 1
        self.reads, self.mse, self.extra, self.real, self.made = [], [], [], [], []
        self.row = 0

    def add(self, real: np.ndarray, frames: np.ndarray) -> None:
        """The next rows: (n, H, W, 3) uint8 recorded and produced."""
        a, b = self.row, self.row + len(frames)
        self.reads.append(self.probe.read(frames))
        self.mse.append(sc.mse_rows(frames, real))
        self.extra.append(sc.extra_fighter_pixels(frames, self.stage.picture, self.stage.x[a:b], self.stage.band))
        keep = self.fidelity_rows[(self.fidelity_rows >= a) & (self.fidelity_rows < b)] - a
        self.real.append(real[keep])
        self.made.append(frames[keep])
        self.row = b

    def result(self, frame_skip: int, lpips_net=None) -> dict:
        from wantofight.fidelity import psnr_db, score as fidelity

        case = self.case
        read = {name: np.concatenate([r[name] for r in self.reads]) for name in self.reads[0]}
        signals = [sc.true_signals(case.truth, p, frame_skip, len(STATE_CLASSES)) for p in (0, 1)]
        result = {"case_id": case.case_id, "scenario": case.scenario, "family": case.family, "label": case.label,
                  "actor": case.actor, "rows": case.rows}
        for p, name in ((0, "p1"), (1, "p2")):
            cls, dirs, both = sc.follows(read, p, signals[p], frame_skip)
            rows = signals[p].scored
            result[name] = {"follow": mean_or_none(both[rows]), "state": mean_or_none(cls[rows]),
                            "direction": mean_or_none(dirs[rows]), "rows": int(rows.sum())}
        if case.family == "identity":
            result["binding"] = sc.binding(read, signals, frame_skip)
        result["found"] = float(read["found"][1:].all(axis=1).mean())  # both fighters found (on-model frames)
        err = sc.position_error(read, case.truth)[1:]  # (N, 2)
        result["x_error"] = [[None if np.isnan(v) else round(float(v), 2) for v in err[:, p]] for p in (0, 1)]
        result["extra_fighters"] = sc.per_chunk(np.concatenate(self.extra)[1:])
        mse = np.concatenate(self.mse)[1:]
        _, ssim, lp = fidelity(np.concatenate(self.made), np.concatenate(self.real), lpips_net)
        result.update({"psnr": psnr_db(mse.mean(), cap=PSNR_CAP), "ssim": ssim, "lpips": lp,
                       "psnr_rows": [round(float(v), 2) for v in psnr_db(mse, cap=PSNR_CAP)]})
        return result


def score_case(case: Case, pairs, probe: Probe, stage: Stage, frame_skip: int, lpips_net=None, video=None) -> dict:
    """Score a case from its (recorded, produced) pieces of rows 0..N; `video(pieces)`, if given, is
    handed the same pieces as (first row, recorded, produced) while they are scored."""
    score = CaseScore(case, probe, stage)

    def fed():
        for real, frames in pairs:
            start = score.row
            score.add(real, frames)
            yield start, real, frames

    if video is not None:
        video(fed())
    else:
        for _ in fed():
            pass
    return score.result(frame_skip, lpips_net)


def mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

def check_inputs(suite: Suite, probe: Probe, size: tuple[int, int], what: str) -> None:
    if probe.game != suite.meta["game"]:
        raise BenchmarkError(f"the probe reads {probe.game} frames; the suite is {suite.meta['game']}")
    if tuple(probe.size) != tuple(size):
        raise BenchmarkError(f"the probe reads {probe.size[0]}x{probe.size[1]} frames; {what} "
                             f"{size[0]}x{size[1]}: train a probe with --size {size[0]}x{size[1]}")
    if probe.meta.get("fps") != suite.meta["fps"]:
        raise BenchmarkError(f"the probe was trained on {probe.meta.get('fps')} fps recordings; the suite is at "
                             f"{suite.meta['fps']} fps")


def load_checkpoint(variant: Variant, suite: Suite, probe: Probe, device: str):
    from wantofight.inference.generation import load_generator

    loaded = load_generator(variant.checkpoint, device=device)
    config = loaded.config
    check_inputs(suite, probe, (config.height, config.width), f"the checkpoint {variant.checkpoint} generates")
    layout = checkpoint_layout(loaded.source)
    if layout is not None and layout != suite.meta.get("key_layout_version"):
        raise BenchmarkError(f"the checkpoint uses key layout version {layout}; the suite's keys are version "
                             f"{suite.meta.get('key_layout_version')}")
    if config.num_players != 2:
        raise BenchmarkError(f"the checkpoint binds {config.num_players} players; the suite has 2")
    return loaded


def checkpoint_layout(source: str) -> int | None:
    path = Path(source.split(" (")[0])
    config = path / "config.json"
    return json.loads(config.read_text()).get("key_layout_version") if config.is_file() else None


def checkpoint_digest(source: str) -> str:
    path = Path(source.split(" (")[0])
    files = [path / "model.safetensors", path / "ema.safetensors"] if path.is_dir() else [path]
    digest = hashlib.sha1()
    for f in files:
        if f.is_file():
            digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def prepare_report_dir(out: Path, suite: Suite, probe_dir: Path) -> dict:
    """Create or reopen REPORT_DIR; a folder holding another suite's or probe's results is refused."""
    out.mkdir(parents=True, exist_ok=True)
    ident = {"report_version": REPORT_VERSION, "suite": str(suite.path), "suite_digest": suite.digest,
             "probe": str(probe_dir), "probe_digest": probe_digest(probe_dir)}
    path = out / "run.json"
    if path.is_file():
        old = json.loads(path.read_text())
        for key in ("suite_digest", "probe_digest"):
            if old.get(key) != ident[key]:
                raise BenchmarkError(f"{out} holds results for another {key.split('_')[0]} ({old.get(key.split('_')[0])}, "
                                     f"{key} {old.get(key)}); add --overwrite to replace them, or choose another --out")
        return old
    write_atomic(path, json.dumps(ident, indent=1) + "\n")
    return ident


def same_report(out: Path, suite: Suite, probe_dir: Path) -> bool:
    """True when `out` is a report folder of this suite and probe (the variants of one comparison)."""
    try:
        old = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return old.get("suite_digest") == suite.digest and old.get("probe_digest") == probe_digest(probe_dir)


def run_variant(suite: Suite, probe: Probe, variant: Variant, out: Path, *, loaded=None, resume: bool = False,
                max_cases: int | None = None, scenarios: set[str] | None = None, videos: int = 2, lpips_net=None,
                device: str = "cpu", on_case=None, piece_rows: int | None = PIECE_ROWS) -> dict:
    """Score every case of the suite for one variant (at most `max_cases` per scenario, and per player
    and action of single-action cases), `piece_rows` rows of a case at a time (None: whole cases)."""
    vdir = out / "variants" / variant.slug
    cases_dir = vdir / "cases"
    # The baselines depend on the suite and the probe only (both fixed per report folder): reused as they are.
    reuse = resume or variant.model != "checkpoint"
    if cases_dir.is_dir() and any(cases_dir.glob("*.json")) and not reuse:
        raise BenchmarkError(f"{out} already holds results of {variant.name}; pass --resume to finish that run, "
                             "--overwrite to replace the folder, or choose another --out")
    size = (loaded.config.height, loaded.config.width) if loaded is not None else probe.size
    info = {**asdict(variant), "name": variant.name, "slug": variant.slug, "size": list(size), "device": device,
            "checkpoint_digest": checkpoint_digest(loaded.source) if loaded is not None else None,
            "source": loaded.source if loaded is not None else None,
            "sampler": (variant.sampler or loaded.default_sampler) if loaded is not None else None}
    if loaded is not None and (vdir / "variant.json").is_file() and any(cases_dir.glob("*.json")):
        before = json.loads((vdir / "variant.json").read_text())
        for key, what in (("checkpoint_digest", "weights"), ("steps", "--steps"), ("sampler", "--sampler")):
            if before.get(key) != info[key]:  # e.g. retrained in place: old cases must not stand for these
                raise BenchmarkError(f"{out} holds results of {variant.name} with other {what} ({before.get(key)}, "
                                     f"now {info[key]}); choose another --out, or delete {vdir} to score these")
    cases_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(vdir / "variant.json", json.dumps(info, indent=1) + "\n")
    produce = Producer(variant, size, loaded)
    seen: dict[str, int] = {}
    scored = skipped = 0
    for case in suite.cases():
        if scenarios is not None and case.scenario not in scenarios:
            continue
        bucket = case_bucket(case)
        seen[bucket] = seen.get(bucket, 0) + 1
        if max_cases is not None and seen[bucket] > max_cases:
            continue
        path = cases_dir / f"{case.case_id}.json"
        if path.is_file():
            skipped += 1
            continue
        pairs = produce.pairs(case, (resized(piece, size) for piece in case.frame_pieces(piece_rows)))
        video = None
        if sum(n for b, n in seen.items() if b.split("/")[0] == case.scenario) <= videos:
            video_path = vdir / "videos" / f"{case.case_id}.mp4"
            video = functools.partial(write_side_by_side, video_path, case=case, fps=int(suite.meta["fps"]))
        stage = stage_of(case, suite.game, suite.meta["native_size"], size)
        result = score_case(case, pairs, probe, stage, suite.frame_skip, lpips_net, video)
        result["chunk_seconds"] = produce.seconds
        if video is not None:
            result["video"] = f"variants/{variant.slug}/videos/{case.case_id}.mp4"
        write_atomic(path, json.dumps(result) + "\n")
        scored += 1
        if on_case is not None:
            on_case(variant, case, result)
    return {"variant": variant.name, "scored": scored, "already": skipped}


def case_bucket(case: Case) -> str:
    """What `--max-cases` counts in: the scenario, or the player and action of a single-action case."""
    return f"{case.scenario}/P{case.actor} {case.label}" if case.scenario == "single-action" else case.scenario


def cases_to_score(suite: Suite, max_cases: int | None, scenarios: set[str] | None = None) -> int:
    buckets = {k: b for k, b in suite.meta["buckets"].items() if scenarios is None or k.split("/")[0] in scenarios}
    return sum(b["kept"] if max_cases is None else min(max_cases, b["kept"]) for b in buckets.values())


def parse_scenarios(text: str | None) -> set[str] | None:
    """`static,long` -> {"static", "long"} (None: every scenario); unknown names are refused."""
    if not text:
        return None
    names = {n.strip() for n in text.split(",") if n.strip()}
    bad = sorted(names - set(SCENARIOS))
    if bad:
        raise BenchmarkError(f"--scenarios {','.join(bad)}: valid scenarios are {', '.join(SCENARIOS)}")
    return names


VIDEO_ROWS = 16
"""Rows of a side-by-side video drawn at a time: a native-size pair with its HUD is 14 MB a frame."""

VIDEO_WIDTH = 800
"""The emulator | generated pair is upscaled by the largest integer (at most 3) that keeps it this wide
before the HUD's own 2x: 3x for 128x128 models, 1x for the native 240-wide frames."""


def write_side_by_side(path: Path, pieces, case: Case, fps: int) -> None:
    """emulator | generated, upscaled (VIDEO_WIDTH), titled, both players' key HUD under them (wantofight/hud.py),
    browser-playable; `pieces` are (first row, recorded, generated) in row order, drawn VIDEO_ROWS rows at
    a time and encoded as they come."""
    from wantofight.hud import add_titles, render_hud
    from wantofight.annotate.inspect_clip import write_mp4

    before = np.concatenate([np.zeros((1, 2), np.uint16), case.keys[:-1]])
    pressed = case.keys & ~before  # over the whole case, so a piece's first row knows the row before it

    def drawn():
        for start, real, frames in pieces:
            up = max(1, min(3, VIDEO_WIDTH // (2 * real.shape[2] + 2)))
            for i in range(0, len(real), VIDEO_ROWS):
                a, b = start + i, start + min(len(real), i + VIDEO_ROWS)
                gap = np.full((b - a, real.shape[1], 2, 3), 255, np.uint8)
                both = np.concatenate([real[i:i + VIDEO_ROWS], gap, frames[i:i + VIDEO_ROWS]], axis=2)
                both = np.repeat(np.repeat(both, up, axis=1), up, axis=2)
                hud = render_hud(both, case.keys[a:b, 0], case.keys[a:b, 1], start_index=a, scale=2,
                                 episode_rows=False, p1_pressed=pressed[a:b, 0], p2_pressed=pressed[a:b, 1],
                                 timeline_span=(0, case.rows))
                yield add_titles(hud, [(0, "EMULATOR"), ((real.shape[2] + 2) * up * 2, "GENERATED")], scale=2)

    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, drawn(), fps)  # under a temporary name, then renamed


def run_benchmark(suite: Suite, probe: Probe, probe_dir: Path, variants: list[Variant], out: Path, *,
                  resume: bool = False, max_cases: int | None = None, scenarios: set[str] | None = None,
                  videos: int = 2, device: str = "cpu", lpips_backbone=None, lpips: bool = True, on_case=None,
                  log=None, overwrite: bool = False) -> dict:
    """Score each variant into REPORT_DIR and write report.json and index.html. A REPORT_DIR of the same
    suite and probe gains the variants; anything else is refused, or with `overwrite` replaced by a new
    report folder once it is complete (`overwrite` with `resume`: finish such a replacement)."""
    from wantofight import outputs
    from wantofight.benchmark.report import write_report
    from wantofight.fidelity import lpips_metric

    log = log or (lambda m: None)
    final = out
    same = not overwrite and same_report(out, suite, probe_dir)
    out = outputs.claim(out, overwrite, resume=resume, ours=lambda entry: same)
    if any(v.model == "emulator" and v.keys != "real" for v in variants):
        for case in suite.cases():  # every recording there before anything is written
            recording_of(case)
    prepare_report_dir(out, suite, probe_dir)
    if not any(v.model == "checkpoint" for v in variants):
        check_inputs(suite, probe, probe.size, "the baselines are scored at")
    net, backend = lpips_metric(lpips_backbone) if lpips else (None, "not computed (--no-lpips)")
    log(f"LPIPS: {backend}")
    loaded, summary = {}, []
    for variant in variants:
        model = None
        if variant.model == "checkpoint":
            if variant.checkpoint not in loaded:
                loaded[variant.checkpoint] = load_checkpoint(variant, suite, probe, device)
            model = loaded[variant.checkpoint]
        log(f"scoring {variant.name}")
        summary.append(run_variant(suite, probe, variant, out, loaded=model, resume=resume, max_cases=max_cases,
                                   scenarios=scenarios, videos=videos, lpips_net=net, device=device, on_case=on_case))
    report = write_report(out, lpips_backend=backend)
    outputs.swap_in(out, final)
    return {"runs": summary, "report": report}


__all__ = ["BenchmarkError", "ProbeError", "Variant", "plan_variants", "run_benchmark", "run_variant"]
