"""The benchmark report: every scored case of every variant in REPORT_DIR, summed up as the paper's
tables, written as `report.json` and `index.html` (with plots and the side-by-side videos).

    report = write_report(Path("report/"))        # after `wtf benchmark run`; safe to call again

Averages are over cases (each case weighs the same), and within a case over both players; a
player's share of rows is counted only over its scored rows (benchmark/scoring.py). The ratio
columns divide by the `emulator` variant of the same folder (with the recorded keys), the probe's own
ceiling.

The report leads with the gain over the first frame, (model - first frame) / (emulator - first frame)
per family and for the single-action actor: 0 is doing nothing, 1 is the game; teacher-forced rows are
also read against holding the recorded row before each chunk (`gain_over_last_frame`). Every rate carries its
95% interval over cases (benchmark/intervals.py), and the page opens with what makes its figures
weak: a probe that missed its accuracy targets, scenarios with too few cases, a miniature suite.
"""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

import numpy as np

from wantofight.benchmark import intervals as ci
from wantofight.benchmark.scenarios import FAMILIES, IDENTITY, SCENARIOS, MineOptions
from wantofight.benchmark.scoring import CHUNK_ROWS, per_chunk
from wantofight.outputs import is_temporary, write_atomic, written

CURVE_MIN_CASES = 3
"""A point of a curve over time is drawn only where at least this many cases reach that row."""
GAIN_MIN_SPAN = 0.01
"""No gain where the emulator beats the first frame by less than this: nothing to measure it against."""
GAIN_COLUMNS = ("single-action", "dual-action", "identity", "all", "actor")
GAIN_TITLES = {
    "gain_over_first_frame": "Gain over the first frame: (model − first frame) / (emulator − first frame), 0 = doing "
                             "nothing, 1 = the game [95% interval] (cases)",
    "gain_over_last_frame": "Teacher-forced gain over the last frame: (model − last frame) / (emulator − last frame), "
                            "0 = holding the recorded row before each chunk, 1 = the game [95% interval] (cases)"}
"""The title of each gain table, by its report.json key (the page, the terminal, bench/learns.py's learns.md)."""
TABLE_CHUNKS = 6
"""Chunks shown in the page's per-chunk tables (report.json holds the whole curves)."""


def mean(values) -> float | None:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(sum(values) / len(values)) if values else None


def case_follow(case: dict, key: str = "follow") -> float | None:
    return mean([case[p][key] for p in ("p1", "p2")])


def actor_and_idle(case: dict) -> tuple[float | None, float | None]:
    """A single-action case's following of the player who acts and of the one who stands still."""
    actor = f"p{case['actor']}"
    return case[actor]["follow"], case["p2" if actor == "p1" else "p1"]["follow"]


def read_variants(out: Path) -> list[tuple[dict, list[dict]]]:
    found = []
    for vdir in sorted((out / "variants").glob("*")):
        info_path = vdir / "variant.json"
        if not info_path.is_file():
            continue
        cases = [json.loads(p.read_text()) for p in sorted((vdir / "cases").glob("*.json")) if not is_temporary(p)]
        found.append((json.loads(info_path.read_text()), cases))
    distinct_names([info for info, _ in found])
    order, keys = {"emulator": 0, "first-frame": 1, "last-frame": 2, "vae": 3}, ("real", "zero", "swap-players")

    def place(info: dict) -> tuple:  # baselines first; a model's key modes together, in the order above
        mode = info.get("keys", "real")
        return (order.get(info["model"], 4), info["name"].removesuffix(f" keys={mode}"),
                keys.index(mode) if mode in keys else len(keys))

    return sorted(found, key=lambda v: place(v[0]))


def distinct_names(infos: list[dict]) -> None:
    """Give variants of two checkpoints (or VAEs) whose folders share a name (`runs/a/stage2`, `runs/b/stage2`)
    names that tell them apart (`a/stage2`, `b/stage2`), in place: the report keys its rows by name."""
    def source(info: dict) -> str | None:
        return info.get("checkpoint") if info["model"] == "checkpoint" else info.get("vae") if info["model"] == "vae" \
            else None

    by_label: dict[str, set[str]] = {}
    for info in infos:
        if source(info):
            by_label.setdefault(Path(source(info)).name, set()).add(source(info))
    for info in infos:
        src = source(info)
        if not src or len(by_label[Path(src).name]) < 2:
            continue
        others = [Path(o).parts for o in by_label[Path(src).name] if o != src]
        parts = Path(src).parts
        depth = next((k for k in range(2, len(parts) + 1) if all(o[-k:] != parts[-k:] for o in others)), len(parts))
        prefix = "vae " if info["model"] == "vae" else ""  # where Variant.name puts the folder's name
        info["name"] = prefix + "/".join(parts[-depth:]) + info["name"][len(prefix) + len(parts[-1]):]


def curve(rows_per_case: list[list]) -> list[float | None]:
    length = max((len(r) for r in rows_per_case), default=0)
    out = []
    for t in range(length):
        values = [r[t] for r in rows_per_case if t < len(r) and r[t] is not None]
        out.append(float(np.mean(values)) if len(values) >= CURVE_MIN_CASES else None)
    while out and out[-1] is None:
        out.pop()
    return out


def summarize(info: dict, cases: list[dict]) -> dict:
    by_scenario = {s: [c for c in cases if c["scenario"] == s] for s in SCENARIOS}
    families = {}
    for family, scenarios in FAMILIES.items():
        group = [c for s in scenarios for c in by_scenario[s]]
        families[family] = {"cases": len(group), "follow": mean(case_follow(c) for c in group),
                            "follow_ci": ci.bootstrap(case_follow(c) for c in group),
                            "state": mean(case_follow(c, "state") for c in group),
                            "direction": mean(case_follow(c, "direction") for c in group),
                            "p1": mean(c["p1"]["follow"] for c in group), "p2": mean(c["p2"]["follow"] for c in group)}
    single = [actor_and_idle(c) for c in by_scenario["single-action"] if c.get("actor")]
    families["single-action"]["actor"] = mean(a for a, _ in single)  # the move itself: what the keys ask for
    families["single-action"]["actor_ci"] = ci.bootstrap(a for a, _ in single)
    families["single-action"]["idle"] = mean(i for _, i in single)  # the other fighter, standing still
    families["single-action"]["idle_ci"] = ci.bootstrap(i for _, i in single)
    families["all"] = {"cases": len(cases), "follow": mean(case_follow(c) for c in cases),
                       "follow_ci": ci.bootstrap(case_follow(c) for c in cases)}
    scenarios = {}
    for s, group in by_scenario.items():
        row = {"cases": len(group), "follow": mean(case_follow(c) for c in group),
               "psnr": mean(c["psnr"] for c in group), "ssim": mean(c["ssim"] for c in group),
               "lpips": mean(c["lpips"] for c in group),
               "x_error": mean(v for c in group for p in c["x_error"] for v in p),
               "found": mean(c.get("found") for c in group), "found_ci": ci.bootstrap(c.get("found") for c in group)}
        if s in IDENTITY:
            bound = [c["binding"]["bound"] for c in group]
            row["binding"] = 100.0 * sum(bound) / len(bound) if bound else None
            interval = ci.wilson(sum(bound), len(bound))
            row["binding_ci"] = [100.0 * v for v in interval] if interval else None
        scenarios[s] = row
    moves, move_x, actor_x = {}, {}, {}
    for c in by_scenario["single-action"]:
        moves.setdefault(c["label"], []).append(case_follow(c))
        move_x.setdefault(c["label"], []).append(mean(v for p in c["x_error"] for v in p))
        if c.get("actor"):  # the fighter whose keys act: where the keys' own motion is placed
            actor_x.setdefault(c["label"], []).append(mean(c["x_error"][c["actor"] - 1]))
    seconds = [s for c in cases for s in c.get("chunk_seconds", [])]
    generated = sum(c["rows"] - 1 for c in cases if c.get("chunk_seconds"))
    return {
        "name": info["name"], "variant": info, "cases": len(cases), "families": families, "scenarios": scenarios,
        "single_action_moves": {m: mean(v) for m, v in sorted(moves.items())},
        "single_action_x_error": {m: mean(v) for m, v in sorted(move_x.items())},
        "single_action_actor_x_error": {m: mean(v) for m, v in sorted(actor_x.items())},
        "x_error_curve": curve([[mean(p[t] for p in c["x_error"]) for t in range(len(c["x_error"][0]))]
                                for c in cases]),
        "psnr_curve": curve([c["psnr_rows"] for c in cases]),
        "x_error_chunks": curve([x_error_chunks(c) for c in cases]),
        "extra_fighters_chunks": curve([c.get("extra_fighters", []) for c in cases]),
        "extra_fighters": mean(mean(c["extra_fighters"]) for c in cases if c.get("extra_fighters")),
        "extra_fighters_ci": ci.bootstrap(mean(c["extra_fighters"]) for c in cases if c.get("extra_fighters")),
        "speed": {"chunks": len(seconds), "ms_per_chunk": 1000 * statistics.mean(seconds) if seconds else None,
                  "ms_per_chunk_median": 1000 * statistics.median(seconds) if seconds else None,
                  "frames_per_s": generated / sum(seconds) if seconds else None},
        "videos": [{"case_id": c["case_id"], "scenario": c["scenario"], "label": c["label"], "path": c["video"]}
                   for c in cases if c.get("video")],
    }


def x_error_chunks(case: dict) -> list[float | None]:
    """A case's x error (both players) per chunk of CHUNK_ROWS generated rows."""
    rows = [mean(p[t] for p in case["x_error"]) for t in range(len(case["x_error"][0]))]
    return per_chunk(np.array([np.nan if v is None else v for v in rows], dtype=np.float64))


def gain(model: float, emulator: float, first: float) -> float | None:
    """(model - first frame) / (emulator - first frame): 0 = doing nothing, 1 = the game."""
    span = emulator - first
    return (model - first) / span if span >= GAIN_MIN_SPAN else None


def gain_values(column: str, case: dict) -> float | None:
    """A case's share in a gain column: its following, or for `actor` the acting fighter's."""
    if column == "actor":
        return actor_and_idle(case)[0] if case["scenario"] == "single-action" and case.get("actor") else None
    if column != "all" and case["scenario"] not in FAMILIES[column]:
        return None
    return case_follow(case)


def gains(variants: list[tuple[dict, list[dict]]], floor: str = "first-frame") -> dict:
    """Each variant's gain over `floor` (the first frame, or for teacher-forced rows the last frame) per
    column, over the cases it, the emulator and the floor scored, with a paired bootstrap interval;
    {"missing": why} when the emulator or the floor is not in the folder."""
    def baseline(model: str):
        return next((cases for info, cases in variants if info["model"] == model
                     and info.get("keys", "real") == "real"), None)

    emulator, bottom = baseline("emulator"), baseline(floor)
    missing = [m for m, cases in (("emulator", emulator), (floor, bottom)) if cases is None]
    if missing:
        return {"missing": f"no gain over the {floor.replace('-', ' ')}: this folder has no {' and no '.join(missing)} "
                           f"variant (score it into the same --out with {' '.join(f'--model {m}' for m in missing)})"}
    out = {}
    for info, cases in variants:
        row = {}
        for column in GAIN_COLUMNS:
            by_id = [{c["case_id"]: gain_values(column, c) for c in group} for group in (cases, emulator, bottom)]
            common = [i for i in by_id[0] if all(d.get(i) is not None for d in by_id)]
            values = [np.array([d[i] for i in common]) for d in by_id]
            row[column] = {"gain": gain(*(v.mean() for v in values)) if common else None, "cases": len(common),
                           "ci": ci.paired_bootstrap(gain, *values) if common else None}
        out[info["name"]] = row
    return {"floor": floor, "variants": out}


def teacher_forced_gains(variants: list[tuple[dict, list[dict]]]) -> dict | None:
    """The teacher-forced rows' gain over the last frame, their fair floor: a chunk generated from the
    recorded chunks before it is compared with holding the recorded row just before it (None when no
    row is teacher-forced)."""
    if not any(info.get("teacher_forced") for info, _ in variants):
        return None
    return gains([(info, cases) for info, cases in variants if read_against_last_frame(info)], floor="last-frame")


def read_against_last_frame(info: dict) -> bool:
    """A row of the teacher-forced table: a teacher-forced variant, or one of its two baselines."""
    return bool(info.get("teacher_forced")) or (info["model"] in ("emulator", "last-frame")
                                                and info.get("keys", "real") == "real")


def warnings(report: dict) -> list[str]:
    """What makes the figures weak, for the page's first lines: a probe that missed its accuracy targets
    on held-out frames, and scenarios with too few cases for an interval to exclude chance."""
    out = []
    probe_report = Path(report["probe"]) / "report.json"
    held = json.loads(probe_report.read_text()).get("held_out") if probe_report.is_file() else None
    if held is None:
        out.append(f"The probe's held-out accuracy is unknown (no held-out score in {probe_report}): every "
                   "figure here rests on readings of unknown accuracy.")
    else:
        missed = [f"{name} {100 * min(v for p, v in t.items() if p in ('p1', 'p2') and v is not None):.1f}% "
                  f"(target {100 * t['need']:.0f}%)" for name, t in held["targets"].items()
                  if not t["met"] and any(t.get(p) is not None for p in ("p1", "p2"))]
        missed += [f"{name} unmeasured" for name, t in held["targets"].items()
                   if all(t.get(p) is None for p in ("p1", "p2"))]
        if missed:
            out.append(f"The probe missed its accuracy targets on held-out frames ({', '.join(missed)}): it "
                       "misreads real frames, so every figure here is partly the probe's error. Train it on more "
                       "frames or for more steps (docs/benchmark.md).")
    need = ci.cases_to_exclude_chance()
    for s in SCENARIOS:
        counts = [v["scenarios"][s]["cases"] for v in report["variants"] if v["scenarios"][s]["cases"]]
        if counts and min(counts) < need:
            out.append(f"{s}: {min(counts)} case{'s' if min(counts) > 1 else ''}; with fewer than {need} even a "
                       f"perfect score's 95% interval reaches chance ({100 * ci.CHANCE:.0f}% binding): its figures "
                       "decide nothing.")
    ceiling = report["gain_over_first_frame"].get("variants", {}).get("emulator", {})
    flat = [c for c, g in ceiling.items() if g["cases"] and g["gain"] is None]
    if flat:
        out.append(f"On {', '.join(flat)} the emulator does not beat the first frame as the probe reads them: no gain "
                   "can be measured there.")
    for section, doing in (("gain_over_first_frame", "doing nothing"),
                           ("gain_over_last_frame", "holding the recorded row before each chunk")):
        floor = (report.get(section) or {}).get("floor", "").replace("-", " ")
        for name, row in (report.get(section) or {}).get("variants", {}).items():
            variant = next(v["variant"] for v in report["variants"] if v["name"] == name)
            if variant["model"] != "checkpoint":
                continue
            unsure = [c for c, g in row.items() if g["ci"] is not None and g["ci"][0] <= 0 <= g["ci"][1]]
            if unsure:
                out.append(f"{name}: the gain over the {floor} on {', '.join(unsure)} is not told apart from 0 "
                           f"(its 95% interval holds 0): on these cases it does no better than {doing}, or the "
                           "cases are too few to tell.")
    return out


def smoke_test(suite_meta: dict) -> str | None:
    """A line naming the suite a miniature when it keeps fewer cases or shorter sessions than the
    benchmark's defaults (the README's miniature does both)."""
    options, full = suite_meta.get("options", {}), MineOptions()
    short = []
    if options.get("per_scenario", full.per_scenario) < full.per_scenario:
        short.append(f"at most {options['per_scenario']} cases per scenario (the benchmark's: {full.per_scenario})")
    if options.get("long_seconds", full.long_seconds) < full.long_seconds:
        short.append(f"long sessions of {options['long_seconds']:g} s ({full.long_seconds:g} s)")
    return (f"A smoke test, not a measurement: this suite is a miniature, {' and '.join(short)}."
            if short else None)


def ratios(summaries: list[dict]) -> dict:
    """Each variant's action following as a share of the emulator's (the ceiling), per family."""
    ceiling = next((s for s in summaries if s["variant"]["model"] == "emulator"
                    and s["variant"].get("keys", "real") == "real"), None)
    if ceiling is None:
        return {}
    out = {}
    for s in summaries:
        out[s["name"]] = {f: (s["families"][f]["follow"] / ceiling["families"][f]["follow"])
                          if s["families"][f]["follow"] is not None and ceiling["families"][f]["follow"] else None
                          for f in s["families"]}
    return out


def write_report(out: Path, lpips_backend: str | None = None) -> dict:
    """Summarize REPORT_DIR into report.json, plots/ and index.html; returns the report."""
    run = json.loads((out / "run.json").read_text())
    variants = read_variants(out)
    summaries = [summarize(info, cases) for info, cases in variants]
    report = {"gain_over_first_frame": gains(variants), "gain_over_last_frame": teacher_forced_gains(variants),
              **run, "lpips": lpips_backend or run.get("lpips"), "variants": summaries,
              "follow_vs_emulator": ratios(summaries)}
    if lpips_backend:
        run["lpips"] = lpips_backend
        write_atomic(out / "run.json", json.dumps(run, indent=1) + "\n")
    suite_meta = json.loads((Path(run["suite"]) / "suite.json").read_text()) if Path(run["suite"], "suite.json").is_file() \
        else {}
    report["suite_scenarios"] = suite_meta.get("scenarios")
    report["smoke_test"] = smoke_test(suite_meta)
    report["warnings"] = warnings(report)
    plots = write_plots(out, summaries)
    write_atomic(out / "report.json", json.dumps(report, indent=1) + "\n")
    write_atomic(out / "index.html", render_html(report, plots))
    return report


# ---------------------------------------------------------------------------------------------
# Tables (shared by the HTML page and the terminal)
# ---------------------------------------------------------------------------------------------

def fmt(value, kind: str = "share") -> str:
    if value is None:
        return "n/a"
    if kind == "share":
        return f"{value:.3f}"
    if kind == "pct":
        return f"{value:.0f}%"
    if kind == "db":
        return f"{value:.2f}"
    if kind == "gain":
        return f"{value:.2f}"
    return f"{value:.1f}"


def fmt_ci(value, interval, kind: str = "share", cases: int | None = None) -> str:
    """`0.698 [0.621, 0.770] (20)`: a rate, its 95% interval over cases and how many cases."""
    text = fmt(value, kind)
    if value is not None and interval is not None:
        text += f" [{fmt(interval[0], kind)}, {fmt(interval[1], kind)}]"
    return text if cases is None else f"{text} ({cases})"


def tables(report: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table of the report."""
    summaries, rat = report["variants"], report.get("follow_vs_emulator", {})
    fams = ("single-action", "dual-action", "identity", "all")

    def gain_table(section: str, shown=lambda s: True) -> list[list[str]]:
        rows = (report.get(section) or {}).get("variants", {})
        return [[s["name"]] + [fmt_ci(g["gain"], g["ci"], "gain", g["cases"]) if g else "n/a"
                               for g in (rows.get(s["name"], {}).get(c) for c in GAIN_COLUMNS)]
                for s in summaries if shown(s)]

    gain = gain_table("gain_over_first_frame")
    follow = [[s["name"]] + [fmt_ci(s["families"][f]["follow"], s["families"][f].get("follow_ci"), "share",
                                    s["families"][f]["cases"]) for f in fams]
              + [fmt(rat.get(s["name"], {}).get(f)) for f in ("single-action", "dual-action")]
              + [" / ".join(fmt_ci(s["families"]["single-action"].get(k), s["families"]["single-action"].get(f"{k}_ci"))
                            for k in ("actor", "idle"))]
              for s in summaries]
    binding = [[s["name"]] + [fmt_ci(s["scenarios"][sc]["binding"], s["scenarios"][sc].get("binding_ci"), "pct",
                                     s["scenarios"][sc]["cases"]) for sc in IDENTITY] for s in summaries]
    fidelity = [[s["name"]] + [fmt(s["scenarios"][sc][k], kind) for sc in SCENARIOS
                               for k, kind in (("psnr", "db"), ("ssim", "share"))] for s in summaries]
    overall = [[s["name"], fmt(mean(s["scenarios"][sc]["psnr"] for sc in SCENARIOS), "db"),
                fmt(mean(s["scenarios"][sc]["ssim"] for sc in SCENARIOS)),
                fmt(mean(s["scenarios"][sc]["lpips"] for sc in SCENARIOS)),
                fmt(mean(s["scenarios"][sc]["x_error"] for sc in SCENARIOS), "px"),
                fmt_ci(s["scenarios"]["long"]["found"], s["scenarios"]["long"].get("found_ci")),
                fmt_ci(s.get("extra_fighters"), s.get("extra_fighters_ci"), "px"),
                fmt(s["speed"]["ms_per_chunk"], "px"), fmt(s["speed"]["frames_per_s"], "px")] for s in summaries]
    chunks = [[s["name"]] + [f"{fmt(x, 'px')} / {fmt(e, 'px')}" for x, e in
                             zip(padded(s["x_error_chunks"]), padded(s["extra_fighters_chunks"]))]
              for s in summaries]
    moves = sorted({m for s in summaries for m in s["single_action_moves"]})
    per_move = [[m] + [fmt(s["single_action_moves"].get(m)) for s in summaries] for m in moves]
    move_x = [[m] + [f'{fmt(s.get("single_action_x_error", {}).get(m), "px")} / '
                     f'{fmt(s.get("single_action_actor_x_error", {}).get(m), "px")}' for s in summaries] for m in moves]
    forced = [(GAIN_TITLES["gain_over_last_frame"], ["model", *GAIN_COLUMNS[:-1], "single: actor"],
               gain_table("gain_over_last_frame", lambda s: read_against_last_frame(s["variant"])))] \
        if report.get("gain_over_last_frame") else []
    return [
        (GAIN_TITLES["gain_over_first_frame"], ["model", *GAIN_COLUMNS[:-1], "single: actor"], gain),
        *forced,
        ("Action following (state class and direction within ±2 rows) [95% interval] (cases)",
         ["model", *fams, "single × emulator", "dual × emulator", "single: actor / idle"], follow),
        ("Identity binding (% of cases bound correctly) [95% interval] (cases)", ["model", *IDENTITY], binding),
        ("Fidelity and speed (mean over scenarios)",
         ["model", "PSNR dB", "SSIM", "LPIPS", "x error px", "long: both found", "extra fighter px", "ms/chunk",
          "frames/s"], overall),
        (f"Per chunk of {CHUNK_ROWS} generated rows: x error px / extra fighter pixels per frame (mean over cases; "
         "report.json has every chunk)", ["model"] + [f"chunk {k + 1}" for k in range(TABLE_CHUNKS)], chunks),
        ("PSNR dB / SSIM per scenario", ["model"] + [f"{sc} {k}" for sc in SCENARIOS for k in ("PSNR", "SSIM")],
         fidelity),
        ("Single-action following per action", ["action"] + [s["name"] for s in summaries], per_move),
        ("Single-action x error per action (px, both fighters / the actor alone; mean over cases)",
         ["action"] + [s["name"] for s in summaries], move_x),
    ]


def padded(values: list) -> list:
    return (list(values) + [None] * TABLE_CHUNKS)[:TABLE_CHUNKS]


TERMINAL_TABLES = 3
"""Tables the terminal prints after a run (the gains and action following); the page has every one."""


def text_tables(report: dict, every: bool = False) -> str:
    """The report's warnings and its first TERMINAL_TABLES tables (`every`: all of the page's) as text."""
    out = [f"! {n}" for n in ([report["smoke_test"]] if report.get("smoke_test") else []) + report.get("warnings", [])]
    out += [""] if out else []
    for title, header, rows in tables(report)[:None if every else TERMINAL_TABLES]:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        out.append(title)
        for row in [header, *rows]:
            out.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Plots and the page
# ---------------------------------------------------------------------------------------------

def write_plots(out: Path, summaries: list[dict]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    (out / "plots").mkdir(exist_ok=True)
    names = []
    fig, ax = plt.subplots(figsize=(8, 3.2))
    width = 0.8 / max(1, len(summaries))
    for i, s in enumerate(summaries):
        vals = [s["scenarios"][sc]["binding"] or 0 for sc in IDENTITY]
        ax.bar(np.arange(len(IDENTITY)) + i * width, vals, width, label=s["name"])
    ax.set_xticks(np.arange(len(IDENTITY)) + width * (len(summaries) - 1) / 2, IDENTITY)
    ax.set_ylabel("bound correctly (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Identity binding per scenario")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=min(4, len(summaries)))
    names.append(save(fig, out / "plots" / "binding.png"))
    for key, label, fname in (("x_error_curve", "x error (px, both players)", "x_error.png"),
                              ("psnr_curve", "PSNR (dB)", "psnr.png")):
        fig, ax = plt.subplots(figsize=(8, 3.2))
        for s in summaries:
            ys = [np.nan if v is None else v for v in s[key]]
            if any(np.isfinite(ys)):
                ax.plot(np.arange(1, len(ys) + 1), ys, label=s["name"])
        ax.set_xlabel("generated row")
        ax.set_ylabel(label)
        ax.set_title(f"{label} over time (mean over cases)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        names.append(save(fig, out / "plots" / fname))
    return names


def save(fig, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with written(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return f"plots/{path.name}"


PAGE_STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:1200px}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}th{background:#f0f0f0}
td:first-child,th:first-child{text-align:left}video{image-rendering:pixelated;max-width:100%}
.warnings{background:#fff3cd;border:1px solid #e0b000;padding:2px 10px;margin:0 0 1em}
.videos{display:flex;flex-wrap:wrap;gap:12px}.videos figure{margin:0}figcaption{font-size:12px}"""


def render_html(report: dict, plots: list[str]) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>wtf benchmark</title>"
             f"<style>{PAGE_STYLE}</style></head><body><h1>wtf benchmark</h1>",
             f"<p>suite <code>{e(report['suite'])}</code> ({e(report['suite_digest'])}), probe "
             f"<code>{e(report['probe'])}</code> ({e(report['probe_digest'])}); LPIPS: {e(str(report.get('lpips')))}. "
             "Scoring rules: docs/benchmark.md.</p>"]
    notes = ([report["smoke_test"]] if report.get("smoke_test") else []) + report.get("warnings", [])
    notes += [report[k]["missing"] for k in GAIN_TITLES if (report.get(k) or {}).get("missing")]
    if notes:  # first, above every table: what the figures below do not mean
        parts.insert(1, "<div class='warnings'>" + "".join(f"<p>⚠ {e(n)}</p>" for n in notes) + "</div>")
    for title, header, rows in tables(report):
        parts.append(f"<h2>{e(title)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in row) + "</tr>" for row in rows]
        parts.append("</table>")
    if plots:
        parts.append("<h2>Plots</h2>" + "".join(f"<p><img src='{e(p)}' alt='{e(p)}'></p>" for p in plots))
    for s in report["variants"]:
        if s["videos"]:
            parts.append(f"<h2>Videos: {e(s['name'])} (emulator | generated)</h2><div class='videos'>")
            parts += [f"<figure><video controls muted loop preload='metadata' src='{e(v['path'])}'></video>"
                      f"<figcaption>{e(v['scenario'])}: {e(str(v['label']))} ({e(v['case_id'])})</figcaption></figure>"
                      for v in s["videos"]]
            parts.append("</div>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
