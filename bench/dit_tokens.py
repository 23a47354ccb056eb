"""What places a sprite (issue #32 item 3): the timestep shift, the RoPE base and the patch size of the tiny
DiT, each measured on the one-chunk x error (`wtf benchmark run --teacher-forced`: every chunk generated from the
recorded chunks before it), side by side with the first frame, the emulator and the shipped model.

"The shipped model" here is the Wan-layout `duel-tiny` shipped on 2026-12-06 and replaced on 2026-12-07, kept as it
was in bench/assets/duel-tiny-2026-12-06 so that these measurements start from the same weights.

    python bench/dit_tokens.py [--steps 1000] [--max-cases 3] [--variants shift5,shift2,...]

Every variant starts from the shipped `duel-tiny`'s weights and is trained by `wtf train stage2` for the same
steps on the same latents (its clean-context chunks included), so the rows differ only in the one setting
named. The shipped weights are a stage-3 student; stage 2 starts from a stage-1 run, so the script writes
them into a folder labelled as a stage-1 checkpoint of the variant's model config (`init/VARIANT`): the
weights are the same, the config names the variant's shift or RoPE base. Steps (each skipped when its
output is complete, so a rerun continues):

    wtf collect (scripted matches seed 1, drills seed 3: training and the probe; scripted matches seed 100:
        held out) -> wtf probe train (128x128) -> wtf benchmark build (held-out) -> wtf build-curriculum ->
    wtf encode (the shipped VAE) -> per variant: wtf train stage2 -> one report folder: the emulator, the first
    frame, the shipped model teacher-forced, each variant teacher-forced.

Prints the table of docs/model.md "What places a sprite" (x error per chunk and its mean with a 95%
interval over cases) and writes it to bench/results/dit_tokens.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learns import trained, wtf  # noqa: E402  (the recipe's: run a documented `wtf` command; a run's last step)

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "bench" / "assets" / "duel-tiny-2026-12-06"  # the Wan-layout duel-tiny these measurements start from
SIZE = "128x128"
FRAMES = 33
SCENARIOS = "dual-action,jump_over,chase_cross,overlap"
SHOWN_CHUNKS = 6
VARIANTS = {
    # name: model-config fields over the shipped model's (timestep_shift sets both the training sigmas,
    # train_shift 0 = the model's, and the sampling schedule)
    "shift5": {},
    "shift3": {"timestep_shift": 3.0},
    "shift2": {"timestep_shift": 2.0},
    "shift1": {"timestep_shift": 1.0},
    "rope100": {"rope_theta": 100.0},
    "patch1": {"patch_size": [1, 1, 1]},  # 4x the tokens: one per latent cell
    "previous": {"previous_frame_input": True},  # the last frame before the chunk as extra input channels
}
RECORD = {
    "train-match": ["--policy", "scripted", "--episodes", "6", "--workers", "2", "--seed", "1"],
    "train-drill": ["--policy", "drill", "--episodes", "2", "--workers", "2", "--seed", "3"],
    "heldout-match": ["--policy", "scripted", "--episodes", "6", "--workers", "2", "--seed", "100"],
}


def init_folder(out: Path, fields: dict, vae: Path) -> Path:
    """The shipped weights as a stage-1 checkpoint folder whose config names the variant's model."""
    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ("model.safetensors", "ema.safetensors", "reference_encoder.safetensors"):
        if not (SHIPPED / name).is_file():  # an EMA-only export keeps no ema.safetensors
            continue
        shutil.copy2(SHIPPED / name, tmp / name)
        if name != "reference_encoder.safetensors" and fields.get("patch_size") == [1, 1, 1]:
            finer_patches(tmp / name)
    config = json.loads((SHIPPED / "config.json").read_text())
    config["stage"] = "stage1"
    # the previous-frame input is not written here: stage 2 adds its channels, at zero, to a model without them
    config["model"].update({k: v for k, v in fields.items() if k != "previous_frame_input"})
    config["model"]["vae"]["pretrained"] = str(vae)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    tmp.rename(out)
    return out


def finer_patches(file: Path) -> None:
    """2x2 patches -> 1x1 in a DiT state dict: a cell's embedding is the sum of the 2x2 kernel (a flat 2x2
    patch embeds as before) and its output the mean of the four sub-cell outputs the head predicted."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(file))
    state["patch_embedding.weight"] = state["patch_embedding.weight"].sum(dim=(-2, -1), keepdim=True).contiguous()
    for key in ("head.head.weight", "head.head.bias"):  # rows ordered (ph, pw, C): C innermost
        value = state[key]
        state[key] = value.reshape(4, -1, *value.shape[1:]).mean(dim=0).contiguous()
    save_file(state, str(file))


def one_chunk_errors(report: Path) -> dict[str, dict]:
    """Per variant: x error per chunk (mean over cases) and the mean over chunks with its 95% interval."""
    from wantofight.benchmark import intervals
    from wantofight.benchmark.report import read_variants, x_error_chunks

    rows = {}
    for info, cases in read_variants(report):
        per_case = {c["case_id"]: v for c in cases if (v := [x for x in x_error_chunks(c) if x is not None])}
        chunks = max(len(c) for c in per_case.values())
        curve = [float(np.mean([c[t] for c in per_case.values() if t < len(c)])) for t in range(chunks)]
        by_case = {k: float(np.mean(c)) for k, c in per_case.items()}
        means = list(by_case.values())
        rows[info["name"]] = {"cases": len(per_case), "chunks": curve, "mean": float(np.mean(means)),
                              "ci": intervals.bootstrap(means), "by_case": by_case,
                              "ms_per_chunk": 1000 * float(np.mean(s)) if (s := [x for c in cases
                                                                               for x in c.get("chunk_seconds", [])])
                              else None}
    return rows


def paired(rows: dict[str, dict], name: str, base: str) -> str:
    """`name` minus `base` on the cases both scored: the mean of the per-case differences, its 95% interval
    and how many cases `name` is the lower on. Two rows whose own intervals overlap can still differ
    case by case: the cases are the same, so their spread between cases cancels here."""
    from wantofight.benchmark import intervals

    a, b = rows[name]["by_case"], rows[base]["by_case"]
    d = [a[k] - b[k] for k in a if k in b]
    if name == base or not d:
        return "–"
    lo, hi = intervals.bootstrap(d) or (float("nan"), float("nan"))
    return f"{np.mean(d):+.1f} [{lo:+.1f}, {hi:+.1f}] ({sum(x < 0 for x in d)}/{len(d)})"


BASE = "shift5 teacher-forced"
"""The row every variant is paired with: the same 1,000 steps at today's settings."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tokens")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "tokens")
    parser.add_argument("--steps", type=int, default=1000, help="stage-2 steps per variant")
    parser.add_argument("--lr", type=float, default=3e-4, help="stage-2 learning rate (the recipe's stage 2: 1e-3)")
    parser.add_argument("--max-cases", type=int, default=3, help="held-out cases per scenario")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "dit_tokens.md")
    parser.add_argument("--recipe-data", action="store_true",
                        help="train on bench/learns.py's latents (data/learns/latents, made by the shipped VAE) and score "
                             "on its suite with its probe (data/bench/suite, runs/bench-probe/128x128) instead of "
                             "collecting this script's own")
    parser.add_argument("--free-running", action="store_true",
                        help="also score each variant free-running (from its own chunks), the benchmark's path")
    parser.add_argument("--scenarios", default=SCENARIOS, help=f"suite scenarios scored (default {SCENARIOS})")
    args = parser.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        raise SystemExit(f"--variants {','.join(bad)}: valid are {', '.join(VARIANTS)}")
    args.runs.mkdir(parents=True, exist_ok=True)
    log = args.runs / "dit_tokens.log"
    seconds: dict[str, float] = {}
    vae = (SHIPPED / "vae").resolve()

    for name, settings in ({} if args.recipe_data else RECORD).items():
        if not (args.data / name / "run.json").is_file():
            seconds[name] = wtf("collect", *settings, "--out", str(args.data / name), log=log)
    probe = ROOT / "runs" / "bench-probe" / SIZE if args.recipe_data else args.runs / "probe"
    if args.recipe_data:
        args.data = ROOT / "data" / "learns"
        manifest = args.data / "latents" / "manifest.json"
        if manifest.is_file():  # the VAE the recipe encoded with (the shipped one, in its own folder)
            vae = Path(json.loads(manifest.read_text())["vae"]["spec"])
        for need in (probe / "probe.json", args.data / "latents" / "manifest.json", ROOT / "data" / "bench" / "suite"):
            if not need.exists():
                raise SystemExit(f"--recipe-data: no {need} (python bench/probe.py, then python bench/learns.py)")
    if not (probe / "probe.json").is_file():
        seconds["probe"] = wtf("probe", "train", str(args.data / "train-match"), str(args.data / "train-drill"),
                               "--out", str(probe), "--size", SIZE, log=log)
    suite = ROOT / "data" / "bench" / "suite" if args.recipe_data else args.data / "suite"
    if not (suite / "suite.json").is_file():
        seconds["suite"] = wtf("benchmark", "build", str(args.data / "heldout-match"), "--out", str(suite), log=log)
    ds, latents = args.data / "curriculum", args.data / "latents"
    if not (ds / "manifest.json").is_file():
        seconds["curriculum"] = wtf("build-curriculum", str(args.data / "train-match"), str(args.data / "train-drill"),
                                    "--out", str(ds), "--clip-frames", str(FRAMES), "--stride", "128",
                                    "--workers", "2", "--seed", "0", log=log)
    if not (latents / "manifest.json").is_file():
        seconds["encode"] = wtf("encode", str(ds), "--out", str(latents), "--vae", str(vae), "--clip", "tiny",
                                "--frames", str(FRAMES), "--size", SIZE, "--workers", "1", log=log)

    runs = {}
    shipped_model = json.loads((SHIPPED / "config.json").read_text())["model"]
    for name in names:
        run = runs[name] = args.runs / name
        if trained(run, args.steps):
            continue
        start = (["--resume"] if (run / "checkpoints" / "latest").is_file()
                 else ["--init-from", str(init_folder(args.runs / "init" / name, VARIANTS[name], vae))])
        sets = [f"model.vae.pretrained={vae}", "model.height=128", "model.width=128", "model.dim=128",
                f"model.rope_theta={shipped_model['rope_theta']}",
                "model.ffn_dim=256", f"data.frames={FRAMES}", "seed=0", "data.batch_size=4", f"optim.lr={args.lr:g}",
                "fighter_weight=10", "validation.every=100000", "checkpoint.every=250",
                *(f"model.{k}={v}" for k, v in VARIANTS[name].items())]
        seconds[name] = wtf("train", "stage2", "--preset", "tiny", "--data", str(latents), "--out", str(run),
                            "--steps", str(args.steps), *start, *(a for s in sets for a in ("--set", s)), log=log)

    from wantofight.benchmark.probe import load_probe
    from wantofight.benchmark.run import Variant, parse_scenarios, run_benchmark
    from wantofight.benchmark.suite import Suite

    report = args.runs / "report"
    variants = [Variant("emulator"), Variant("first-frame"), Variant("last-frame"),
                Variant("checkpoint", checkpoint=str(SHIPPED), steps=4, teacher_forced=True),
                *(Variant("checkpoint", checkpoint=str(runs[n]), steps=4, teacher_forced=forced) for n in names
                  for forced in ((True, False) if args.free_running else (True,)))]
    t0 = time.perf_counter()
    print(f"$ benchmark: {len(variants)} variants, {args.max_cases} cases per scenario ({args.scenarios})", flush=True)
    run_benchmark(Suite(suite), load_probe(probe), probe, variants, report, resume=report.exists(),
                  max_cases=args.max_cases, scenarios=parse_scenarios(args.scenarios), videos=0, lpips=False,
                  log=lambda m: print(m, flush=True))
    seconds["benchmark"] = time.perf_counter() - t0

    rows = one_chunk_errors(report)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    width = min(SHOWN_CHUNKS, max(len(r["chunks"]) for r in rows.values()))
    command = " ".join(["python bench/dit_tokens.py", *sys.argv[1:]])
    data = ("the latents of bench/learns.py's recordings through the shipped VAE (data/learns/latents)"
            if args.recipe_data else
            "the latents of 6 scripted matches (seed 1) and 2 drill episodes (seed 3) through the shipped VAE")
    heldout = "bench/learns.py's suite (data/bench/suite)" if args.recipe_data else "held-out matches (seed 100)"
    lines = [f"# {args.results.name}: what places a sprite (issue #32)", "",
             f"Written by `{command}` at {commit} on 2 cores. Each variant: the shipped duel-tiny's weights, "
             f"{args.steps} steps of `wtf train stage2` (batch 4 x {FRAMES} frames, lr {args.lr:g}, fighter_weight 10, "
             f"the clean-context chunks of docs/stages.md) on {data}, then scored teacher-forced (each chunk from the "
             f"recorded chunks before it){' and free-running' if args.free_running else ''} on {heldout}: "
             f"{args.scenarios}, at most {args.max_cases} cases each (single-action: per action).", "",
             f"x error in native px (both players, the probe's x against RAM), per 8-row chunk (the first "
             f"{SHOWN_CHUNKS}) and the mean over all of a case's chunks (95% interval over cases); ms per chunk on "
             f"this machine. Paired: the row minus `{BASE}` case by case (mean, 95% interval, cases where the row is "
             "lower).", "",
             "| variant | cases | " + " | ".join(f"chunk {t + 1}" for t in range(width))
             + " | mean [95%] | paired vs shift 5 | ms/chunk |",
             "|---|---|" + "---|" * width + "---|---|---|"]
    for name, r in rows.items():
        cells = [f"{v:.1f}" for v in r["chunks"][:width]] + ["–"] * (width - len(r["chunks"][:width]))
        ci = f" [{r['ci'][0]:.1f}, {r['ci'][1]:.1f}]" if r["ci"] else ""
        ms = f"{r['ms_per_chunk']:.0f}" if r["ms_per_chunk"] else "n/a"
        vs = paired(rows, name, BASE) if BASE in rows else "n/a"
        lines.append(f"| {name} | {r['cases']} | " + " | ".join(cells) + f" | {r['mean']:.1f}{ci} | {vs} | {ms} |")
    lines += ["", "Seconds per step of this run: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()), ""]
    text = "\n".join(lines)
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.results.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(args.results)
    (args.runs / "dit_tokens.json").write_text(json.dumps({"rows": rows, "seconds": seconds}, indent=2))


if __name__ == "__main__":
    main()
