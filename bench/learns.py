"""The CPU recipe that trains a `duel` model end to end and scores every stage on the benchmark
(docs/recipes.md): recordings -> curriculum -> game VAE -> latents -> stage 1 (curriculum) and stage 1
without it -> stage 2 -> stage 3 -> `wtf benchmark run` (real keys, `--keys zero`, `--keys swap-players`)
-> bench/results/learns.md.

    python bench/learns.py                                   # the whole recipe, defaults below
    python bench/learns.py --vae runs/learns/vae             # reuse a trained game VAE (skips that step)
    python bench/learns.py --scale 0.25 --max-cases 1        # a shorter run: every step count x 0.25
    python bench/learns.py --vae bench/assets/vae-frame4x --runs runs/learns-frame4x --data data/learns-frame4x \
        --frames 17 --set model.context_chunks=1 --set model.vae.kind=frame --set model.vae.base_dim=32 \
        --set "model.vae.dim_mult=[1, 2, 2]" --set "model.patch_size=[1, 4, 4]" \
        --stages stage1,stage2                               # the DiT on the per-frame 4x autoencoder's latents
                                                             # (bench/assets), 17-frame windows, one context chunk
    python bench/learns.py ... --no-benchmark                # train only; the same command without it scores
    python bench/learns.py --ship                            # also export SHIP_STAGE to inference/shipped/duel-tiny
                                                             # and its contact sheet to docs/duel-tiny-sheet.png

Every step is a documented `wtf` command, run as a subprocess and printed before it runs. A step
whose output is complete is skipped, so running the same command again continues an interrupted
recipe. The model is the tiny preset at width 128 and 128x128 (16x16 latents), which the benchmark's
128x128 probe reads; recordings and the suite are those of bench/recipe.py (drills, walk-under key
files and scripted matches under data/bench).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipe  # noqa: E402

from wantofight.outputs import write_atomic, written  # noqa: E402
from wantofight.train.stage2 import is_trainer_checkpoint  # noqa: E402

ROOT = recipe.ROOT
SIZE = "128x128"
FRAMES = 33
SEED = 0
# Steps at --scale 1: about 2 h 50 min on 2 cores with a VAE reused (encode 11 min, stages 1-3 42 min, the benchmark
# about 1 h 50 min), after bench/probe.py's 12 min; training the VAE adds its steps at 1.2-4 s each (docs/recipes.md).
STEPS = {"vae": 2500, "vae-33": 300, "vae-fw": 700, "stage1": 4000, "stage2": 2000, "stage3": 300}
KEY_MODES = "real,zero,swap-players"
SCENARIOS = ("static", "jump_over", "chase_cross", "overlap", "long")
SCENARIO_ORDER = ("single-action", "dual-action", *SCENARIOS)
FAMILIES = ("single-action", "dual-action", "identity", "all")
SHIP_STAGE = "stage2"
"""What `--ship` exports as duel-tiny: stage 2 sampled in 4 Euler steps. In the run of 2026-12-06 the stage-3 student
(300 DMD steps) followed the keys as its teacher did but drifted further on 49-row cases (x error 29.7 vs 20.9 px)
with three times the extra fighter pixels, while keeping both fighters findable longer in 60-s sessions (77.2% vs
58.6%; bench/results/learns.md, docs/recipes.md)."""
BEFORE = "duel-tiny-before"
"""The model shipped before this run, copied into --runs and scored beside the run's stages; `--ship` replaces the
shipped one only while this copy of it is kept."""
STAGES = ("stage1", "stage1-no-curriculum", "stage2", "stage3")
"""What the recipe trains after the VAE, in order; --stages picks some (a stage needs the one it starts from)."""
NEEDS = {"stage2": "stage1", "stage3": "stage2"}
CANDIDATES = ("stage2", "stage3")
"""The stages scored on everything (the 60-s sessions, `--keys zero`, teacher-forced) so that either can be shipped."""


def wtf(*args: str, log: Path) -> float:
    """Run `wtf ARGS`, its output appended to `log`; seconds taken. A failure stops the recipe with its tail."""
    line = "wtf " + " ".join(shlex.quote(a) for a in args)
    print(f"$ {line}", flush=True)
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {line}\n")
        f.flush()
        done = subprocess.run(["wtf", *args, "--no-progress"], stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SystemExit(f"{line} failed (exit {done.returncode}); the end of {log}:\n{tail}")
    return time.perf_counter() - t0


def scaled(steps: int, scale: float) -> int:
    return max(1, round(steps * scale))


def curriculum(stage1_steps: int) -> str:
    """The default phases (single-action -> + dual-action -> mostly full matches) at this run's length."""
    first, second = max(1, stage1_steps // 4), max(2, (stage1_steps * 3) // 5)
    return (f"[{{until: {first}, weights: {{single-action: 1.0}}}}, "
            f"{{until: {second}, weights: {{single-action: 0.3, dual-action: 0.7}}}}, "
            f"{{until: null, weights: {{single-action: 0.1, dual-action: 0.3, full-match: 0.6}}}}]")


NO_CURRICULUM = "[{until: null, weights: {single-action: 0.1, dual-action: 0.3, full-match: 0.6}}]"


DIT_WIDTH = 128
"""The tiny preset's DiT at twice its width: at width 64 it draws the stage and loses the fighters, at 128
it keeps them where they stand (docs/model.md "What the DiT needs")."""
ROPE_THETA = 100.0
"""RoPE base 100 instead of 10,000: at head dim 32 more of its spatial frequencies vary over an 8x8 token grid; 0.7 px
lower one-chunk x error on 8 of 9 held-out cases (docs/model.md "What places a sprite")."""
DIT_SETS = ["--set", f"model.dim={DIT_WIDTH}", "--set", f"model.ffn_dim={2 * DIT_WIDTH}",
            "--set", f"model.rope_theta={ROPE_THETA:g}"]
FIGHTER_WEIGHT = 10
"""Stages 1 and 2 weight the fighters' latent cells (docs/training.md "Weighting the fighters")."""
VAE_FIGHTER_WEIGHT = 20
"""The VAE's last step counts each fighter pixel 21 times in its MSE (docs/model.md, "Weighting the fighters'
pixels makes them readable")."""
VAE_CRITIC_SETS = ["--set", "vae.adv_weight=0.5", "--set", "vae.adv_start=50"]
"""The VAE's last step with the adversarial critic: about a point of action following at 300 and 700 steps
(docs/model.md, "An adversarial critic"); the shipped duel-tiny's VAE had 700 such steps (300 + 400)."""


def model_sets(vae: Path, frames: int) -> list[str]:
    """The settings of every model stage: the VAE, the picture, the DiT, its window and the seed."""
    return ["--set", f"model.vae.pretrained={vae}", "--set", "model.height=128", "--set", "model.width=128",
            *DIT_SETS, "--set", f"data.frames={frames}", "--set", f"seed={SEED}"]


def stages(text: str) -> tuple[str, ...]:
    """--stages as a tuple in the recipe's order; a one-line error for an unknown stage or one without its start."""
    picked = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in picked if s not in STAGES]
    if unknown or not picked:
        raise argparse.ArgumentTypeError(f"unknown stage {unknown[0] if unknown else '(none)'}; "
                                         f"valid: {', '.join(STAGES)} (comma-separated)")
    for stage in picked:
        if NEEDS.get(stage) and NEEDS[stage] not in picked:
            raise argparse.ArgumentTypeError(f"{stage} starts from {NEEDS[stage]}; add it")
    return tuple(s for s in STAGES if s in picked)


def trained(run: Path, steps: int) -> bool:
    latest = run / "checkpoints" / "latest"
    return latest.is_file() and int(latest.read_text().strip().rsplit("_", 1)[-1]) >= steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "learns", help="curriculum and latents")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "learns", help="VAE, stages and reports")
    parser.add_argument("--vae", type=Path, help="a trained `wtf train vae` folder to use instead of training one")
    parser.add_argument("--vae-base", type=Path, help="a VAE trained on 33-frame runs (e.g. "
                        "bench/assets/duel-tiny-2026-12-06/vae) to start the fighter-weighted VAE step from, instead of training steps 4 and 5")
    parser.add_argument("--probe", type=Path, default=ROOT / "runs" / "bench-probe" / SIZE,
                        help="the benchmark's probe at 128x128 (python bench/probe.py)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every training step count")
    parser.add_argument("--max-cases", type=int, default=20, help="benchmark cases per scenario (and per "
                        "player and action for single-action): 20, so that an interval over them can exclude chance")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "learns.md")
    parser.add_argument("--ship", action="store_true", help=f"export {SHIP_STAGE} to inference/shipped/duel-tiny")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of stages 1-3 (repeatable, after the recipe's own, so it wins), e.g. the "
                        "per-frame VAE's model.vae fields and model.patch_size with --vae")
    parser.add_argument("--frames", type=int, default=FRAMES, help="the DiT's training window in frames (the latents "
                        "are encoded at it; 1 + a whole number of chunks); the curriculum and the VAE keep 33")
    parser.add_argument("--stages", type=stages, default=STAGES, help=f"stages to train and score, comma-separated "
                        f"(default all: {','.join(STAGES)})")
    parser.add_argument("--stage1", type=Path, help="a trained stage 1 (a run, or a folder exported from one, e.g. "
                        "bench/assets/stage1-frame4x; docs/recipes.md) to start stage 2 from and score, instead of training one")
    parser.add_argument("--no-benchmark", action="store_true", help="stop after training (score later with the "
                        "same command without it)")
    args = parser.parse_args()
    if args.ship and SHIP_STAGE not in args.stages:
        raise SystemExit(f"--ship exports {SHIP_STAGE}, which --stages leaves out")
    if args.stage1 is not None and not is_trainer_checkpoint(args.stage1):
        raise SystemExit(f"--stage1 {args.stage1}: not a trained run or an exported model folder (no "
                         "checkpoints/, no config.json)")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    # bf16 convolutions on AMX abort with heap corruption in torch 2.14.1's oneDNN (docs/model.md, "Known limits")
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    args.runs.mkdir(parents=True, exist_ok=True)
    log = args.runs / "recipe.log"
    steps = {k: scaled(v, args.scale) for k, v in STEPS.items()}
    seconds: dict[str, float] = {}

    # 1. recordings (drills, key-file scenarios, scripted matches; probe and held-out seeds apart)
    t0 = time.perf_counter()
    recipe.ensure(ROOT / "data" / "bench")
    seconds["record"] = time.perf_counter() - t0
    if not args.no_benchmark and not (args.probe / "probe.json").is_file():
        raise SystemExit(f"no probe at {args.probe}: run python bench/probe.py first (or pass --no-benchmark)")
    suite = ROOT / "data" / "bench" / "suite"
    if not args.no_benchmark and not (suite / "suite.json").is_file():
        seconds["suite"] = wtf("benchmark", "build", *map(str, recipe.runs(ROOT / "data" / "bench", "heldout")),
                               "--out", str(suite), log=log)

    # 2. curriculum: every single- and dual-action clip, a 33-frame full-match window every 128 frames
    ds, latents = args.data / "curriculum", args.data / "latents"
    if not (ds / "manifest.json").is_file():
        seconds["curriculum"] = wtf("build-curriculum", *map(str, recipe.runs(ROOT / "data" / "bench", "probe")),
                                    "--out", str(ds), "--clip-frames", str(FRAMES), "--stride", "128",
                                    "--workers", "2", "--seed", str(SEED), log=log)

    # 3. the game VAE: whole frames in 9-frame runs, then 33-frame runs (the DiT's window), since a causal
    #    VAE trained on 9 frames drifts from the 10th on, then the fighters' pixels weighted, without which the
    #    fighters decode as blobs that the probe cannot read (docs/model.md)
    base, vae33, vae = args.runs / "vae-9", args.vae_base or args.runs / "vae-33", args.vae or args.runs / "vae"
    train_vae = args.vae is None and args.vae_base is None
    vae_sets = ["--set", "precision=bf16", "--set", "data.batch_size=1", "--set", "model.vae.is_residual=true",
                "--set", "vae.sample_posterior=false", "--set", "validation.every=250", "--set", f"data.frames={FRAMES}"]
    if train_vae and not (base / "report.json").is_file():
        seconds["vae-9"] = wtf("train", "vae", "--data", str(ds), "--out", str(base), "--size", SIZE,
                               "--steps", str(steps["vae"]), *vae_sets, "--set", "vae.crop=0",
                               "--set", "optim.lr=2e-3", log=log)
    runs33 = [*vae_sets, "--set", "vae.crop=0", "--set", f"vae.clip_frames={FRAMES}", "--set", "optim.lr=3e-4",
              "--set", "optim.warmup_steps=20"]
    if train_vae and not (vae33 / "report.json").is_file():
        seconds["vae-33"] = wtf("train", "vae", "--data", str(ds), "--out", str(vae33), "--size", SIZE,
                                "--steps", str(steps["vae-33"]), *runs33,
                                "--set", f"model.vae.pretrained={base.resolve()}", log=log)
    if args.vae is None and not (vae / "report.json").is_file():
        seconds["vae-fw"] = wtf("train", "vae", "--data", str(ds), "--out", str(vae), "--size", SIZE,
                                "--steps", str(steps["vae-fw"]), *runs33,
                                "--set", f"vae.fighter_weight={VAE_FIGHTER_WEIGHT}", *VAE_CRITIC_SETS,
                                "--set", f"model.vae.pretrained={vae33.resolve()}", log=log)
    vae = vae.resolve()

    # 4. latents
    if not (latents / "manifest.json").is_file():
        seconds["encode"] = wtf("encode", str(ds), "--out", str(latents), "--vae", str(vae), "--clip", "tiny",
                                "--frames", str(args.frames), "--size", SIZE, "--workers", "1", log=log)

    # 5. stage 1 with the curriculum and without it; stage 2; stage 3
    runs = {name: args.runs / name for name in args.stages}
    if args.stage1 is not None:
        runs["stage1"] = args.stage1.resolve()
    more = [arg for kv in args.sets for arg in ("--set", kv)]
    common = [*model_sets(vae, args.frames), "--set", "data.batch_size=4", "--set", "optim.lr=1e-3",
              "--set", f"fighter_weight={FIGHTER_WEIGHT}", "--set", "validation.every=100000",
              "--set", "validation.batches=16", *more]  # validated once, at the last step, on 21 val windows per tier
    for name, phases in (("stage1", curriculum(steps["stage1"])), ("stage1-no-curriculum", NO_CURRICULUM)):
        if name in runs and not (name == "stage1" and args.stage1) and not trained(runs[name], steps["stage1"]):
            resume = ["--resume"] if (runs[name] / "checkpoints" / "latest").is_file() else []
            seconds[name] = wtf("train", "stage1", "--preset", "tiny", "--data", str(latents), "--out",
                                str(runs[name]), "--steps", str(steps["stage1"]), *resume, *common,
                                "--set", f"data.curriculum={phases}", log=log)
    if "stage2" in runs and not trained(runs["stage2"], steps["stage2"]):
        start = (["--resume"] if (runs["stage2"] / "checkpoints" / "latest").is_file()
                 else ["--init-from", str(runs["stage1"])])
        seconds["stage2"] = wtf("train", "stage2", "--preset", "tiny", "--data", str(latents), "--out",
                                str(runs["stage2"]), "--steps", str(steps["stage2"]), *start, *common, log=log)
    if "stage3" in runs and not trained(runs["stage3"], steps["stage3"]):
        resume = ["--resume"] if (runs["stage3"] / "checkpoints" / "latest").is_file() else []
        seconds["stage3"] = wtf("train", "stage3", "--teacher", str(runs["stage2"]), "--preset", "tiny", "--data",
                                str(latents), "--out", str(runs["stage3"]), "--steps", str(steps["stage3"]),
                                *resume, *model_sets(vae, args.frames), "--set", "data.batch_size=1",
                                "--set", "validation.every=100000", *more, log=log)
    if args.no_benchmark:
        spent(args.runs / "seconds.json", seconds)
        print(f"trained {', '.join(runs)} in {args.runs}; run the same command without --no-benchmark to score them")
        return

    # 6. the benchmark: every stage with real keys, the stage-3 student also with zero and swapped keys
    report = args.runs / "report"
    before = keep_shipped(args.runs / BEFORE)
    t0 = time.perf_counter()
    wtf("benchmark", "run", str(suite), "--probe", str(args.probe), "--out", str(report), "--model", "emulator",
        "--model", "first-frame", "--model", "vae", "--vae", str(vae), "--max-cases", str(args.max_cases),
        "--no-lpips", "--videos", "1", "--resume", log=log)
    # 60-s sessions (1,800 frames a case) only for the stage-3 student with its keys: the issue's on-model check
    short = ",".join(s for s in SCENARIO_ORDER if s != "long")
    # the emulator replaying each case with no keys / swapped keys: a perfect model's score under the ablations
    wtf("benchmark", "run", str(suite), "--probe", str(args.probe), "--out", str(report), "--model", "emulator",
        "--keys", "zero,swap-players", "--scenarios", short, "--max-cases", str(args.max_cases), "--no-lpips",
        "--videos", "1", "--resume", log=log)
    # the candidates for shipping also teacher-forced on the short cases (each chunk from the recorded context): their
    # one-chunk error; the student also with swapped keys (the identity targets)
    candidates = [n for n in CANDIDATES if n in runs]
    for name, keys, scenarios, extra in [*((n, "real", short, []) for n in runs if n not in CANDIDATES),
                                         *((n, "real", ",".join(SCENARIO_ORDER), []) for n in candidates),
                                         *((n, "zero" if n != "stage3" else "zero,swap-players", short, [])
                                           for n in candidates),
                                         *((n, "real", short, ["--teacher-forced"]) for n in candidates),
                                         *(((BEFORE, "real", short, ["--teacher-forced"]),
                                            (BEFORE, "real", "long", [])) if before else ())]:
        wtf("benchmark", "run", str(suite), "--probe", str(args.probe), "--out", str(report), "--checkpoint",
            str(runs.get(name, before)), "--keys", keys, "--scenarios", scenarios, "--max-cases", str(args.max_cases),
            "--no-lpips", "--videos", "1", "--resume", *extra, log=log)
    seconds["benchmark"] = time.perf_counter() - t0
    seconds = spent(args.runs / "seconds.json", seconds)

    table = results(json.loads((report / "report.json").read_text()), runs, vae, steps, args, seconds)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.results, table)
    print(table)
    if args.ship:
        ship(runs[SHIP_STAGE], table, args.runs / BEFORE)
        print(f"wrote {contact_sheet(report, SHIP_STAGE, ROOT / 'docs' / 'duel-tiny-sheet.png')}")


def spent(path: Path, seconds: dict[str, float]) -> dict[str, float]:
    """Seconds each step took over every invocation that built this --runs folder: a step reused from an
    earlier one keeps the time it took then; the benchmark, which scores only what is missing, adds up."""
    before = json.loads(path.read_text()) if path.is_file() else {}
    out = {**before, **{k: v for k, v in seconds.items() if k != "benchmark"}}
    out["benchmark"] = before.get("benchmark", 0.0) + seconds.get("benchmark", 0.0)
    out.pop("total", None)
    out["total"] = sum(out.values())
    write_atomic(path, json.dumps(out, indent=1) + "\n")
    return out


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def results(report: dict, runs: dict[str, Path], vae: Path, steps: dict, args, seconds: dict) -> str:
    from wantofight.benchmark.report import GAIN_COLUMNS, GAIN_TITLES, TABLE_CHUNKS, fmt_ci, padded
    from wantofight.benchmark.scoring import CHUNK_ROWS

    by = {v["name"]: v for v in report["variants"]}
    rows = ["emulator", "emulator keys=zero", "emulator keys=swap-players", "first-frame", f"vae {vae.name}", *runs,
            *(f"{n} keys={k}" for n in CANDIDATES for k in ("zero", "swap-players")), BEFORE]
    rows = [r for r in rows if r in by]
    vae_report = json.loads((vae / "report.json").read_text()) if (vae / "report.json").is_file() else {}

    def ratio(name: str, fam: str) -> str:
        return fmt(follow_ratio(by, name, fam), ".2f")

    def fmt(x, spec: str) -> str:
        return "n/a" if x is None else format(x, spec)

    vae_steps = ("reused" if args.vae else f"{steps['vae-fw']} fighter-weighted from {args.vae_base}" if args.vae_base
                 else f"{steps['vae']} + {steps['vae-33']} + {steps['vae-fw']} fighter-weighted")
    out = ["# bench/results/learns.md: the CPU recipe, scored by `wtf benchmark`", "",
           f"Written by `python bench/learns.py --scale {args.scale} --max-cases {args.max_cases}"
           f"{' --vae ' + str(args.vae) if args.vae else ''}{' --vae-base ' + str(args.vae_base) if args.vae_base else ''}"
           f"{' --frames ' + str(args.frames) if args.frames != FRAMES else ''}"
           f"{' --stage1 ' + str(args.stage1) if args.stage1 else ''}"
           f"{''.join(' --set ' + shlex.quote(kv) for kv in args.sets)}"
           f"{' --stages ' + ','.join(args.stages) if args.stages != STAGES else ''}"
           f"` at commit {commit()}; seeds: recordings as "
           f"bench/recipe.py (probe 1-3, held-out 100-102), curriculum split and training {SEED}, benchmark "
           "noise per case (benchmark/run.py).", "",
           f"Steps: VAE {vae_steps}, stage 1 {trained_steps(runs, 'stage1')} (batch 4 x {args.frames} frames, 128x128, "
           f"{dit_shape(runs)}, fighter_weight {FIGHTER_WEIGHT}), stage 2 {trained_steps(runs, 'stage2')}, stage 3 "
           f"{trained_steps(runs, 'stage3')} generator steps. "
           f"Benchmark: at most {args.max_cases} cases per scenario (per player and action for single-action), "
           "no LPIPS (no AlexNet weights offline).", ""]
    if vae_report:
        last = vae_report.get("last_psnr", {}).get("val")
        out += [f"VAE: {vae.name}, {vae_report['steps']} steps, {vae_report['megabytes']:.1f} MB: held-out PSNR "
                f"{vae_report['psnr']['val']:.1f} dB over {vae_report['train']['data']['frames']}-frame windows "
                f"(target 32), last 4 frames {fmt(last, '.1f')} dB, fighters' PSNR "
                f"{vae_report['fighters_psnr']['val']:.1f} dB (only the pixels that differ from the stage).", ""]
    notes = ([report["smoke_test"]] if report.get("smoke_test") else []) + report.get("warnings", [])
    out += [f"> {n}" for n in notes] + ([""] if notes else [])
    for section, title in GAIN_TITLES.items():
        gain = report.get(section) or {}
        if not gain:
            continue
        out += [f"## {title}", ""]
        if gain.get("missing"):
            out += [gain["missing"], ""]
            continue
        out += ["| model | " + " | ".join(GAIN_COLUMNS[:-1]) + " | single: actor |", "|---" * (len(GAIN_COLUMNS) + 1) + "|"]
        # the second table holds the teacher-forced rows and their two baselines, in the report's order
        for r in rows if section == "gain_over_first_frame" else list(gain["variants"]):
            g = gain["variants"].get(r)
            out.append(f"| {r} | " + " | ".join(fmt_ci(g[c]["gain"], g[c]["ci"], "gain", g[c]["cases"]) if g and c in g
                                                 else "n/a" for c in GAIN_COLUMNS) + " |")
        out.append("")
    out += ["## Action following (state class and direction within ±2 rows) [95% interval] (cases)", "",
            "| model | single-action | dual-action | identity | all | single × emulator | dual × emulator "
            "| single: actor / idle |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v = by[r]
        cells = [fmt_ci(v["families"][f]["follow"], v["families"][f].get("follow_ci"), "share",
                        v["families"][f]["cases"]) for f in FAMILIES]
        single = v["families"]["single-action"]  # the fighter who acts / the one who stands still
        out.append(f"| {r} | {' | '.join(cells)} | {ratio(r, 'single-action')} | {ratio(r, 'dual-action')} "
                   f"| {fmt_ci(single.get('actor'), single.get('actor_ci'))} / "
                   f"{fmt_ci(single.get('idle'), single.get('idle_ci'))} |")
    out += ["", "## Identity binding (% of cases bound correctly) [95% interval] (cases)", "",
            "| model | " + " | ".join(SCENARIOS) + " |", "|---" * (len(SCENARIOS) + 1) + "|"]
    for r in rows:
        sc = by[r]["scenarios"]
        out.append(f"| {r} | " + " | ".join(
            fmt_ci(sc[s].get("binding"), sc[s].get("binding_ci"), "pct", sc[s]["cases"]) if sc.get(s, {}).get("cases")
            else "–" for s in SCENARIOS) + " |")
    out += ["", "## Fidelity and speed (mean over scenarios)", "",
            "| model | PSNR dB | SSIM | x error px | long: both found | ms/chunk |", "|---|---|---|---|---|---|"]
    for r in rows:
        v = by[r]
        sc = [s for s in v["scenarios"].values() if s.get("cases")]
        mean = lambda k: (sum(s[k] for s in sc if s.get(k) is not None) / max(1, sum(  # noqa: E731
            s.get(k) is not None for s in sc))) if any(s.get(k) is not None for s in sc) else None
        long = v["scenarios"].get("long", {})
        out.append(f"| {r} | {fmt(mean('psnr'), '.2f')} | {fmt(mean('ssim'), '.3f')} | {fmt(mean('x_error'), '.1f')}"
                   f" | {fmt_ci(long.get('found'), long.get('found_ci')) if long.get('cases') else 'n/a'} | "
                   f"{fmt(v.get('speed', {}).get('ms_per_chunk'), '.0f')} |")
    out += ["", f"## Per chunk of {CHUNK_ROWS} generated rows: x error px / extra fighter pixels per frame (mean over "
            "cases)", "", "| model | " + " | ".join(f"chunk {k + 1}" for k in range(TABLE_CHUNKS)) + " |",
            "|---" * (TABLE_CHUNKS + 1) + "|"]
    for r in rows:
        v = by[r]
        out.append(f"| {r} | " + " | ".join(f"{fmt(x, '.1f')} / {fmt(e, '.1f')}" for x, e in
                                            zip(padded(v["x_error_chunks"]), padded(v["extra_fighters_chunks"]))) + " |")
    out += ["", *key_gaps(runs), ""]
    out += ["", *targets(by), ""] if "stage3" in by else []  # the student's targets; this run trained none
    out += [*place_targets(args.runs / "report"), ""]
    out += [*per_label(args.runs / "report"), ""]
    out += ["## Time (seconds each step took; a step reused from an earlier invocation of the recipe in the same "
            "--runs folder keeps its time, the benchmark's add up; runs/.../seconds.json)", "",
            "| " + " | ".join(seconds) + " |", "|---" * len(seconds) + "|",
            "| " + " | ".join(f"{s:.0f}" for s in seconds.values()) + " |", ""]
    return "\n".join(out)


def trained_steps(runs: dict[str, Path], name: str) -> str:
    """The steps stage `name` was trained for, as its checkpoint says (a run trained further by an earlier
    invocation, or a --stage1 folder, may differ from this invocation's step count), with its LR schedule when
    that is not the recipe's constant one; "-" when not trained."""
    from wantofight.inference.checkpoints import read_config
    from wantofight.inference.generation import resolve_checkpoint

    run = runs.get(name)
    if run is None or not run.is_dir():
        return "-"
    saved = read_config(resolve_checkpoint(run))
    train = saved.get("train", {})
    optim = train.get("optim", {})
    schedule = ""
    if optim.get("schedule", "constant") != "constant":  # a saved schedule always comes with its lr and max_steps
        schedule = (f" (LR {optim['lr']:g}, {optim['schedule']} to {optim['min_lr_ratio']:g}x at step "
                    f"{train['max_steps']:,})")
    return f"{saved.get('step', '?'):,}{schedule}"


def dit_shape(runs: dict[str, Path]) -> str:
    """The DiT as the first trained stage holds it (the recipe's DIT_SETS, or what --set changed)."""
    from wantofight.inference.generation import read_checkpoint_model_config, resolve_checkpoint

    run = next((r for r in runs.values() if r.is_dir()), None)
    if run is None:
        return f"DiT width {DIT_WIDTH}, RoPE base {ROPE_THETA:g}"
    m, _ = read_checkpoint_model_config(resolve_checkpoint(run))
    return (f"DiT width {m.dim}, {m.patch_size[1]}x{m.patch_size[2]} patches over {m.vae.kind}-VAE latents, "
            f"RoPE base {m.rope_theta:g}")


def key_gaps(runs: dict[str, Path]) -> list[str]:
    """Each flow-matching run's last validation: its loss on held-out windows with their keys, with every
    key released and with the players' keys swapped (train/validation.py), per action tier."""
    from wantofight.train.metrics import read_metrics

    lines = ["## Do the keys matter? Val loss on held-out windows (same windows and noise)", "",
             "| model | tier | with the keys | keys released | players' keys swapped |", "|---|---|---|---|---|"]
    for name, run in runs.items():
        last = next((r for r in reversed(read_metrics(run)) if "val_loss_released" in r), None) if run.is_dir() else None
        for tier in ("single-action", "dual-action") if last else ():
            if f"val_loss/{tier}" in last:
                lines.append(f"| {name} | {tier} | {last[f'val_loss/{tier}']:.4f} | "
                             f"{last[f'val_loss_released/{tier}']:.4f} | {last[f'val_loss_swapped/{tier}']:.4f} |")
    return lines + ["", "A model that follows the keys has a lower loss with them than released or swapped; stage 3's "
                    "DMD loss has no such reading (docs/training.md, \"Are the keys learned?\")."]


def follow_ratio(by: dict, name: str, fam: str) -> float | None:
    """Variant `name`'s action following on family `fam` as a fraction of the emulator's (None: not scored)."""
    v, e = by.get(name, {}).get("families", {}).get(fam, {}), by["emulator"]["families"][fam]
    return None if v.get("follow") is None or not e["follow"] else v["follow"] / e["follow"]


def targets(by: dict) -> list[str]:
    """The issue's targets for the shipped stage-3 student, each with the measured figure and met / not met."""
    follow = functools.partial(follow_ratio, by)

    def row(what: str, value, target: str, met, perfect=None) -> str:
        shown = "n/a" if value is None else value
        return (f"| {what} | {shown} | {target} | {'n/a' if value is None else ('met' if met else 'not met')} "
                f"| {'n/a' if perfect is None else perfect} |")

    s3 = "stage3"
    single, dual, zero = follow(s3, "single-action"), follow(s3, "dual-action"), follow(f"{s3} keys=zero", "single-action")
    sc = by.get(s3, {}).get("scenarios", {})
    static, jump = sc.get("static", {}).get("binding"), sc.get("jump_over", {}).get("binding")
    teacher = by.get("stage2", {}).get("families", {}).get("all", {}).get("follow")
    student = by.get(s3, {}).get("families", {}).get("all", {}).get("follow")
    gap = None if teacher is None or student is None else 100 * (student - teacher)
    found = sc.get("long", {}).get("found") if sc.get("long", {}).get("cases") else None
    em = by.get("emulator", {}).get("scenarios", {})
    em_zero = follow("emulator keys=zero", "single-action")
    em_found = em.get("long", {}).get("found") if em.get("long", {}).get("cases") else None
    lines = ["## Targets of the stage-3 student", "",
             "The last column is the emulator's own figure under the same reading: what a model that follows the "
             "keys perfectly would score (`--keys zero`: the recording replayed with no keys).", "",
             "| target | measured | wanted | | the emulator |", "|---|---|---|---|---|",
             row("action following, single-action, x emulator", None if single is None else f"{single:.2f}",
                 ">= 0.8", single is not None and single >= 0.8, "1.00"),
             row("action following, dual-action, x emulator", None if dual is None else f"{dual:.2f}", ">= 0.6",
                 dual is not None and dual >= 0.6, "1.00"),
             row("`--keys zero`, single-action, x emulator", None if zero is None else f"{zero:.2f}", "<= 0.4",
                 zero is not None and zero <= 0.4, None if em_zero is None else f"{em_zero:.2f}"),
             row("identity binding, static / jump-over", None if static is None or jump is None
                 else f"{static:.0f}% / {jump:.0f}%", ">= 80% each",
                 static is not None and jump is not None and min(static, jump) >= 80,
                 f"{em.get('static', {}).get('binding', 0):.0f}% / {em.get('jump_over', {}).get('binding', 0):.0f}%"
                 if em.get("static", {}).get("cases") and em.get("jump_over", {}).get("cases") else None),
             row("student - stage-2 teacher, action following (points)", None if gap is None else f"{gap:+.1f}",
                 "within 2", gap is not None and abs(gap) <= 2),
             row("long sessions: both fighters found", None if found is None else f"{100 * found:.1f}%", ">= 90%",
                 found is not None and found >= 0.9, None if em_found is None else f"{100 * em_found:.1f}%")]
    if em_zero is not None and em_zero > 0.4:
        lines += ["", f"No model that follows the keys can meet the `--keys zero` target on this benchmark: the "
                  f"emulator itself, replayed with no keys, scores {em_zero:.2f} x (the fighter who stands still, and "
                  "the actor's rows before and after its move, follow either way; docs/benchmark.md). Read the "
                  "student's `keys=zero` row against that figure."]
    if single is not None and zero is not None and single < 0.4:
        lines += ["", "The `--keys zero` and student - teacher rows are met only because nothing follows the keys: "
                  "with its real keys the student follows them no better than with none, and no better than its "
                  "teacher."]
    vae = next((name for name in by if name.startswith("vae ")), None)
    if vae is not None and follow(vae, "single-action") is not None:
        lines += ["", f"The ceiling of any model decoding with this VAE: the held-out frames' own round trip through "
                  f"it (`{vae}`) scores {follow(vae, 'single-action'):.2f} x the emulator on single-action cases "
                  f"and {follow(vae, 'dual-action'):.2f} x on dual-action ones."]
    return lines


WINDOW_CHUNKS = 6
"""A short case's 49 rows: the prompt and 6 chunks of 8 generated rows."""
SHORT = frozenset(SCENARIO_ORDER) - {"long"}


def place_targets(report_dir: Path, models: tuple[str, ...] = (SHIP_STAGE, *(c for c in CANDIDATES if c != SHIP_STAGE),
                                                               "duel-tiny-before")) -> list[str]:
    """Where each model (the one `--ship` exports first, the other candidate, and the model shipped before this run
    where the report holds it) puts the fighters,
    read case by case against the first frame and the emulator on the same cases: free-running x error over the
    short cases' 49 rows, one chunk from the true context (teacher-forced), what releasing the keys costs, and the
    60-s sessions. Paired 95% bootstrap intervals over cases; n/a where a model was not scored that way."""
    import numpy as np

    from wantofight.benchmark import intervals as ci
    from wantofight.benchmark.report import mean, read_variants, x_error_chunks

    cases = {info["name"]: {c["case_id"]: c for c in found} for info, found in read_variants(report_dir)}
    models = tuple(m for m in models if cases.get(m))
    missing = [n for n in ("emulator", "first-frame", *models[:1]) if not cases.get(n)]
    if missing or not models:
        return ["## Place and motion", "", f"Not scored: the report holds no {', '.join(missing or models)}."]

    def window(case: dict, first: int = 0) -> float | None:  # mean x error (px, both players) over chunks first..6
        return mean(v for v in x_error_chunks(case)[first:WINDOW_CHUNKS] if v is not None)

    def case_x(case: dict) -> float | None:
        return mean(v for p in case["x_error"] for v in p if v is not None)

    def paired(names: list[str], value, scenarios=SHORT) -> tuple[int, list[list[float]]]:
        """How many cases every variant in `names` scored in `scenarios` with a value, and their values."""
        if any(not cases.get(n) for n in names):
            return 0, [[] for _ in names]
        ids = sorted(set.intersection(*(set(cases[n]) for n in names)))
        ids = [i for i in ids if cases[names[0]][i]["scenario"] in scenarios
               and all(value(cases[n][i]) is not None for n in names)]
        return len(ids), [[value(cases[n][i]) for i in ids] for n in names]

    def interval(pair, spec: str) -> str:
        return "" if pair is None else f" [{pair[0]:{spec}}, {pair[1]:{spec}}]"

    def free_running(name: str) -> tuple[str, str]:
        n, (m, ff) = paired([name, "first-frame"], window)
        if not n:
            return "n/a", "n/a"
        ratio = np.mean(m) / np.mean(ff)
        chunks = [[x_error_chunks(cases[v][i]) for i in sorted(cases[name]) if cases[name][i]["scenario"] in SHORT
                   and i in cases[v]] for v in (name, "first-frame")]
        per_chunk = [[mean(c[k] for c in vs if len(c) > k) for k in range(WINDOW_CHUNKS)] for vs in chunks]
        below = sum(a is not None and b is not None and a < b for a, b in zip(*per_chunk))
        pair = ci.paired_bootstrap(lambda a, b: a / b, m, ff)
        return (f"{ratio:.2f}{interval(pair, '.2f')} ({np.mean(m):.1f} px vs {np.mean(ff):.1f}, {n} cases); below it at "
                f"{below} of {WINDOW_CHUNKS} chunks", verdict(ratio <= 0.6 and below == WINDOW_CHUNKS,
                                                              f"{ratio - 0.6:.2f} x, {WINDOW_CHUNKS - below} chunks"))

    def forced(name: str) -> tuple[str, str]:  # teacher-forced chunks 2-6 (chunk 1 is the free-running one)
        n, (tf,) = paired([f"{name} teacher-forced"], lambda c: window(c, 1))
        if not n:
            return "n/a", "n/a"
        return (f"{np.mean(tf):.1f}{interval(ci.bootstrap(tf), '.1f')} ({n} cases)",
                verdict(np.mean(tf) <= 8, f"{np.mean(tf) - 8:.1f} px"))

    def released(name: str) -> tuple[str, str]:
        n, (z, r) = paired([f"{name} keys=zero", name], case_x)
        if not n:
            return "n/a", "n/a"
        gap = np.mean(z) - np.mean(r)
        return (f"{gap:+.1f}{interval(ci.paired_bootstrap(lambda a, b: a - b, z, r), '+.1f')} ({n} cases)",
                verdict(gap >= 5, f"{5 - gap:.1f} px"))

    _, (em_extra,) = paired(["emulator"], lambda c: mean(c.get("extra_fighters") or [None]), {"long"})

    def sessions(name: str) -> tuple[str, str]:
        n, (found,) = paired([name], lambda c: c.get("found"), {"long"})
        if not n:
            return "n/a", "n/a"
        _, (extra,) = paired([name], lambda c: mean(c.get("extra_fighters") or [None]), {"long"})
        share, pixels = float(np.mean(found)), float(np.mean(extra)) if extra else None
        b = ci.bootstrap(found)
        shown = f"{100 * share:.1f}%{interval(None if b is None else [100 * x for x in b], '.1f')} / " + \
            ("n/a" if pixels is None else f"{pixels:.1f}") + f" ({n} cases)"
        few = max(1.0, 2 * float(np.mean(em_extra or [0])))  # "~0": at most twice the emulator's own, or 1 pixel
        return shown, verdict(share >= 0.9 and pixels is not None and pixels <= few,
                              f"{max(0.0, 90 - 100 * share):.1f} points / {max(0.0, (pixels or 0) - few):.1f} pixels")

    def verdict(met: bool, missed_by: str) -> str:
        return "met" if met else f"not met (by {missed_by})"

    def compared(a: str, b: str, value, what: str, scenarios=SHORT) -> list[str]:
        n, (x, y) = paired([a, b], value, scenarios)
        return [f"- {a} minus {b}, {what}: {np.mean(x) - np.mean(y):+.1f}"
                f"{interval(ci.paired_bootstrap(lambda u, v: u - v, x, y), '+.1f')} ({n} cases)"] if n else []

    n, (em, ff) = paired(["emulator", "first-frame"], window)
    _, (em_tf, ff_tf) = paired(["emulator", "first-frame"], lambda c: window(c, 1))
    _, (lf_tf,) = paired(["last-frame"], lambda c: window(c, 1))  # the teacher-forced floor: the true context held
    _, (ez, er) = paired(["emulator keys=zero", "emulator"], case_x)
    _, (em_found,) = paired(["emulator"], lambda c: c.get("found"), {"long"})
    emulator = [f"{np.mean(em) / np.mean(ff):.2f} ({np.mean(em):.1f} px)" if n else "n/a",
                f"{np.mean(em_tf):.1f} (first frame {np.mean(ff_tf):.1f}" + (f", last frame before the chunk "
                                                                    f"{np.mean(lf_tf):.1f})" if lf_tf else ")")
                if em_tf else "n/a",
                f"{np.mean(ez) - np.mean(er):+.1f}" if ez else "n/a",
                f"{100 * np.mean(em_found):.1f}% / {np.mean(em_extra):.1f}" if em_found else "n/a"]
    what = [("free-running x error over 49 rows, x the first frame's", "<= 0.6, below it at every chunk", free_running),
            ("one chunk from the true context: teacher-forced x error, chunks 2-6, px", "<= 8", forced),
            ("x error with `--keys zero` minus with the keys, px", ">= 5", released),
            ("60-s sessions: both fighters found / extra fighter pixels per frame", ">= 90% / ~0 (the emulator's)",
             sessions)]
    rows = []
    for (label, wanted, figure), em_figure in zip(what, emulator):
        got = [figure(m) for m in models]
        rows.append(f"| {label} | " + " | ".join(g for g, _ in got) + f" | {wanted} | {got[0][1]} | {em_figure} |")
    before = [*compared(models[0], "duel-tiny-before", window, "free-running x error px, 49 rows"),
              *compared(models[0], "duel-tiny-before", lambda c: mean(c.get("extra_fighters") or [None]),
                        "extra fighter pixels per frame"),
              *compared(models[0], "duel-tiny-before", lambda c: None if c.get("found") is None else 100 * c["found"],
                        "60-s sessions, both fighters found, points", {"long"}),
              *compared(models[0], "duel-tiny-before", lambda c: mean(c.get("extra_fighters") or [None]),
                        "60-s sessions, extra fighter pixels per frame", {"long"})] if "duel-tiny-before" in models[1:] else []
    return [f"## Place and motion: where the models put the fighters ({models[0]} is what `--ship` exports)", "",
            "Read case by case on the cases each model, the first frame and the emulator all scored (the short "
            "scenarios, 49 rows each, single-action 23; the 60-s sessions for the last row), with a 95% bootstrap "
            "interval over them, paired where two variants are compared; `met` reads the first model. `duel-tiny-before` is "
            "the model shipped before this run, where the report holds it. The last column is the emulator on the same cases "
            "(`--keys zero`: the recording replayed with no keys).", "",
            "| target | " + " | ".join(models) + " | wanted | " + models[0] + ": met? | the emulator |",
            "|---" * (len(models) + 4) + "|", *rows, *([""] + before if before else [])]


def per_label(report_dir: Path, model: str = SHIP_STAGE) -> list[str]:
    """Where the keys cost `model`, per single-action label: the mean x error (native px, over the case's rows) of the
    fighter whose keys act and of the one standing still, with the keys, with every key released, for the first frame
    and teacher-forced, on the cases all of them scored. Below the table, the labels where the keys put the actor
    further off than releasing them, where they move the idle fighter, where one chunk from the true past is much
    closer than the free-running rollout, and where the true past is not continued (each a lever, docs/recipes.md)."""
    from wantofight.benchmark.report import mean, read_variants

    names = {"keys": model, "released": f"{model} keys=zero", "first frame": "first-frame",
             "teacher-forced": f"{model} teacher-forced"}
    cases = {info["name"]: {c["case_id"]: c for c in found if c["family"] == "single-action"}
             for info, found in read_variants(report_dir)}
    if any(not cases.get(n) for n in names.values()):
        return []
    ids = sorted(set.intersection(*(set(cases[n]) for n in names.values())))

    def x(case: dict, player: int) -> float | None:
        return mean(v for v in case["x_error"][player] if v is not None)

    labels: dict[str, list[str]] = {}
    for i in ids:
        labels.setdefault(cases[model][i]["label"], []).append(i)
    lines = [f"## Where the keys cost {model}, per single-action label", "",
             "Mean x error in native px over each case's rows, of the fighter whose keys act (actor) and of the one "
             "standing still (idle), on the cases every column scored.", "",
             "| label (cases) | actor: keys | released | first frame | teacher-forced | idle: keys | released | "
             "first frame |", "|---|---|---|---|---|---|---|---|"]
    worse, idle_moved, drifts, unfollowed = [], [], [], []
    for label, group in sorted(labels.items()):
        def col(name: str, who: str) -> float | None:  # "actor" is 1 or 2, the player whose keys act
            return mean(x(cases[names[name]][i], cases[model][i]["actor"] - 1 if who == "actor"
                          else 2 - cases[model][i]["actor"]) for i in group)
        actor = [col(n, "actor") for n in names]
        idle = [col(n, "idle") for n in ("keys", "released", "first frame")]
        lines.append(f"| {label} ({len(group)}) | " + " | ".join("n/a" if v is None else f"{v:.1f}" for v in [*actor, *idle])
                     + " |")
        keys, free, first, forced = actor
        if None in (keys, free, first, forced) or None in idle:
            continue
        if keys > free + 1:
            worse.append(f"{label} ({keys:.1f} px against {free:.1f} released)")
        if idle[0] > idle[1] + 1:
            idle_moved.append(f"{label} ({idle[0]:.1f} px against {idle[1]:.1f} released)")
        if first > 5 and forced < 0.6 * keys:
            drifts.append(f"{label} ({forced:.1f} px teacher-forced against {keys:.1f} free-running)")
        if forced > first + 5:
            unfollowed.append(f"{label} ({forced:.1f} px teacher-forced against {first:.1f} for the first frame)")
    readings = [
        (worse, "The actor ends further off with its keys than with every key released on {}: the keys reach the "
                "picture but do not move the fighter the way the game does."),
        (idle_moved, "The actor's keys also move the fighter standing still on {}: they are not bound to their own "
                     "fighter."),
        (drifts, "One chunk from the true past is much closer than the free-running rollout on {}: the motion is "
                 "there a chunk at a time and is lost as the rollout runs on."),
        (unfollowed, "From the true past the actor is further off than the first frame on {}: the context it is "
                     "given is not continued where it was.")]
    found = [text.format("; ".join(named)) for named, text in readings if named]
    if found:
        lines += ["", *(f"- {f}" for f in found), "", "What each reading asks of the next recipe (a binding of each key "
                  "stream to its fighter and direction; training on its own rollouts; more context for a fighter in "
                  "the air) is argued in docs/recipes.md, \"The DiT on per-frame latents\"."]
    return lines


def contact_sheet(report_dir: Path, variant: str, out: Path, scenario: str = "dual-action", rows: int = 4,
                  width: int = 900) -> Path:
    """Frames of one of the variant's side-by-side benchmark videos (emulator | generated, both players'
    keys under them), evenly spaced, stacked into a PNG."""
    import cv2
    import numpy as np

    report = json.loads((report_dir / "report.json").read_text())
    videos = next(v for v in report["variants"] if v["name"] == variant)["videos"]
    video = next((v for v in videos if v["scenario"] == scenario), videos[0])
    cap = cv2.VideoCapture(str(report_dir / video["path"]))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    picks = [frames[round(i)] for i in np.linspace(0, len(frames) - 1, rows)]
    sheet = np.concatenate(picks, axis=0)
    if sheet.shape[1] > width:  # a README picture: at most `width` pixels wide
        sheet = cv2.resize(sheet, (width, round(sheet.shape[0] * width / sheet.shape[1])), interpolation=cv2.INTER_NEAREST)
    with written(out) as tmp:
        cv2.imwrite(str(tmp), sheet, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    return out


def keep_shipped(before: Path) -> Path | None:
    """Copy the shipped duel-tiny to `before` (once; a temp name, then renamed), to be scored beside this run's
    stages and to stay after `--ship` replaces it. None when nothing is shipped."""
    import shutil

    from wantofight.inference.shipped import SHIPPED_ROOT
    from wantofight.outputs import remove, staging_dir, swap_in

    shipped = SHIPPED_ROOT / "duel-tiny"
    if not before.is_dir() and shipped.is_dir():
        staged = staging_dir(before)
        remove(staged)
        shutil.copytree(shipped, staged)
        swap_in(staged, before)
    return before if before.is_dir() else None


def same_weights(a: Path, b: Path) -> bool:
    import filecmp

    return all((a / n).is_file() == (b / n).is_file() and (not (a / n).is_file() or filecmp.cmp(a / n, b / n, shallow=False))
               for n in ("ema.safetensors", "model.safetensors", "config.json"))


def ship(run: Path, table: str, before: Path) -> None:
    """Export SHIP_STAGE's run and its VAE to inference/shipped/duel-tiny with a model card, replacing the model
    shipped before only while `before` keeps a copy of it (keep_shipped)."""
    from wantofight.inference.generation import read_checkpoint_model_config, resolve_checkpoint
    from wantofight.inference.shipped import SHIPPED_ROOT, export_checkpoint
    from wantofight.outputs import remove, swap_in

    out = SHIPPED_ROOT / "duel-tiny"
    if out.exists() and not (before.is_dir() and same_weights(out, before)):
        raise SystemExit(f"{out} is not kept in {before}: run the recipe without --ship first (it copies it there), "
                         "or move it aside yourself")
    checkpoint = resolve_checkpoint(run)
    staged = out.with_name(f".{out.name}.new")  # not export_checkpoint's own `.OUT.partial`, which it builds beside
    remove(staged)
    export_checkpoint(checkpoint, staged)  # reads the VAE the run names, which may sit in the folder replaced here
    size = sum(p.stat().st_size for p in staged.rglob("*") if p.is_file()) / 1e6
    what = {"stage2": "the causal model after stages 1-2, sampled in 4 Euler steps",
            "stage3": "its 4-step causal student after stages 1-3"}[SHIP_STAGE]
    m, _ = read_checkpoint_model_config(checkpoint)
    grid = f"{m.latent_height}x{m.latent_width}"
    vae = ("the recipe's game VAE (Wan layout: 8x in space, 4x in time)" if m.vae.kind == "wan" else
           "the per-frame 4x autoencoder (bench/assets/vae-frame4x: one latent frame per frame, 4x in space)")
    card = [f"# duel-tiny: the recipe's {SHIP_STAGE} ({size:.1f} MB with its VAE)", "",
            f"The tiny preset ({m.num_blocks} DiT blocks) at width {m.dim}, RoPE base {m.rope_theta:g}, "
            f"{m.patch_size[1]}x{m.patch_size[2]} patches and {m.height}x{m.width} pixels ({grid} latents), "
            f"{what} of `python bench/learns.py` (docs/recipes.md), decoding with {vae} (vae/). Trained on CPU on "
            "recordings of the built-in game `duel` made by this project's collector: "
            "scripted matches (seed 1), a button masher against the scripted AI (seed 2) and move drills (seed 3). "
            "Scored on held-out recordings (seeds 100-102 and the walk-under key files) by `wtf benchmark`.", "",
            f"Exported from {checkpoint.relative_to(ROOT) if checkpoint.is_relative_to(ROOT) else checkpoint}.", "",
            "Use: `wtf generate --checkpoint duel-tiny ...`, `wtf benchmark run SUITE --checkpoint duel-tiny ...`, "
            "`wtf play --checkpoint duel-tiny`.", "",
            "It is a small CPU model, scored, not tuned. Whether it beats repeating the prompt frame, and which of "
            "the project's targets it meets, is read in the tables below (\"Place and motion\" against the first "
            f"frame and the emulator on the same cases). Its row in them is `{SHIP_STAGE}`.", "", table.split("\n", 1)[1]]
    (staged / "MODEL_CARD.md").write_text("\n".join(card))
    swap_in(staged, out)
    print(f"shipped {out} ({size:.1f} MB)")


if __name__ == "__main__":
    main()
