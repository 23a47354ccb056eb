"""The benchmark's own baselines on the recipe's suite: cases per scenario, and the emulator (ceiling)
against the repeated prompt (floor), scored side by side by the same code in one run.

    python bench/benchmark.py [--root data/bench] [--probe runs/bench-probe/128x128] [--out runs/bench-baselines]
    python bench/benchmark.py --native-memory [--root data/bench-native]   # the 4 GB bound at native size

Records the recipe where missing (bench/recipe.py), builds the suite from the held-out runs, and
runs `wtf benchmark run --model emulator --model first-frame` over every case, printing the peak
resident memory of each `wtf benchmark run` (docs/benchmark.md, "Memory"). Acceptance
(docs/benchmark.md): the emulator follows >= 0.95 and binds 100% of the cases of every identity
scenario; the first frame scores far below; each identity scenario has >= 20 cases.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipe  # noqa: E402


def run_measured(cmd: list[str]) -> float:
    """Run a command to its end; its peak resident memory in GB (the child's ru_maxrss, the figure
    `/usr/bin/time -v` reports as "Maximum resident set size")."""
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return usage.ru_maxrss / 2**20  # KiB on Linux


def native_memory(root: Path) -> None:
    """The README's memory figure: three scripted-vs-random episodes of up to 2,400 frames and two drill
    episodes make a ~300-case suite with 60-s long sessions; a probe at `wtf probe train`'s default native
    224x240; then `wtf benchmark run --model first-frame --max-cases 6` at its defaults, peak resident
    memory measured (bound: 4 GB). Steps whose output exists are reused."""
    steps = [
        (root / "match", ["wtf", "collect", "--policy", "scripted", "--p2-policy", "random", "--episodes", "3",
                          "--max-frames", "2400", "--workers", "2", "--seed", "40"]),
        (root / "drill", ["wtf", "collect", "--policy", "drill", "--episodes", "2", "--workers", "2", "--seed", "41"]),
        (root / "probe", ["wtf", "probe", "train", str(root / "match"), str(root / "drill"), "--steps", "300"]),
        (root / "suite", ["wtf", "benchmark", "build", str(root / "match"), str(root / "drill")]),
    ]
    for out, cmd in steps:
        if not out.exists():
            subprocess.run([*cmd, "--out", str(out), "--no-progress"], check=True)
    cases = json.loads((root / "suite" / "suite.json").read_text())["scenarios"]
    print("suite: " + ", ".join(f"{k} {v['cases']}" for k, v in cases.items()))
    out = root / "report"
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    t0 = time.perf_counter()
    peak = run_measured(["wtf", "benchmark", "run", str(root / "suite"), "--probe", str(root / "probe"),
                         "--model", "first-frame", "--max-cases", "6", "--out", str(out), "--no-progress"])
    print(f"native 224x240, first-frame and emulator, --max-cases 6: peak resident memory {peak:.2f} GB "
          f"(bound 4 GB: {'met' if peak <= 4 else 'MISSED'}), {time.perf_counter() - t0:.0f} s")


def screenshot(page_path: Path, png: Path) -> None:
    """The report page as the README shows it: headless Debian Chromium through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(page_path.resolve().as_uri())
        page.wait_for_function("Array.from(document.images).every(i => i.complete)")
        page.screenshot(path=str(png), full_page=False)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=recipe.ROOT / "data" / "bench")
    parser.add_argument("--probe", type=Path, default=recipe.ROOT / "runs" / "bench-probe" / "128x128")
    parser.add_argument("--out", type=Path, default=recipe.ROOT / "runs" / "bench-baselines")
    parser.add_argument("--checkpoint", type=Path, help="also score this checkpoint (real, zero and swapped keys)")
    parser.add_argument("--screenshot", type=Path, help="write a PNG of the report page here (headless Chromium)")
    parser.add_argument("--max-cases", type=int, help="score at most N cases per scenario (default: all)")
    parser.add_argument("--native-memory", action="store_true",
                        help="only the memory check at native size (its own data under --root, default data/bench-native)")
    args = parser.parse_args()
    if args.native_memory:
        native_memory(args.root if "--root" in sys.argv else recipe.ROOT / "data" / "bench-native")
        return

    took = recipe.ensure(args.root)
    print(f"recipe: {sum(took.values()):.0f} s of recording this run ({', '.join(f'{k} {v:.0f} s' for k, v in took.items())})")
    if not (args.probe / "probe.json").is_file():
        raise SystemExit(f"no probe at {args.probe}: run python bench/probe.py first")
    suite = args.root / "suite"
    if not (suite / "suite.json").is_file():
        t0 = time.perf_counter()
        subprocess.run(["wtf", "benchmark", "build", *map(str, recipe.runs(args.root, "heldout")), "--out", str(suite),
                        "--no-progress"], check=True)
        print(f"suite built in {time.perf_counter() - t0:.0f} s")
    meta = json.loads((suite / "suite.json").read_text())
    print("\ncases per scenario (found in the held-out recordings, kept)")
    for name, row in meta["scenarios"].items():
        print(f"  {name:<14} {row['cases']:>5} of {row['found']:>5}")
    t0 = time.perf_counter()
    limit = ["--max-cases", str(args.max_cases)] if args.max_cases else []
    peak = run_measured(["wtf", "benchmark", "run", str(suite), "--probe", str(args.probe), "--out", str(args.out),
                         "--model", "emulator", "--model", "first-frame", *limit, "--no-progress", "--resume"])
    print(f"baselines: peak resident memory {peak:.2f} GB")
    if args.checkpoint:
        peak = run_measured(["wtf", "benchmark", "run", str(suite), "--probe", str(args.probe), "--out", str(args.out),
                             "--checkpoint", str(args.checkpoint), "--keys", "real,zero,swap-players", *limit,
                             "--no-progress", "--resume"])
        print(f"{args.checkpoint}: peak resident memory {peak:.2f} GB")
    print(f"scored in {time.perf_counter() - t0:.0f} s")
    report = json.loads((args.out / "report.json").read_text())
    by = {v["name"]: v for v in report["variants"]}
    emu, first = by["emulator"], by["first-frame"]
    print("\n                emulator  first-frame")
    for fam in ("single-action", "dual-action", "identity", "all"):
        print(f"follow {fam:<14} {emu['families'][fam]['follow']:.3f}     {first['families'][fam]['follow']:.3f}")
    for s in ("static", "jump_over", "chase_cross", "overlap", "long"):
        e, f = emu["scenarios"][s], first["scenarios"][s]
        if e["cases"]:
            print(f"binding {s:<13} {e['binding']:5.1f}%     {f['binding']:5.1f}%   ({e['cases']} cases)")
    ok = emu["families"]["all"]["follow"] >= 0.95 and all(
        emu["scenarios"][s]["binding"] == 100.0 for s in ("static", "jump_over", "chase_cross", "overlap", "long")
        if emu["scenarios"][s]["cases"])
    if args.screenshot:
        screenshot(args.out / "index.html", args.screenshot)
        print(f"wrote {args.screenshot}")
    print(f"\nemulator >= 0.95 following and 100% binding: {'yes' if ok else 'NO'}; "
          f"first-frame / emulator following: {first['families']['all']['follow'] / emu['families']['all']['follow']:.2f}")


if __name__ == "__main__":
    main()
