"""The report's figures on constructed cases whose answers are known (docs/benchmark.md, "The report"):
the gain over the first frame, x error and extra fighters per chunk, the 95% intervals, and the warnings
the page opens with. The end-to-end run on real recordings is tests/test_benchmark.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wantofight.benchmark import intervals as ci
from wantofight.benchmark import scoring as sc
from wantofight.benchmark.labels import Truth
from wantofight.benchmark.probe_net import Screen
from wantofight.benchmark.report import gains, summarize, teacher_forced_gains, write_report


def case(case_id: str, scenario: str, follow: float, actor_follow: float | None = None, rows: int = 17,
         x_error: float = 0.0, bound: bool = True, extra: list | None = None) -> dict:
    """A scored case in the shape run.py writes: P1 acts (follows `actor_follow`), P2 follows `follow`."""
    family = {"single-action": "single-action", "dual-action": "dual-action"}.get(scenario, "identity")
    p1 = follow if actor_follow is None else actor_follow
    out = {"case_id": case_id, "scenario": scenario, "family": family, "label": "punch", "actor": 1, "rows": rows,
           "p1": {"follow": p1, "state": p1, "direction": p1, "rows": rows - 1},
           "p2": {"follow": follow, "state": follow, "direction": follow, "rows": rows - 1},
           "found": 1.0, "x_error": [[x_error] * (rows - 1)] * 2, "psnr": 30.0, "ssim": 0.9, "lpips": None,
           "psnr_rows": [30.0] * (rows - 1), "extra_fighters": extra or [0.0] * -(-(rows - 1) // 8),
           "chunk_seconds": []}
    if family == "identity":
        out["binding"] = {"own": 2.0, "swapped": 0.0, "bound": bound}
    return out


def variant(model: str, keys: str = "real") -> dict:
    name = model if keys == "real" else f"{model} keys={keys}"
    return {"model": model, "keys": keys, "name": name, "slug": name.replace(" ", "_")}


def three_variants(model_share: float) -> list[tuple[dict, list[dict]]]:
    """Emulator (actor 1.0, idle 1.0), first frame (actor 0.2, idle 1.0), a checkpoint in between."""
    def cases(actor: float, dual: float) -> list[dict]:
        return ([case(f"s{i}", "single-action", 1.0, actor) for i in range(6)]
                + [case(f"d{i}", "dual-action", dual) for i in range(6)])

    ckpt = {**variant("checkpoint"), "name": "s3"}
    return [(variant("emulator"), cases(1.0, 0.9)), (variant("first-frame"), cases(0.2, 0.3)),
            (ckpt, cases(0.2 + model_share * 0.8, 0.3 + model_share * 0.6))]


def test_the_gain_is_one_for_the_emulator_zero_for_the_first_frame_and_linear_between():
    got = gains(three_variants(0.25))["variants"]
    for column in ("single-action", "dual-action", "all", "actor"):
        assert got["emulator"][column]["gain"] == pytest.approx(1.0), column
        assert got["first-frame"][column]["gain"] == pytest.approx(0.0), column
        assert got["s3"][column]["gain"] == pytest.approx(0.25), column
    assert got["s3"]["actor"]["cases"] == 6 and got["s3"]["all"]["cases"] == 12
    assert got["s3"]["identity"]["gain"] is None  # no identity case scored
    assert got["s3"]["actor"]["ci"] == pytest.approx([0.25, 0.25])  # the same gain on every case


def test_the_gain_uses_only_the_cases_all_three_scored_and_no_baseline_is_invented():
    variants = three_variants(0.5)
    emulator, first, (info, cases) = variants
    extra = case("s-extra", "single-action", 1.0, 0.0)  # scored by the model alone: must not count
    got = gains([emulator, first, (info, [*cases, extra])])["variants"]["s3"]["actor"]
    assert got["gain"] == pytest.approx(0.5) and got["cases"] == 6
    missing = gains([emulator, (info, cases)])
    assert "variants" not in missing and "--model first-frame" in missing["missing"]
    flat = gains([(emulator[0], first[1]), first, (info, cases)])["variants"]["s3"]  # emulator == first frame
    assert flat["actor"]["gain"] is None


def test_teacher_forced_rows_are_also_read_against_the_last_frame_their_fair_floor(tmp_path):
    """A chunk generated from the recorded chunks before it competes with holding the recorded row before it:
    the report adds that gain for teacher-forced rows only, beside the gain over the first frame it keeps."""
    def cases(actor: float) -> list[dict]:
        return [case(f"s{i}", "single-action", 1.0, actor) for i in range(6)]

    free = {**variant("checkpoint"), "name": "m", "slug": "m"}
    forced = {**variant("checkpoint"), "name": "m teacher-forced", "slug": "m-tf", "teacher_forced": True}
    variants = [(variant("emulator"), cases(1.0)), (variant("first-frame"), cases(0.2)),
                (variant("last-frame"), cases(0.6)), (free, cases(0.4)), (forced, cases(0.8))]
    got = teacher_forced_gains(variants)
    assert got["floor"] == "last-frame" and set(got["variants"]) == {"emulator", "last-frame", "m teacher-forced"}
    assert got["variants"]["m teacher-forced"]["actor"]["gain"] == pytest.approx(0.5)  # (0.8 - 0.6) / (1 - 0.6)
    assert got["variants"]["last-frame"]["actor"]["gain"] == pytest.approx(0.0)
    assert gains(variants)["variants"]["m teacher-forced"]["actor"]["gain"] == pytest.approx(0.75)  # over the first
    assert teacher_forced_gains(variants[:4]) is None  # no teacher-forced row: no such table
    assert "--model last-frame" in teacher_forced_gains([v for v in variants if v[0]["name"] != "last-frame"])["missing"]

    out = report_folder(tmp_path, variants, True, 20)
    report = write_report(out)
    assert report["gain_over_last_frame"]["variants"]["m teacher-forced"]["actor"]["gain"] == pytest.approx(0.5)
    page = (out / "index.html").read_text()
    assert "Teacher-forced gain over the last frame" in page and page.index("Gain over the first frame") < \
        page.index("Teacher-forced gain over the last frame") < page.index("Action following")


def test_x_error_and_extra_fighters_per_chunk_of_eight_rows():
    one = case("a", "static", 1.0, rows=25, extra=[1.0, 2.0, 3.0])
    one["x_error"] = [[float(t // 8) for t in range(24)], [float(t // 8) + 2 for t in range(24)]]  # chunk k: k and k + 2
    cases = [one, {**one, "case_id": "b"}, {**one, "case_id": "c"}]
    summary = summarize(variant("emulator"), cases)
    assert summary["x_error_chunks"] == [1.0, 2.0, 3.0]
    assert summary["extra_fighters_chunks"] == [1.0, 2.0, 3.0] and summary["extra_fighters"] == pytest.approx(2.0)
    assert summarize(variant("emulator"), cases[:2])["x_error_chunks"] == []  # fewer cases than a curve needs
    assert sc.per_chunk(np.array([1, 3, np.nan, 5, 7, 9, 11, 13, 100, np.nan])) == [7.0, 100.0]


def test_two_checkpoints_whose_folders_share_a_name_keep_rows_of_their_own(tmp_path):
    """runs/a/stage2 and runs/b/stage2 scored into one folder: the report keys rows by name, so each must get its own."""
    def cases(actor: float) -> list[dict]:
        return [case(f"s{i}", "single-action", 1.0, actor) for i in range(6)]

    def run(path: str, slug: str, **more) -> dict:
        return {**variant("checkpoint"), "name": Path(path).name + (" teacher-forced" if more else ""), "slug": slug,
                "checkpoint": path, **more}

    variants = [(variant("emulator"), cases(1.0)), (variant("first-frame"), cases(0.2)), (variant("last-frame"), cases(0.6)),
                (run("/w/runs/a/stage2", "a"), cases(0.6)), (run("/w/runs/b/stage2", "b"), cases(0.4)),
                (run("/w/runs/a/stage2", "a-tf", teacher_forced=True), cases(0.8)),
                (run("/w/other/c/stage1", "c"), cases(0.2)),
                ({**variant("vae"), "name": "vae vae", "slug": "va", "vae": "/w/a/vae"}, cases(0.3)),
                ({**variant("vae"), "name": "vae vae", "slug": "vb", "vae": "/w/b/vae"}, cases(0.3))]
    report = write_report(report_folder(tmp_path, variants, True, 20))
    names = [v["name"] for v in report["variants"]]
    assert {"a/stage2", "b/stage2", "a/stage2 teacher-forced", "stage1"} <= set(names) and "stage2" not in names
    assert {"vae a/vae", "vae b/vae"} <= set(names)  # a VAE folder named "vae": its name, not the prefix, is extended
    first = report["gain_over_first_frame"]["variants"]
    assert first["a/stage2"]["actor"]["gain"] == pytest.approx(0.5) and first["b/stage2"]["actor"]["gain"] == pytest.approx(0.25)
    assert report["gain_over_last_frame"]["variants"]["a/stage2 teacher-forced"]["actor"]["gain"] == pytest.approx(0.5)


def test_x_error_per_single_action_move_is_a_mean_over_its_cases():
    walks = [{**case(f"w{i}", "single-action", 1.0, x_error=e), "label": "walk_forward"} for i, e in enumerate((4.0, 8.0))]
    walks[1]["x_error"] = [[12.0] * 16, [4.0] * 16]  # P1 acts: 12 px off, the one standing still 4
    punch = {**case("p", "single-action", 1.0, x_error=1.0), "label": "light_punch", "actor": 2}
    punch["x_error"] = [[0.0] * 16, [2.0] * 16]
    still = case("s", "static", 1.0, x_error=50.0)  # not a single action: in no row of the table
    summary = summarize(variant("emulator"), [*walks, punch, still])
    assert summary["single_action_x_error"] == {"light_punch": 1.0, "walk_forward": 6.0}
    assert summary["single_action_actor_x_error"] == {"light_punch": 2.0, "walk_forward": 8.0}  # P2's, P1's


def truth_of(x: np.ndarray, y: np.ndarray) -> Truth:
    """A Truth holding x and y only (T, 2), all known."""
    return Truth({"x": x.astype(np.float64), "y": y.astype(np.float64)},
                 {"x": np.ones(x.shape, bool), "y": np.ones(y.shape, bool)})


def test_extra_fighters_counts_only_what_differs_from_the_stage_far_from_both_fighters():
    T, H, W = 9, 64, 64
    frames = np.full((T, H, W, 3), 40, np.uint8)
    x = np.tile([[20.0, 44.0]], (T, 1))
    for t in range(T):  # two "fighters" 4 px wide at their true columns, rows 30-49
        for col in x[t]:
            frames[t, 30:50, int(col) - 2:int(col) + 2] = 220
    mover = frames.copy()
    mover[:, 30:40, 56:60] = 200  # something that moves across the frames is gone from the median
    mover[0, 30:40, 56:60] = 40
    stage = sc.stage_picture(frames)
    assert (stage == frames[0]).all()  # still fighters stay in the stage; nothing else differs
    band = (28, 52)
    assert np.all(sc.extra_fighter_pixels(frames, stage, x, band) == 0)
    grown = frames.copy()
    grown[:, 32:37, 5:10] = 250  # a third fighter, 5 x 5, 15 px from the nearest true fighter
    grown[:, 32:37, 24:26] = 250  # pixels 4-5 px from P1: part of P1, not counted
    grown[:, 5:10, 55:60] = 250  # outside the fighters' band (the HUD's rows): not counted
    grown[:, 40:42, 52:54] = 60  # differs by 20 < DIFF_LEVEL: not counted
    assert np.all(sc.extra_fighter_pixels(grown, stage, x, band) == 25)
    unknown = x.copy()
    unknown[3, 1] = np.nan
    counts = sc.extra_fighter_pixels(grown, stage, unknown, band)
    assert np.isnan(counts[3]) and counts[4] == 25
    moved_stage = sc.stage_picture(mover)
    assert (moved_stage[30:40, 56:60] == 200).all()  # there in 8 of 9 frames: part of the stage


def test_the_fighters_band_runs_from_the_tallest_head_to_the_lowest_feet_in_model_rows():
    y = np.array([[192.0, 192.0], [160.0, 192.0]])
    truth = truth_of(np.zeros((2, 2)), y)
    screen = Screen((240, 224), 8, 8)
    sprites = {"stand": [-7, -25, 16, 26], "air": [-7, -26, 17, 26]}
    assert sc.fighter_band(truth, sprites, screen, (240, 224)) == (160 - 26 - 8, 192 + 1 - 8)
    assert sc.fighter_band(truth, sprites, screen, (120, 112)) == (63, 93)  # half the rows
    assert sc.fighter_band(truth, {}, screen, (120, 112)) == (0, 120)  # no sprite boxes: the whole frame
    assert np.allclose(sc.model_x(truth_of(np.array([[8.0, 128.0]]), y[:1]), screen, 112), [[0.0, 60.0]])


def test_intervals_wilson_bootstrap_and_the_cases_needed_to_exclude_chance():
    lo, hi = ci.wilson(7, 20)
    assert lo == pytest.approx(0.1812, abs=1e-4) and hi == pytest.approx(0.5671, abs=1e-4)  # textbook values
    assert ci.wilson(0, 0) is None and ci.wilson(20, 20)[1] == 1.0
    assert ci.cases_to_exclude_chance() == 4
    assert ci.wilson(3, 3)[0] <= 0.5 < ci.wilson(4, 4)[0]
    assert ci.bootstrap([0.4] * 10) == pytest.approx((0.4, 0.4))
    lo, hi = ci.bootstrap(np.linspace(0, 1, 40))
    assert lo < 0.5 < hi and hi - lo < 0.4
    assert ci.bootstrap([None, float("nan")]) is None
    assert ci.bootstrap(np.linspace(0, 1, 40)) == ci.bootstrap(np.linspace(0, 1, 40))  # seeded


def report_folder(tmp: Path, variants, probe_targets_met: bool, per_scenario: int) -> Path:
    suite, probe, out = tmp / "suite", tmp / "probe", tmp / "report"
    suite.mkdir(parents=True)
    (suite / "suite.json").write_text(json.dumps({"options": {"per_scenario": per_scenario, "long_seconds": 60.0},
                                                  "scenarios": {}}))
    probe.mkdir()
    target = {"p1": 0.97 if probe_targets_met else 0.5, "p2": 0.97, "need": 0.95, "met": probe_targets_met}
    (probe / "report.json").write_text(json.dumps({"held_out": {"targets": {"x_within": target}}}))
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"report_version": 1, "suite": str(suite), "suite_digest": "s",
                                              "probe": str(probe), "probe_digest": "p"}))
    for info, cases in variants:
        vdir = out / "variants" / info["slug"]
        (vdir / "cases").mkdir(parents=True)
        (vdir / "variant.json").write_text(json.dumps(info))
        for c in cases:
            (vdir / "cases" / f"{c['case_id']}.json").write_text(json.dumps(c))
    return out


def test_the_page_opens_with_warnings_and_every_rate_has_its_interval(tmp_path):
    variants = three_variants(0.5)
    statics = [case(f"t{i}", "static", 1.0) for i in range(2)]  # two identity cases: decide nothing
    variants = [(info, cases + statics) for info, cases in variants]
    out = report_folder(tmp_path, variants, probe_targets_met=False, per_scenario=2)
    report = write_report(out)
    first = (out / "index.html").read_text().split("<h2>")[0]  # everything above the first table
    assert "smoke test" in first and "at most 2 cases per scenario" in first
    assert "missed its accuracy targets" in first and "x_within 50.0% (target 95%)" in first
    assert "static: 2 cases" in first
    assert list(report)[0] == "gain_over_first_frame"
    for v in report["variants"]:
        for fam in ("single-action", "dual-action", "identity", "all"):
            assert v["families"][fam]["follow_ci"] is not None, (v["name"], fam)
        assert v["families"]["single-action"]["actor_ci"] is not None
        assert v["scenarios"]["static"]["binding_ci"] is not None
    s3 = report["gain_over_first_frame"]["variants"]["s3"]
    assert s3["actor"]["gain"] == pytest.approx(0.5) and s3["actor"]["ci"] is not None
    statics = {"emulator": 1.0, "first-frame": 0.5, "s3": 0.75}  # four cases each, the emulator above the first frame
    clean = report_folder(tmp_path / "clean", [(i, c + [case(f"u{k}", "static", statics[i["name"]]) for k in range(4)])
                                               for i, c in three_variants(0.5)], True, 20)
    assert not write_report(clean)["warnings"]
    flat = report_folder(tmp_path / "flat", [(i, c + [case(f"u{k}", "static", 1.0) for k in range(4)])
                                             for i, c in three_variants(0.5)], True, 20)
    assert write_report(flat)["warnings"] == ["On identity the emulator does not beat the first frame as the probe "
                                              "reads them: no gain can be measured there."]
    assert "class='warnings'" not in (clean / "index.html").read_text()


def test_probe_training_ends_saying_whether_the_targets_were_met_and_how_many_frames_a_miss_needs():
    from wantofight.benchmark.probe import verdict

    def report(x_within: float) -> dict:
        targets = {"x_within": {"p1": x_within, "p2": 0.99, "need": 0.95, "met": x_within >= 0.95},
                   "state": {"p1": 0.95, "p2": 0.95, "need": 0.90, "met": True}}
        return {"train_frames": 10370, "held_out": {"targets": targets}}

    missed = verdict(report(0.88))
    assert missed.startswith("held-out accuracy MISSED its targets: x_within 88.0% (needs 95%)")
    assert "about 49,000 more" in missed  # error 12% -> 5%: (12 / 5)^2 = 5.76 x the frames
    assert verdict(report(0.97)).startswith("held-out accuracy: every target met")
    assert "not measured" in verdict({"train_frames": 10, "held_out": None})


def test_benchmark_report_prints_the_first_tables_and_every_one_with_all_tables(tmp_path):
    from typer.testing import CliRunner

    from wantofight.cli import app

    walk = {**case("w", "single-action", 1.0, x_error=3.0), "label": "walk_forward"}
    out = report_folder(tmp_path, [(variant("emulator"), [walk]), (variant("first-frame"), [walk])], True, 20)
    short = CliRunner().invoke(app, ["benchmark", "report", str(out)])
    every = CliRunner().invoke(app, ["benchmark", "report", str(out), "--all-tables"])
    assert short.exit_code == 0 and every.exit_code == 0, (short.output, every.output)
    assert "Action following" in short.output and "x error per action" not in short.output
    assert "Single-action x error per action" in every.output and "walk_forward" in every.output
