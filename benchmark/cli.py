"""`wtf probe train | eval` and `wtf benchmark build | run | report | eval` (`wtf eval` is an alias of
`wtf benchmark eval`).

Each command builds its settings and calls the library function the tests call (benchmark/probe.py,
suite.py, run.py, report.py, replay.py); torch is imported inside the commands so `wtf --help` stays instant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from wantofight.cli_util import DEVICE_OPTION, OVERWRITE_OPTION, console, fail, stopped, wrote

probe_app = typer.Typer(help="The frame -> state probe: reads both fighters' position, facing, state, move and "
                             "health from one frame (trained on RAM).", no_args_is_help=True)
bench_app = typer.Typer(help="The fighting-game benchmark: mine test cases from recordings, score any model "
                             "against the emulator's RAM, report.", no_args_is_help=True)


def errors() -> tuple:
    """The exception types that mean bad input (one line, exit 2), imported on first use."""
    from wantofight.annotate.episode import EpisodeError
    from wantofight.benchmark.labels import LabelError
    from wantofight.benchmark.probe import ProbeError
    from wantofight.benchmark.run import BenchmarkError
    from wantofight.benchmark.suite import SuiteError
    from wantofight.fidelity import EvalError
    from wantofight.inference.generation import GenerationError

    return (EpisodeError, LabelError, ProbeError, BenchmarkError, SuiteError, EvalError, GenerationError,
            FileNotFoundError, ValueError)


# ---------------------------------------------------------------------------------------------
# wtf probe
# ---------------------------------------------------------------------------------------------

@probe_app.command("train")
def probe_train(
    runs: List[Path] = typer.Argument(..., help="Recording runs (wtf collect --out); episodes are split for a held-out score."),
    out: Path = typer.Option(..., "--out", help="Probe folder: probe.safetensors, probe.json, report.json."),
    size: str = typer.Option("native", "--size", help="Frame size HxW the probe reads (the model's, e.g. 128x128), or native."),
    steps: int = typer.Option(2000, "--steps", help="Optimiser steps."),
    batch_size: int = typer.Option(128, "--batch-size", help="Frames per step."),
    max_frames: int = typer.Option(40000, "--max-frames", help="Training frames kept in memory, spread over the episodes."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Share of episodes held out for report.json."),
    seed: int = typer.Option(0, "--seed", help="Seed of the split, the weights and the batches."),
    overwrite: bool = OVERWRITE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
) -> None:
    """Train the state probe on recorded frames and their RAM; prints the held-out accuracy per field."""
    from wantofight.benchmark.probe import ProbeConfig, format_metrics, parse_size, train_probe, verdict
    from wantofight.progress import Progress

    try:
        config = ProbeConfig(size=parse_size(size), steps=steps, batch_size=batch_size, max_frames=max_frames,
                             val_fraction=val_fraction, seed=seed)
        with Progress("probe", total=steps, unit="steps", detail="loss {loss:.3f}", enabled=progress, eta=True,
                      loss=float("nan")) as bar:
            report = train_probe(runs, out, config, log=lambda m: console.print(m, highlight=False),
                                 progress=lambda step, loss: bar.update(completed=step, loss=loss),
                                 overwrite=overwrite)
    except KeyboardInterrupt:
        stopped(f"nothing written to {out}; run the command again")
    except errors() as err:
        fail(str(err))
    if report["held_out"]:
        console.print(format_metrics(report["held_out"]), highlight=False)
    console.print(verdict(report), highlight=False, soft_wrap=True)  # met or missed, just above the last line
    wrote(out, f"{report['parameters']:,} parameters, {report['train_frames']:,} training frames, "
               f"{report['decode_s'] + report['train_s']:.0f} s")


@probe_app.command("eval")
def probe_eval(
    probe: Path = typer.Argument(..., help="Probe folder (wtf probe train --out)."),
    runs: List[Path] = typer.Argument(..., help="Recording runs to score on (every frame whose truth is known)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the result as JSON here."),
    max_frames: Optional[int] = typer.Option(None, "--max-frames", help="Score this many frames, spread evenly (default: all)."),
) -> None:
    """Score a probe on other recordings: accuracy per field and player."""
    from wantofight.benchmark.probe import eval_probe, format_metrics

    try:
        result = eval_probe(probe, runs, max_frames)
    except errors() as err:
        fail(str(err))
    console.print(format_metrics(result), highlight=False)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(result, indent=1) + "\n")
        console.print(f"wrote {report}", highlight=False)


# ---------------------------------------------------------------------------------------------
# wtf benchmark
# ---------------------------------------------------------------------------------------------

ALL_TABLES_OPTION = typer.Option(False, "--all-tables", help="Print every table of the page (per chunk, per scenario, "
                                  "per action), not only the gains and action following.")


@bench_app.command("build")
def bench_build(
    runs: List[Path] = typer.Argument(..., help="Held-out recording runs (not used to train the model) to mine."),
    out: Path = typer.Option(..., "--out", help="New suite folder: suite.json + cases.parquet."),
    per_scenario: int = typer.Option(20, "--per-scenario", help="Cases kept per scenario (per player and action for single-action)."),
    identity_rows: int = typer.Option(48, "--identity-rows", help="Generated rows of static, swap and overlap cases."),
    lead_rows: int = typer.Option(8, "--lead-rows", help="Rows between the prompt and a swap or overlap."),
    overlap_rows: int = typer.Option(4, "--overlap-rows", help="Rows the sprites must overlap for an overlap case."),
    long_seconds: float = typer.Option(60.0, "--long-seconds", help="Seconds of fighting in a long case."),
    seed: int = typer.Option(0, "--seed", help="Seed of which cases are kept when there are more."),
    overwrite: bool = OVERWRITE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
) -> None:
    """Mine test cases from recordings by their RAM: single- and dual-action, and five identity scenarios."""
    from wantofight.benchmark.scenarios import MineOptions
    from wantofight.benchmark.suite import build_suite
    from wantofight.progress import Progress

    bars: dict = {}

    def show(stage: str, i: int, n: int) -> None:
        if stage not in bars:
            for bar in bars.values():
                bar.__exit__(None, None, None)
            bars[stage] = Progress(stage, total=n, unit="episodes" if stage == "annotate" else "cases",
                                   enabled=progress).__enter__()
        bars[stage].update(completed=i)

    try:
        options = MineOptions(per_scenario=per_scenario, identity_rows=identity_rows, lead_rows=lead_rows,
                              overlap_rows=overlap_rows, long_seconds=long_seconds, seed=seed)
        meta = build_suite(runs, out, options, progress=show, overwrite=overwrite)
    except KeyboardInterrupt:
        stopped(f"nothing written to {out}; run the command again")
    except errors() as err:
        fail(str(err))
    finally:
        for bar in bars.values():
            bar.__exit__(None, None, None)
    console.print(suite_table(meta), highlight=False)
    wrote(out, f"{meta['cases']} cases")


def suite_table(meta: dict) -> str:
    lines = [f"{'scenario':<14} {'cases':>6} {'found':>6}"]
    for name, row in meta["scenarios"].items():
        rare = "" if name == "single-action" or row["cases"] >= meta["options"]["per_scenario"] else \
            f"  (fewer than --per-scenario {meta['options']['per_scenario']}: record more, see docs/benchmark.md)"
        lines.append(f"{name:<14} {row['cases']:>6} {row['found']:>6}{rare}")
    if meta["single_actions_missing"]:
        lines.append(f"no single-action case of: {', '.join(meta['single_actions_missing'])} (record a drill)")
    return "\n".join(lines)


@bench_app.command("run")
def bench_run(
    suite: Path = typer.Argument(..., help="Suite folder (wtf benchmark build --out)."),
    probe: Path = typer.Option(..., "--probe", help="Probe folder trained at the size the model generates."),
    out: Path = typer.Option(..., "--out", help="Report folder: report.json, index.html, per-case results, videos."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Trainer run or checkpoint folder to score, or a shipped model's name (duel-tiny)."),
    model: List[str] = typer.Option([], "--model", help="checkpoint, emulator (the ceiling), first-frame (the floor), last-frame (the recorded row before each 8-row chunk: the floor of --teacher-forced, added with it) or vae (the emulator's frames through --vae: the ceiling of a model that decodes with it); repeatable. Default: the checkpoint, else both baselines."),
    vae: Optional[str] = typer.Option(None, "--vae", help="VAE for --model vae: a `wtf train vae` folder, a Wan2.1 diffusers folder, or tiny."),
    keys: str = typer.Option("real", "--keys", help="Key modes, comma-separated: real, zero, swap-players. For the checkpoint, and for the emulator when --model names it (it replays the recording with those keys: a perfect model's score under the ablation)."),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="Also score emulator and first-frame (reused when the folder has them)."),
    steps: int = typer.Option(4, "--steps", help="Denoising steps per chunk."),
    sampler: Optional[str] = typer.Option(None, "--sampler", help="euler or x0_renoise (default: the checkpoint stage's)."),
    teacher_forced: bool = typer.Option(False, "--teacher-forced", help="Also score the checkpoint teacher-forced: each chunk from the recorded chunks before it (encoded by its VAE), not its own. Its one-chunk error, apart from drift."),
    max_cases: Optional[int] = typer.Option(None, "--max-cases", help="Score at most N cases per scenario (per player and action for single-action)."),
    scenarios: Optional[str] = typer.Option(None, "--scenarios", help="Score only these scenarios, comma-separated (default: all)."),
    videos: int = typer.Option(2, "--videos", help="Side-by-side videos written per scenario and model."),
    lpips: bool = typer.Option(True, "--lpips/--no-lpips", help="Compute LPIPS (needs AlexNet weights offline)."),
    lpips_backbone: Optional[Path] = typer.Option(None, "--lpips-backbone", help="torchvision's alexnet-owt-7be5be79.pth for LPIPS."),
    device: str = DEVICE_OPTION,
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted run in --out (cases already scored are kept)."),
    all_tables: bool = ALL_TABLES_OPTION,
    overwrite: bool = OVERWRITE_OPTION,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
) -> None:
    """Generate every case with the model and its keys, read the frames with the probe, score against the emulator."""
    from wantofight.benchmark.probe import load_probe
    from wantofight.benchmark.report import text_tables
    from wantofight.benchmark.run import cases_to_score, parse_scenarios, plan_variants, run_benchmark
    from wantofight.benchmark.suite import Suite
    from wantofight.devices import resolve_device
    from wantofight.progress import Progress

    if steps < 1 or videos < 0 or (max_cases is not None and max_cases < 1):
        fail(f"--steps ({steps}) and --max-cases ({max_cases}) must be >= 1 and --videos ({videos}) >= 0")
    try:
        the_suite, the_probe = Suite(suite), load_probe(probe)
        variants = plan_variants(checkpoint, model or None, [k.strip() for k in keys.split(",") if k.strip()],
                                 baselines, steps, sampler, vae, teacher_forced)
        chosen = parse_scenarios(scenarios)
        per = cases_to_score(the_suite, max_cases, chosen)
        with Progress("benchmark", total=per * len(variants), unit="cases", detail="{name}", enabled=progress,
                      eta=True, name="") as bar:
            result = run_benchmark(the_suite, the_probe, probe, variants, out, resume=resume, max_cases=max_cases,
                                   scenarios=chosen, videos=videos, device=resolve_device(device),
                                   lpips_backbone=lpips_backbone, lpips=lpips,
                                   on_case=lambda v, c, r: bar.advance(name=v.name), overwrite=overwrite,
                                   log=lambda m: console.print(m, highlight=False, soft_wrap=True))
    except KeyboardInterrupt:
        from wantofight.outputs import claim

        stopped(f"the cases scored so far are kept in {claim(out, overwrite, resume=True)}; add --resume to the "
                "same command to finish")
    except errors() as err:
        fail(str(err))
    console.print(text_tables(result["report"], every=all_tables), highlight=False)
    wrote(out, "report.json and index.html (open it in a browser)")


@bench_app.command("report")
def bench_report(out: Path = typer.Argument(..., help="Report folder of `wtf benchmark run`."),
                 all_tables: bool = ALL_TABLES_OPTION) -> None:
    """Rewrite report.json and index.html from the cases scored in a report folder."""
    from wantofight.benchmark.report import text_tables, write_report

    if not (out / "run.json").is_file():
        fail(f"{out} is not a benchmark report folder (no run.json; make one with `wtf benchmark run`)")
    console.print(text_tables(write_report(out), every=all_tables), highlight=False)


# ---------------------------------------------------------------------------------------------
# wtf benchmark eval (alias: wtf eval)
# ---------------------------------------------------------------------------------------------

def eval_command(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Trainer run or checkpoint folder, or a shipped model's name (duel-tiny)."),
    data: Path = typer.Option(..., "--data", help="Curriculum DS_DIR (wtf build-curriculum)."),
    keys_dir: Optional[Path] = typer.Option(None, "--keys-dir", help="Also write each clip's key stream here as CLIP_ID.keys (replayable with wtf collect --policy keys:)."),
    split: str = typer.Option("val", "--split", help="train or val."),
    frames: int = typer.Option(33, "--frames", help="Frames per clip window (1 + 8 n): frame 0 given, the rest generated."),
    steps: int = typer.Option(4, "--steps", help="Denoising steps per chunk."),
    max_clips: Optional[int] = typer.Option(None, "--max-clips", help="Evaluate the first N clips only."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="Comma-separated tiers (default: all)."),
    decoder: Optional[Path] = typer.Option(None, "--decoder", help="Pruned decoder folder from `wtf train decoder`."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the per-clip and per-tier results as JSON."),
    lpips: bool = typer.Option(True, "--lpips/--no-lpips", help="Compute LPIPS (needs the lpips package and AlexNet weights offline)."),
    lpips_backbone: Optional[Path] = typer.Option(None, "--lpips-backbone", help="torchvision's AlexNet weights (alexnet-owt-7be5be79.pth) for LPIPS; default: torchvision's cache."),
    device: str = DEVICE_OPTION,
) -> None:
    """Replay a dataset's clips' key streams from their first frames: PSNR / SSIM / LPIPS per tier, latency per chunk."""
    from wantofight.devices import resolve_device
    from wantofight.fidelity import EvalError
    from wantofight.benchmark.replay import evaluate, write_report
    from wantofight.inference.generation import GenerationError

    try:
        result = evaluate(checkpoint, data, split, frames, steps, keys_dir, max_clips, tiers, decoder=decoder,
                          device=resolve_device(device), lpips=lpips, lpips_backbone=lpips_backbone)
    except (EvalError, GenerationError, FileNotFoundError, ValueError) as err:
        fail(str(err))
    console.print(result.table(), highlight=False)
    if report is not None:
        write_report(result, report)
        wrote(report, "per-clip and per-tier scores")


bench_app.command("eval")(eval_command)


def register(root: typer.Typer) -> None:
    root.command("eval", hidden=True, help="Same as `wtf benchmark eval` (kept for a release).")(eval_command)
    root.add_typer(probe_app, name="probe")
    root.add_typer(bench_app, name="benchmark")
