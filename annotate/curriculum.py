"""`wtf build-curriculum`: annotate where needed, plan clips, encode them, write shards + manifest.

Episodes are streamed: planning reads only annotations, each worker encodes one episode at a time
and writes its rows out in small row groups, and shards are assembled from those part files a few
rows at a time. The main process holds clip plans (metadata), never videos.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from wantofight import outputs
from wantofight.annotate import clips as cl
from wantofight.annotate.episode import EpisodeError, episode_dirs
from wantofight.annotate.manifest import build_manifest, write_manifest
from wantofight.annotate.shards import TMP_PREFIX, merge_parts, shard_schema, write_parts


class BuildError(RuntimeError):
    """A build that cannot run or (with --strict) met a bad episode; the message says which."""


@dataclass(frozen=True)
class BuildOptions:
    """Everything that shapes the dataset (stored in the manifest; workers are left out on purpose:
    they change speed, never content)."""

    clip_frames: int = 161
    """Training window in frames (161 = the paper's); also the padded length of action clips."""
    stride: int | None = None
    """Step between full-match windows (default: clip_frames, no overlap)."""
    tiers: tuple[str, ...] = cl.TIERS
    val_fraction: float = 0.1
    """Share of episodes (not clips) that go to val."""
    shard_size_mb: float = 256.0
    exclude: str | None = None
    """Curators' exclude file (docs/curriculum.md)."""
    seed: int = 0
    context: int = 4
    """Neutral rows kept on each side of a single- or dual-action instance (at most)."""
    balance: bool = True
    """Cut the single-action tier to the same count per (move, side)."""
    strict: bool = False
    """Fail on a bad episode instead of skipping it."""

    def __post_init__(self) -> None:
        if self.clip_frames < 2:
            raise BuildError(f"--clip-frames must be at least 2, got {self.clip_frames}")
        if self.stride is not None and self.stride < 1:
            raise BuildError(f"--stride must be at least 1, got {self.stride}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise BuildError(f"--val-fraction must be in [0, 1), got {self.val_fraction}")
        if self.shard_size_mb <= 0:
            raise BuildError(f"--shard-size-mb must be positive, got {self.shard_size_mb}")
        bad = [t for t in self.tiers if t not in cl.TIERS]
        if bad or not self.tiers:
            raise BuildError(f"unknown tiers {bad}; valid tiers: {', '.join(cl.TIERS)}")

    @property
    def window_stride(self) -> int:
        return self.stride or self.clip_frames

    def cut_options(self) -> cl.CutOptions:
        return cl.CutOptions(self.clip_frames, self.window_stride, self.context)

    def digest(self) -> str:
        options = asdict(self)
        options["exclude"] = None  # excluded clips are dropped before encoding; parts never hold them
        return hashlib.sha1(json.dumps(options, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class EpisodePlan:
    """One episode as planning saw it: its identity, clips, or why it was skipped."""

    path: str
    run: str
    episode_id: str
    uid: str = ""
    info: dict = field(default_factory=dict)
    plans: list[dict] = field(default_factory=list)
    ram_names: list[str] = field(default_factory=list)
    event_counts: dict = field(default_factory=dict)
    not_computed: list = field(default_factory=list)
    skipped: str | None = None
    recording: str = ""
    """Digest of what the emulator was given (game, ROM, start state, fps, length, both players' keys):
    two episodes with the same one are the same recording, whatever policy or seed produced them."""
    duplicate_of: str | None = None
    """The path of the earlier input episode this one duplicates (it is then not used)."""


def plan_episode(path: str, run: str, options: BuildOptions) -> EpisodePlan:
    """Annotate (if needed) and plan one episode's clips; a broken episode comes back skipped."""
    from wantofight.annotate.annotate import annotate_path, read_annotation
    from wantofight.annotate.episode import load_episode

    plan = EpisodePlan(path=path, run=run, episode_id=Path(path).name)
    report = annotate_path(Path(path))
    if report["status"] == "skipped":
        plan.skipped = report["reason"]
        return plan
    try:
        episode = load_episode(Path(path))
        annotation = read_annotation(Path(path))
    except (EpisodeError, OSError, ValueError) as err:
        plan.skipped = str(err)
        return plan
    identity = episode.identity()
    plan.uid = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    given = {k: identity.get(k) for k in ("game", "rom_sha1", "start_state", "fps", "frame_count", "keys_sha1")}
    plan.recording = hashlib.sha1(json.dumps(given, sort_keys=True).encode()).hexdigest()[:16]
    policies = [v.get("spec", "") for _, v in sorted(episode.meta.get("policies", {}).items())]
    match_play = not any(spec in cl.MATCH_PLAY_EXCLUDED for spec in policies)
    frames = {name: annotation.frames.column(name).to_numpy(zero_copy_only=False)
              for name in annotation.frames.column_names}
    cuts = cl.cut_episode(frames, identity, options.tiers, options.cut_options(), match_play,
                          episode.columns.get("p1_x"), episode.columns.get("p2_x"),
                          frame_skip=int(episode.meta.get("frame_skip", 1)))
    plan.plans = [c.to_dict() for c in cuts]
    plan.ram_names = episode.ram_names
    plan.event_counts = annotation.meta.get("event_counts", {})
    plan.not_computed = annotation.meta.get("not_computed", [])
    plan.episode_id = episode.episode_id
    plan.info = {
        "episode_uid": plan.uid, "run": run, "padded_frames": options.clip_frames,
        "p1_policy": policies[0] if policies else None, "p2_policy": policies[1] if len(policies) > 1 else None,
        "game": episode.meta["game"], "meta": episode.meta,
    }  # fmt: skip
    return plan


def read_exclude(path: str | None) -> dict[str, str]:
    """clip_id → reason from a curators' exclude file (`{"version": 1, "clips": [...]}`)."""
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BuildError(f"--exclude {path}: unreadable ({err})") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("clips"), list):
        raise BuildError(f"--exclude {path}: expected {{\"version\": 1, \"clips\": [{{\"clip_id\": …, \"reason\": …}}]}}")
    out = {}
    for i, item in enumerate(data["clips"]):
        if not isinstance(item, dict) or not isinstance(item.get("clip_id"), str):
            raise BuildError(f"--exclude {path}: clips[{i}] has no clip_id string")
        out[item["clip_id"]] = str(item.get("reason", ""))
    return out


# ---------------------------------------------------------------------------------------------
# The build


def build_curriculum(run_dirs: list[Path], out: Path, options: BuildOptions, workers: int = 1,
                     progress: bool = True, warn=None, cluster=None, overwrite: bool = False) -> dict:
    """Build DS_DIR from recording runs; returns the manifest. Raises BuildError on bad input. With a
    Ray `cluster`, episodes are planned and cut by its actors (DS_DIR and the runs on a folder every
    node sees); the dataset is the same, byte for byte. An existing DS_DIR is refused, or with
    `overwrite` replaced once the new one is complete; the part files of an interrupted build are
    reused by the same command."""
    from wantofight.annotate.parallel import shared_workers

    warn = warn or (lambda message: None)
    out = Path(out)
    work = outputs.claim(out, overwrite, ours=leftover)
    with shared_workers(cluster, warn) as pool:  # on Ray: one set of actors plans and cuts
        manifest = _build(run_dirs, work, options, workers, progress, warn, pool)
    outputs.swap_in(work, out)
    return manifest


def leftover(entry: Path) -> bool:
    """What an interrupted build leaves in DS_DIR for the next one: its part files, and tier folders that
    hold only temporary shards."""
    if entry.name.startswith(".parts-"):
        return True
    return entry.is_dir() and entry.name in cl.TIERS and all(f.name.startswith(TMP_PREFIX) for f in entry.iterdir())


def _build(run_dirs: list[Path], out: Path, options: BuildOptions, workers: int, progress: bool, warn, cluster) -> dict:
    from wantofight.annotate.parallel import map_ordered

    excluded = read_exclude(options.exclude)
    jobs = []
    for run in run_dirs:
        try:
            paths = episode_dirs(Path(run))
        except EpisodeError as err:
            raise BuildError(str(err)) from None
        jobs += [(str(p), Path(run).name, options) for p in paths]
    if not jobs:
        raise BuildError(f"no episodes in {', '.join(map(str, run_dirs))}")
    episodes: list[EpisodePlan] = map_ordered(plan_episode, jobs, workers, "plan", progress, cluster, warn)

    good = [ep for ep in episodes if not ep.skipped]
    bad = [ep.skipped for ep in episodes if ep.skipped]
    if bad and options.strict:
        raise BuildError(f"bad episode (--strict): {bad[0]}")
    if not good:  # one line naming each bad file, not a warning for each and then the same as an error
        raise BuildError("every episode was skipped: " + "; ".join(bad))
    for reason in bad:
        warn(f"skipping episode: {reason}")
    duplicates = len(good) - len({ep.uid for ep in good})
    if duplicates:
        raise BuildError(f"{duplicates} episode(s) appear twice among the inputs (same recording given twice?)")
    good = drop_duplicate_recordings(good, warn)

    # Split within each source run, so every run (e.g. a one-episode drill run) reaches train.
    by_run: dict[Path, list[str]] = {}
    for ep in good:
        by_run.setdefault(Path(ep.path).parent.parent, []).append(ep.uid)
    splits = {uid: split for uids in by_run.values()
              for uid, split in cl.split_episodes(uids, options.val_fraction, options.seed).items()}
    selected, coverage, dropped = select_clips(good, options, excluded)
    ram_names = sorted({name for ep in good for name in ep.ram_names})
    schema = shard_schema(ram_names)

    parts_dir = out / f".parts-{options.digest()}"
    cut_jobs = []
    for ep in good:
        plans = [{**p, "split": splits[ep.uid]} for p in selected[ep.uid]]
        done = all((parts_dir / t / f"{ep.uid}.parquet").is_file() for t in {p["tier"] for p in plans})
        if plans and not done:
            cut_jobs.append((Path(ep.path), plans, ep.info | {"meta": None}, ram_names, parts_dir))
    results = map_ordered(cut_safely, cut_jobs, workers, "cut", progress, cluster, warn)
    for job, result in zip(cut_jobs, results):
        if isinstance(result, str):
            if options.strict:
                raise BuildError(f"bad episode (--strict): {result}")
            warn(f"skipping episode: {result}")
            ep = next(e for e in good if e.path == str(job[0]))
            ep.skipped = result
    good = [ep for ep in good if not ep.skipped]

    shards = write_shards(good, splits, selected, options, parts_dir, out, schema)
    manifest = build_manifest(run_dirs, episodes, good, splits, selected, shards, coverage, dropped, excluded,
                              options, ram_names)
    write_manifest(out, manifest)
    shutil.rmtree(parts_dir, ignore_errors=True)
    return manifest


def drop_duplicate_recordings(episodes: list[EpisodePlan], warn) -> list[EpisodePlan]:
    """The episodes without exact duplicates: the emulator is deterministic, so the same start state and
    keys give the same frames (a key-file run of several episodes, a deterministic policy pair). The
    first in input order is kept; each later one is marked `duplicate_of` it and named in a note."""
    first: dict[str, EpisodePlan] = {}
    kept = []
    for ep in episodes:
        same = first.setdefault(ep.recording, ep)
        if same is ep:
            kept.append(ep)
        else:
            ep.duplicate_of = same.path
            warn(f"skipping episode {ep.path}: the same start state and keys as {same.path} (an exact duplicate)")
    return kept


def cut_safely(path: Path, plans, info, ram_names, parts_dir) -> dict | str:
    """write_parts, with a broken episode reported as its error message (the build goes on)."""
    try:
        return write_parts(path, plans, info, ram_names, parts_dir)
    except (EpisodeError, OSError, ValueError) as err:
        return str(err)


def select_clips(episodes: list[EpisodePlan], options: BuildOptions, excluded: dict[str, str]):
    """Drop excluded clips, balance the single-action tier; returns ({uid: plans}, coverage, dropped)."""
    plans = [(ep.uid, cl.ClipPlan(**p)) for ep in episodes for p in ep.plans]
    dropped = {"excluded": sorted(p.clip_id for _, p in plans if p.clip_id in excluded), "balance": 0}
    plans = [(uid, p) for uid, p in plans if p.clip_id not in excluded]
    singles = [item for item in plans if item[1].tier == "single-action"]
    coverage = {}
    if singles:
        kept, coverage = cl.balance_singles(singles, options.seed) if options.balance else (singles, {})
        if not options.balance:
            for _, p in singles:
                entry = coverage.setdefault(f"{p.p1_move or p.p2_move}/{p.side or 'unknown'}", {"found": 0, "kept": 0})
                entry["found"] += 1
                entry["kept"] += 1
        kept_ids = {p.clip_id for _, p in kept}
        dropped["balance"] = len(singles) - len(kept)
        plans = [(uid, p) for uid, p in plans if p.tier != "single-action" or p.clip_id in kept_ids]
    selected: dict[str, list[dict]] = {ep.uid: [] for ep in episodes}
    for uid, p in plans:
        selected[uid].append(p.to_dict())
    return selected, coverage, dropped


def write_shards(episodes, splits, selected, options, parts_dir: Path, out: Path, schema) -> list[dict]:
    """Assemble parts into `out/<tier>/<split>-NNNNN.parquet`; stale shards of earlier builds go."""
    out.mkdir(parents=True, exist_ok=True)
    shard_bytes = int(options.shard_size_mb * 2**20)
    shards = []
    for tier in cl.TIERS:
        tier_dir = out / tier
        written = set()
        for split in ("train", "val"):
            parts = [
                parts_dir / tier / f"{ep.uid}.parquet"
                for ep in episodes
                if splits[ep.uid] == split and any(p["tier"] == tier for p in selected[ep.uid])
            ]
            if not parts:
                continue
            for shard in merge_parts(parts, tier_dir, split, schema, shard_bytes):
                shards.append({"tier": tier, "split": split, **shard, "file": f"{tier}/{shard['file']}"})
                written.add(shard["file"])
        if tier_dir.is_dir():
            for stale in tier_dir.iterdir():
                if stale.name not in written and (stale.suffix == ".parquet" or stale.name.startswith(TMP_PREFIX)):
                    os.remove(stale)
    return shards
