"""The benchmark: screen-time truth, the scoring rules, the probe, mining scenarios from RAM, and
`wtf benchmark run` end to end on a tiny checkpoint (docs/benchmark.md).

Recordings come from the project's collector: scripted matches, a drill and one of the shipped
walk-under key files (which gives chase/cross swaps). The probe here trains for a few dozen steps:
these tests check wiring and rules; the probe's real accuracy is measured by bench/probe.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from model_helpers import one_torch_thread  # noqa: F401
from test_browser import page  # noqa: F401
from train_helpers import tiny_stage2_checkpoint
from wantofight.annotate.rules import rules_for
from wantofight.benchmark import scoring as sc
from wantofight.benchmark.labels import STATE_CLASSES, LabelError, fields_for, screen_truth
from wantofight.benchmark.probe import ProbeConfig, ProbeError, eval_probe, load_probe, train_probe
from wantofight.benchmark.run import (BenchmarkError, Variant, cases_to_score, parse_scenarios, plan_variants,
                                      run_benchmark)
from wantofight.benchmark.scenarios import IDENTITY, MineOptions
from wantofight.benchmark.suite import Suite, build_suite
from wantofight.outputs import OutputExists
from wantofight.cli import app

KEYS = Path(__file__).resolve().parent.parent / "collect" / "games" / "duel" / "keys"
RULES = rules_for("duel")
FIELDS = fields_for(RULES, 96)


def columns(**series) -> dict[str, np.ndarray]:
    T = len(next(iter(series.values())))
    cols = {f"p{p}_{n}": np.zeros(T, np.int64) for p in (1, 2) for n in ("x", "y", "facing", "state", "move", "health")}
    for p in (1, 2):
        cols[f"p{p}_y"][:] = 192
    cols.update({k: np.asarray(v) for k, v in series.items()})
    return cols


# ---------------------------------------------------------------------------------------------
# Screen-time truth and scoring rules
# ---------------------------------------------------------------------------------------------

def test_truth_at_60_fps_is_the_previous_row_exactly():
    x = np.array([100, 102, 104, 106, 108])
    truth = screen_truth(columns(p1_x=x), RULES, FIELDS, frame_skip=1, lag=1)
    assert not truth.valid["x"][0, 0]
    assert np.array_equal(truth.values["x"][1:, 0], x[:-1])


def test_truth_at_30_fps_interpolates_positions_and_masks_changing_classes():
    walk, idle = RULES.state_id("walk_forward"), RULES.state_id("idle")
    cols = columns(p1_x=[100, 104, 108, 200], p1_state=[idle, walk, walk, walk], p1_facing=[0, 0, 1, 1])
    truth = screen_truth(cols, RULES, FIELDS, frame_skip=2, lag=1)
    assert truth.values["x"][1, 0] == 102 and truth.values["x"][2, 0] == 106  # one emulator step back
    assert not truth.valid["x"][3, 0]  # 108 -> 200 is a reset, not motion
    assert list(truth.valid["state"][:, 0]) == [False, False, True, True]  # idle | walk straddles row 1
    assert list(truth.valid["facing"][:, 0]) == [False, True, False, True]
    assert truth.values["state"][2, 0] == STATE_CLASSES.index("walk")


def read_of(x, state) -> dict[str, np.ndarray]:
    """P1's readings (P2's column repeats them; only P1 is scored)."""
    return {"x": np.repeat(np.asarray(x, float)[:, None], 2, 1), "state": np.repeat(np.asarray(state, float)[:, None], 2, 1)}


def test_action_following_accepts_two_rows_of_lag_and_a_dead_band_not_more():
    walk, idle = RULES.state_id("walk_forward"), RULES.state_id("idle")
    x = np.r_[[100] * 6, 100 + 4 * np.arange(1, 13)]  # stands, then walks right at 30 fps
    state = np.r_[[idle] * 6, [walk] * 12]
    truth = screen_truth(columns(p1_x=x, p1_state=state, p2_x=np.full(18, 160)), RULES, FIELDS, 2, 0)
    sig = sc.true_signals(truth, 0, 2, len(STATE_CLASSES))
    own = sc.truth_as_read(truth)
    assert sc.follow_share(own, 0, sig, 2) == 1.0
    cls = np.where(state == walk, STATE_CLASSES.index("walk"), STATE_CLASSES.index("idle"))
    late = read_of(np.r_[x[:1], x[:1], x[:-2]], np.r_[cls[:2], cls[:-2]])  # two rows behind: accepted
    assert sc.follow_share(late, 0, sig, 2) == 1.0
    later = read_of(np.r_[[x[0]] * 4, x[:-4]], np.r_[cls[:4], cls[:-4]])  # four rows behind: not
    assert sc.follow_share(later, 0, sig, 2) < 0.9
    still = read_of(np.full(18, 100), np.full(18, STATE_CLASSES.index("idle")))
    assert sc.follow_share(still, 0, sig, 2) < 0.5


def test_binding_is_true_for_the_right_fighters_false_when_swapped_and_on_a_tie():
    walk, idle = RULES.state_id("walk_forward"), RULES.state_id("idle")
    x1 = 100 + 4 * np.arange(16)
    cols = columns(p1_x=x1, p1_state=np.full(16, walk), p2_x=np.full(16, 180), p2_state=np.full(16, idle))
    truth = screen_truth(cols, RULES, FIELDS, 2, 0)
    sig = [sc.true_signals(truth, p, 2, len(STATE_CLASSES)) for p in (0, 1)]
    own = sc.truth_as_read(truth)
    swapped = {k: v[:, ::-1] for k, v in own.items()}
    assert sc.binding(own, sig, 2)["bound"] and not sc.binding(swapped, sig, 2)["bound"]
    alike = {k: np.repeat(v[:, :1], 2, axis=1) for k, v in own.items()}  # both fighters do P1's thing
    result = sc.binding(alike, sig, 2)
    assert result["own"] == result["swapped"] and not result["bound"]
    assert sc.informative(truth, 2, len(STATE_CLASSES)) >= sc.INFORMATIVE_MARGIN


def test_a_fighter_is_found_only_where_the_probe_is_sure_of_its_place():
    from wantofight.benchmark.probe_net import read_fields

    sure = torch.full((1, 2, 128), -20.0)
    sure[..., 50] = 20.0
    flat = torch.zeros(1, 2, 128)
    logits = {f.name: torch.zeros(1, 2, f.classes) for f in FIELDS}
    assert read_fields({**logits, "x": sure, "y": sure[..., :120]}, FIELDS)["found"].tolist() == [[1.0, 1.0]]
    assert read_fields({**logits, "x": flat, "y": sure[..., :120]}, FIELDS)["found"].tolist() == [[0.0, 0.0]]


# ---------------------------------------------------------------------------------------------
# Recordings, probe, suite
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(recorded):
    return [recorded(policy="scripted", episodes=2, max_frames=900, seed=5),
            recorded(policy="drill", episodes=1, max_frames=900, seed=6),
            recorded(policy=f"keys:{KEYS / 'walk-under-a.keys'}", episodes=1, seed=7)]


@pytest.fixture(scope="module")
def probe_dir(runs, tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("probe") / "probe"
    train_probe(runs, out, ProbeConfig(size=(64, 64), steps=30, batch_size=32, max_frames=1500, val_fraction=0.25))
    return out


@pytest.fixture(scope="module")
def suite_dir(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "suite"
    build_suite(runs, out, MineOptions(per_scenario=3, long_seconds=8))
    return out


def test_probe_report_holds_every_field_for_both_players(probe_dir, runs):
    report = json.loads((probe_dir / "report.json").read_text())
    held = report["held_out"]
    for p in ("p1", "p2"):
        for key in ("x_within", "x_mae", "y_within", "facing", "state", "move", "health_within"):
            assert held["metrics"][p][key] is not None, key
    assert set(held["targets"]) == {"x_within", "state", "facing"}
    assert report["parameters"] < 10_000_000
    probe = load_probe(probe_dir)
    assert probe.size == (64, 64) and probe.game == "duel"
    again = eval_probe(probe_dir, runs[:1])
    assert again["frames"] > 0 and set(again["metrics"]) == {"p1", "p2"}
    with pytest.raises(ProbeError, match="reads 64x64 frames, got 224x240"):
        probe.read(np.zeros((2, 224, 240, 3), np.uint8))


def test_probe_frames_are_the_pixels_the_data_path_picks():
    from wantofight.benchmark.probe import to_probe_pixels
    from wantofight.datasets.frames import resize_to_model

    frames = np.random.default_rng(0).integers(0, 256, (3, 224, 240, 3), dtype=np.uint8)
    for size in ((128, 128), (64, 64), (96, 128), (384, 512)):
        model = ((resize_to_model(frames, size) + 1) * 127.5).round().to(torch.uint8)  # (N, 3, H, W)
        assert torch.equal(to_probe_pixels(frames, size), model)


def test_probe_trains_at_native_size(runs, tmp_path):
    report = train_probe(runs[:1], tmp_path / "p", ProbeConfig(steps=2, batch_size=8, max_frames=64))
    assert report["size"] == [224, 240] and load_probe(tmp_path / "p").size == (224, 240)


def test_suite_mines_every_scenario_the_recordings_hold(suite_dir):
    suite = Suite(suite_dir)
    counts = {name: row["cases"] for name, row in suite.meta["scenarios"].items()}
    for name in ("single-action", "dual-action", "static", "chase_cross", "overlap", "long"):
        assert counts[name] > 0, (name, counts)
    cases = list(suite.cases())
    assert len(cases) == len(suite)
    case = next(c for c in cases if c.scenario == "chase_cross")
    frames = case.frames()
    assert frames.shape[0] == case.rows == len(case.truth) and frames.shape[1:] == (224, 240, 3)
    assert case.refs.shape == (2, 48, 48, 3) and case.keys.dtype == np.uint16
    long = next(c for c in cases if c.scenario == "long")
    assert long.rows >= 8 * 30
    for c in cases:
        if c.family == "identity":
            assert sc.informative(c.truth, suite.frame_skip, len(STATE_CLASSES)) >= sc.INFORMATIVE_MARGIN


def test_the_metric_tells_the_emulator_from_the_first_frame(suite_dir):
    """On every mined case, the emulator's own truth follows and binds; the prompt repeated does not
    (a constant metric would fail one side or the other)."""
    suite = Suite(suite_dir)
    own, first, bound = [], [], {}
    for case in suite.cases():
        sig = [sc.true_signals(case.truth, p, suite.frame_skip, len(STATE_CLASSES)) for p in (0, 1)]
        read = sc.truth_as_read(case.truth)
        frozen = {k: np.repeat(v[:1], len(v), axis=0) for k, v in read.items()}
        own += [sc.follow_share(read, p, sig[p], suite.frame_skip) for p in (0, 1)]
        first += [sc.follow_share(frozen, p, sig[p], suite.frame_skip) for p in (0, 1)]
        if case.family == "identity":
            bound.setdefault(case.scenario, []).append(
                (sc.binding(read, sig, suite.frame_skip)["bound"], sc.binding(frozen, sig, suite.frame_skip)["bound"]))
    assert np.nanmean(own) == 1.0 and np.nanmean(first) < 0.7  # the idle player of a single action follows
    for scenario, pairs in bound.items():
        assert all(b for b, _ in pairs), scenario
        assert sum(f for _, f in pairs) < len(pairs), scenario


def test_suite_refuses_an_existing_folder_and_a_game_without_the_ram_names(runs, suite_dir, recorded, tmp_path):
    with pytest.raises(OutputExists, match="already exists.*--overwrite"):
        build_suite(runs, suite_dir, MineOptions())
    airstriker = recorded(game="Airstriker-Genesis", policy="random", episodes=1, max_frames=30)
    with pytest.raises(LabelError, match="lacks the RAM names p1_x"):
        build_suite([airstriker], tmp_path / "s", MineOptions())
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_stage2_checkpoint(tmp_path_factory.mktemp("ckpt") / "s2")


@pytest.fixture(scope="module")
def report_dir(suite_dir, probe_dir, checkpoint, tmp_path_factory):
    """`wtf benchmark run` on the tiny checkpoint with its two ablations and both baselines."""
    out = tmp_path_factory.mktemp("report") / "report"
    result = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe_dir), "--out", str(out),
                                      "--checkpoint", str(checkpoint), "--keys", "real,zero,swap-players",
                                      "--max-cases", "1", "--steps", "2", "--videos", "1", "--no-lpips",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "Identity binding" in result.output
    return out


@pytest.mark.slow
def test_wtf_benchmark_runs_a_checkpoint_its_ablations_and_the_baselines(report_dir, suite_dir, probe_dir, checkpoint):
    out = report_dir
    report = json.loads((out / "report.json").read_text())
    names = [v["name"] for v in report["variants"]]
    assert names == ["emulator", "first-frame", "s2", "s2 keys=zero", "s2 keys=swap-players"]  # real, zero, swap
    suite = Suite(suite_dir)
    scenarios = [s for s, row in suite.meta["scenarios"].items() if row["cases"]]
    for v in report["variants"]:
        assert v["cases"] == cases_to_score(suite, 1) == len(suite.meta["buckets"]) - sum(
            1 for row in suite.meta["buckets"].values() if not row["kept"])
        for s in IDENTITY:
            if s in scenarios:
                assert v["scenarios"][s]["binding"] is not None
    ckpt = report["variants"][2]
    assert ckpt["speed"]["ms_per_chunk"] > 0 and ckpt["speed"]["frames_per_s"] > 0
    assert all(0 <= v["scenarios"]["long"]["found"] <= 1 for v in report["variants"])
    assert ckpt["variant"]["checkpoint_digest"] and report["suite_digest"] == suite.digest
    assert report["variants"][0]["speed"]["ms_per_chunk"] is None
    assert report["follow_vs_emulator"]["emulator"]["all"] == pytest.approx(1.0)
    first = report["variants"][1]["families"]["single-action"]
    assert first["actor"] < first["idle"]  # the prompt repeated keeps the fighter who stands still, not the move
    html = (out / "index.html").read_text()
    assert "single: actor / idle" in html
    assert "Identity binding" in html and "plots/binding.png" in html and ".mp4" in html
    assert (out / "plots" / "binding.png").read_bytes()[:4] == b"\x89PNG"
    videos = [Path(out, v["path"]) for v in ckpt["videos"]]
    assert videos and all(p.stat().st_size > 0 for p in videos)
    # a checkpoint already scored in the folder is refused without --resume (the baselines are reused)
    again = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe_dir), "--out", str(out),
                                     "--checkpoint", str(checkpoint), "--max-cases", "1", "--steps", "2",
                                     "--no-lpips", "--no-progress"])
    assert again.exit_code == 2 and "already holds results of s2" in again.output
    # --resume on a checkpoint retrained in place: its old cases are not reused for the new weights
    info_path = out / "variants" / ckpt["variant"]["slug"] / "variant.json"
    saved = info_path.read_text()
    info_path.write_text(json.dumps({**json.loads(saved), "checkpoint_digest": "0" * 16}))
    try:
        stale = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe_dir), "--out",
                                         str(out), "--checkpoint", str(checkpoint), "--max-cases", "1", "--steps", "2",
                                         "--no-lpips", "--no-progress", "--resume"])
    finally:
        info_path.write_text(saved)
    assert stale.exit_code == 2 and f"with other weights ({'0' * 16}, now" in " ".join(stale.output.split())
    steps = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe_dir), "--out", str(out),
                                     "--checkpoint", str(checkpoint), "--max-cases", "1", "--steps", "3",
                                     "--no-lpips", "--no-progress", "--resume"])
    assert steps.exit_code == 2 and "with other --steps (2, now 3)" in " ".join(steps.output.split())


@pytest.mark.slow
def test_the_report_page_shows_tables_plots_and_playing_videos(report_dir, page, tmp_path):
    """index.html in headless Chromium (tests/test_browser.py's page), served on 127.0.0.1."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(report_dir))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        assert page.locator("table").count() == 8  # no teacher-forced row here: no table of gains over the last frame
        assert "Single-action x error per action" in page.locator("h2").nth(7).inner_text()
        assert page.locator("table").first.locator("tr").count() == 1 + 5  # header + five variants
        assert "Gain over the first frame" in page.locator("h2").first.inner_text()
        page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        assert page.locator("img").count() == 3
        page.wait_for_function("(() => { const v = document.querySelector('video'); v.play();"
                               " return v.readyState >= 2 && v.currentTime > 0.2; })()", timeout=20000)
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        server.shutdown()
        server.server_close()


def test_an_interrupted_run_keeps_its_cases_and_resume_finishes(suite_dir, probe_dir, tmp_path):
    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    variants = plan_variants(None)
    seen = []

    def stop_after_two(variant, case, result):
        seen.append(case.case_id)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(suite, probe, probe_dir, variants, tmp_path / "r", max_cases=1, lpips=False,
                      on_case=stop_after_two)
    kept = list((tmp_path / "r" / "variants" / "emulator" / "cases").glob("*.json"))
    assert len(kept) == 2
    scored = []
    run_benchmark(suite, probe, probe_dir, variants, tmp_path / "r", max_cases=1, lpips=False, resume=True,
                  on_case=lambda v, c, r: scored.append((v.name, c.case_id)))
    assert not {c for v, c in scored if v == "emulator"} & set(seen)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    n = cases_to_score(suite, 1)
    assert [v["cases"] for v in report["variants"]] == [n, n]


@pytest.mark.slow
def test_the_shipped_model_is_scored_by_its_name(suite_dir, runs, tmp_path):
    """`--checkpoint duel-tiny` (inference/shipped): scored with a probe at the 128x128 it generates."""
    probe = tmp_path / "probe128"
    train_probe(runs, probe, ProbeConfig(size=(128, 128), steps=3, batch_size=8, max_frames=200, val_fraction=0.25))
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe), "--out", str(out),
                                      "--checkpoint", "duel-tiny", "--scenarios", "static", "--max-cases", "1",
                                      "--no-baselines", "--videos", "0", "--no-lpips", "--no-progress"])
    assert result.exit_code == 0, result.output
    (variant,) = json.loads((out / "report.json").read_text())["variants"]
    assert variant["name"].startswith("duel-tiny") and variant["scenarios"]["static"]["cases"] == 1, variant["name"]
    assert variant["speed"]["ms_per_chunk"] > 0


def test_mismatched_inputs_are_named(suite_dir, probe_dir, checkpoint, runs, tmp_path):
    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    train_probe(runs[:1], tmp_path / "p32", ProbeConfig(size=(32, 32), steps=1, batch_size=8, max_frames=64))
    other = load_probe(tmp_path / "p32")
    with pytest.raises(BenchmarkError, match="the probe reads 32x32 frames; the checkpoint .* generates 64x64"):
        run_benchmark(suite, other, tmp_path / "p32", [Variant("checkpoint", checkpoint=str(checkpoint))],
                      tmp_path / "r1", lpips=False)
    moved = tmp_path / "ckpt"
    import shutil

    shutil.copytree(checkpoint, moved)
    for config in moved.glob("checkpoints/*/config.json"):
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "key_layout_version": 2}))
    with pytest.raises(BenchmarkError, match="key layout version 2"):
        run_benchmark(suite, probe, probe_dir, [Variant("checkpoint", checkpoint=str(moved))], tmp_path / "r2",
                      lpips=False)
    with pytest.raises(BenchmarkError, match="valid key modes are real, zero, swap-players"):
        plan_variants(checkpoint, keys=["mirror"])
    with pytest.raises(BenchmarkError, match="--scenarios fight: valid scenarios are single-action"):
        parse_scenarios("static,fight")
    result = CliRunner().invoke(app, ["benchmark", "run", str(tmp_path), "--probe", str(probe_dir), "--out",
                                      str(tmp_path / "r3")])
    assert result.exit_code == 2 and "is not a benchmark suite" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_ctrl_c_keeps_the_scored_cases_and_resume_finishes_the_report(suite_dir, probe_dir, tmp_path):
    """SIGINT to the process group mid-run (as a terminal sends it): one line, exit 130, cases kept."""
    from test_cli import assert_stopped_cleanly, interrupted

    out = tmp_path / "r"
    args = ["benchmark", "run", str(suite_dir), "--probe", str(probe_dir), "--out", str(out), "--no-lpips"]
    cases = out / "variants" / "emulator" / "cases"
    proc, seconds = interrupted(args, lambda pid: len(list(cases.glob("*.json"))) >= 3, settle=0)
    assert_stopped_cleanly(proc, seconds, "add --resume")
    kept = {p.name for p in cases.glob("*.json")}
    assert kept and not (out / "report.json").exists()
    assert not [name for name in kept if name.startswith(".tmp-")], "a case's temporary file was left behind"
    result = CliRunner().invoke(app, [*args, "--resume", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert kept <= {p.name for p in cases.glob("*.json")}
    assert [v["cases"] for v in json.loads((out / "report.json").read_text())["variants"]] == [len(Suite(suite_dir))] * 2


def test_the_vae_baseline_scores_the_recorded_frames_through_the_vae(suite_dir, probe_dir, tmp_path):
    """`--model vae --vae V`: each case's recorded frames, encoded and decoded by V (the ceiling of any model
    that decodes with V), scored like a model; results are kept per VAE weights."""
    from wantofight.benchmark.run import Producer, resized
    from wantofight.datasets.encoders import load_vae

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    variants = plan_variants(None, ["emulator", "vae"], baselines=False, vae="tiny")
    assert [v.name for v in variants] == ["emulator", "vae tiny"]
    case = next(c for c in suite.cases() if c.scenario == "static")
    real = resized(case.frames(), tuple(probe.size))
    frames, seconds = Producer(variants[1], tuple(probe.size))(case, real)
    vae = load_vae("tiny")[0]
    from wantofight.datasets.frames import resize_to_model

    pixels = resize_to_model(real, real.shape[1:3]).transpose(0, 1)  # (3, T, H, W) as the data path gives them
    pixels = torch.cat([pixels, pixels[:, -1:].repeat(1, (1 - len(real)) % 4, 1, 1)], dim=1)[None]
    expected = ((vae.decode(vae.encode(pixels))[0, :, :len(real)].clamp(-1, 1) + 1) * 127.5).round()
    assert frames.shape == real.shape and frames.dtype == np.uint8 and seconds == []
    assert np.array_equal(frames, expected.to(torch.uint8).permute(1, 2, 3, 0).numpy())
    run_benchmark(suite, probe, probe_dir, variants, tmp_path / "r", max_cases=1, scenarios={"static"}, lpips=False)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    emulator, through_vae = report["variants"]
    assert through_vae["name"] == "vae tiny" and emulator["scenarios"]["static"]["psnr"] == 100.0
    assert through_vae["scenarios"]["static"]["psnr"] < 30  # the tiny preset's VAE is random
    with pytest.raises(BenchmarkError, match="--model vae needs --vae VAE_DIR"):
        plan_variants(None, ["vae"])
    with pytest.raises(BenchmarkError, match=f"--vae {tmp_path}: no VAE there"):
        plan_variants(None, ["vae"], vae=tmp_path)
    with pytest.raises(BenchmarkError, match="the first-frame and vae baselines have no keys"):
        plan_variants(None, ["vae"], keys=["zero"], vae="tiny")


def test_the_emulator_replays_each_case_with_the_ablated_keys(suite_dir, probe_dir, tmp_path):
    """`--model emulator --keys zero,swap-players`: the case's recording replayed to the prompt, then the
    ablated keys pressed (what a model that follows keys perfectly shows). With the recorded keys the replay
    is the recording itself; with released or swapped keys it parts from it once a key differs, not before."""
    import dataclasses

    from wantofight.benchmark.run import Producer, case_masks
    from wantofight.collect.replay import replay_frames
    from wantofight.video import read_video

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    variants = plan_variants(None, ["emulator"], keys=["real", "zero", "swap-players"], baselines=False)
    assert [v.name for v in variants] == ["emulator", "emulator keys=zero", "emulator keys=swap-players"]
    assert [v.name for v in plan_variants(Path(suite_dir), keys=["zero"])][:2] == ["emulator", "first-frame"]
    case = next(c for c in suite.cases() if c.scenario == "single-action")
    start, path = case.start_row, Path(case.episode_path)
    recorded = read_video(path / "video.mp4")[start:start + case.rows]
    assert np.array_equal(replay_frames(path, start, case.keys), recorded)
    for mode in ("zero", "swap-players"):
        masks = case_masks(case, mode)
        first = int(np.argmax((masks != case.keys).any(axis=1)))  # the first row whose keys differ
        replayed = replay_frames(path, start, masks)
        assert first > 0 and np.array_equal(replayed[:first], recorded[:first]), mode
        assert not np.array_equal(replayed, recorded), mode
    lost = dataclasses.replace(case, episode_path=str(tmp_path / "gone"))
    with pytest.raises(BenchmarkError, match=f"case {case.case_id}: its recording .*gone is not here"):
        Producer(variants[1], tuple(probe.size))(lost, recorded)
    run_benchmark(suite, probe, probe_dir, variants, tmp_path / "r", max_cases=1, scenarios={"single-action"},
                  lpips=False)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [v["name"] for v in report["variants"]] == [v.name for v in variants]
    assert report["follow_vs_emulator"]["emulator"]["single-action"] == 1.0  # the recorded keys' run is the ceiling
    zero = report["variants"][1]
    assert zero["scenarios"]["single-action"]["psnr"] < 100.0  # not the recording


def test_a_case_scored_in_pieces_gives_the_figures_of_the_whole_case(suite_dir, probe_dir, checkpoint, tmp_path):
    """Rows go through the producer, the probe and the metrics a few at a time (run.PIECE_ROWS); split
    into 5-row pieces, which cut the model's 8-row chunks, a case scores exactly as in one piece."""
    from wantofight.benchmark.run import load_checkpoint, run_variant

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    ckpt = Variant("checkpoint", checkpoint=str(checkpoint), steps=2)
    loaded = load_checkpoint(ckpt, suite, probe, "cpu")
    for v in (Variant("emulator"), Variant("first-frame"), Variant("last-frame"), ckpt):
        scored = {}
        for rows in (None, 5):
            out = tmp_path / f"r{rows}"
            run_variant(suite, probe, v, out, loaded=loaded if v is ckpt else None, max_cases=1,
                        scenarios={"static", "dual-action"}, videos=0, piece_rows=rows)  # one case of each
            cases = sorted((out / "variants" / v.slug / "cases").glob("*.json"))
            scored[rows] = [{k: x for k, x in json.loads(p.read_text()).items() if k != "chunk_seconds"} for p in cases]
        assert scored[None] and scored[None] == scored[5], v.name
        assert all(len(c["extra_fighters"]) == -(-(c["rows"] - 1) // 8) for c in scored[5])


def test_the_last_frame_baseline_holds_the_recorded_row_before_each_chunk():
    """The floor of a teacher-forced score: rows 1-8 show row 0, rows 9-16 row 8, however the rows are cut."""
    from wantofight.benchmark.run import held_chunks

    rows = np.arange(20, dtype=np.uint8)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)  # row r is all r
    for cut in (20, 5, 3):
        pieces = [rows[i:i + cut] for i in range(0, 20, cut)]
        pairs = list(held_chunks(iter(pieces)))
        assert all(a is b for (a, _), b in zip(pairs, pieces))
        made = np.concatenate([m for _, m in pairs])[:, 0, 0, 0]
        assert made.tolist() == [0] * 9 + [8] * 8 + [16] * 3, cut


def test_teacher_forced_chunks_follow_the_recorded_context(suite_dir, probe_dir, checkpoint):
    """--teacher-forced: each chunk from the recorded chunks before it. Chunk 0 comes from the prompt
    alone, as free-running (same noise); later chunks see another past, so they differ."""
    from dataclasses import replace

    from wantofight.benchmark.run import Producer, load_checkpoint, resized

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    free = Variant("checkpoint", checkpoint=str(checkpoint), steps=2)
    forced = replace(free, teacher_forced=True)
    assert forced.name == "s2 teacher-forced" and forced.slug != free.slug
    loaded = load_checkpoint(free, suite, probe, "cpu")
    case = next(c for c in suite.cases() if c.rows > 24)
    real = resized(case.frames(), probe.size)
    made = {v.teacher_forced: Producer(v, probe.size, loaded)(case, real)[0] for v in (free, forced)}
    assert made[True].shape == made[False].shape == real.shape
    gap = [np.abs(made[True][a:a + 8].astype(int) - made[False][a:a + 8]).mean() for a in (1, 9, 17)]
    assert gap[0] == 0 and min(gap[1:]) > 0.01, gap  # the tiny checkpoint barely reads its context, but does
    assert [v.name for v in plan_variants(checkpoint, keys=["real", "zero"], teacher_forced=True)] == \
        ["emulator", "first-frame", "last-frame", "s2", "s2 teacher-forced", "s2 keys=zero", "s2 teacher-forced keys=zero"]
    assert "last-frame" not in [v.name for v in plan_variants(checkpoint)]  # its floor only beside a teacher-forced score
    with pytest.raises(BenchmarkError, match="--teacher-forced .* give --checkpoint"):
        plan_variants(None, teacher_forced=True)


def test_a_miniature_run_with_an_untrained_probe_warns_first_and_gives_every_rate_an_interval(suite_dir, runs,
                                                                                               tmp_path):
    """Two cases per scenario and a probe of one step: the page's first lines say the figures mean little."""
    probe = tmp_path / "probe"
    train_probe(runs[:1], probe, ProbeConfig(size=(64, 64), steps=1, batch_size=8, max_frames=64))
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["benchmark", "run", str(suite_dir), "--probe", str(probe), "--out", str(out),
                                      "--max-cases", "2", "--videos", "0", "--no-lpips", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "missed its accuracy targets" in result.output.split("Gain over the first frame")[0]
    first = (out / "index.html").read_text().split("<h2>")[0]
    assert "smoke test" in first and "missed its accuracy targets" in first
    assert "jump_over: 2 cases" in first or "static: 2 cases" in first
    report = json.loads((out / "report.json").read_text())
    for v in report["variants"]:
        for name, fam in v["families"].items():
            assert not fam["cases"] or fam["follow_ci"] is not None, (v["name"], name)
        for name, row in v["scenarios"].items():
            assert not row["cases"] or name not in IDENTITY or row["binding_ci"] is not None, (v["name"], name)
        assert v["scenarios"]["long"]["found_ci"] is not None
    for name, row in report["gain_over_first_frame"]["variants"].items():
        for column, g in row.items():
            assert g["gain"] is None or g["ci"] is not None, (name, column)
    table = (out / "index.html").read_text().split("Action following")[1].split("</table>")[0]
    assert table.count(" [") >= 2 * 4  # each family's following of both variants, with its interval


LONG_CASE_MB = 2048
"""Peak resident memory allowed for scoring a 60-s case at the native 224x240 with its side-by-side video
(measured: 1.26 GB; 4.0 GB before SSIM and the video were drawn in pieces, 6.5 GB with the case whole)."""

SCORE_ONE_CASE = """
import functools, json, pickle, resource, sys
from pathlib import Path
from wantofight.benchmark.episodes import GameInfo
from wantofight.benchmark.probe import load_probe
from wantofight.benchmark.run import PIECE_ROWS, Producer, Variant, resized, score_case, stage_of, write_side_by_side

case, probe = pickle.loads(Path(sys.argv[1]).read_bytes()), load_probe(sys.argv[2])
pieces = (resized(p, probe.size) for p in case.frame_pieces(PIECE_ROWS))
video = functools.partial(write_side_by_side, Path(sys.argv[3]), case=case, fps=30)
result = score_case(case, Producer(Variant("emulator"), probe.size).pairs(case, pieces), probe,
                    stage_of(case, GameInfo.of("duel"), (224, 240), probe.size), 2, None, video)
print(json.dumps({"rows": len(result["psnr_rows"]), "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


@pytest.mark.slow
def test_a_60_s_case_is_scored_with_its_video_in_bounded_memory(recorded, runs, tmp_path):
    """A long session of 60 s at 30 fps (1,800 generated rows) through a probe at the native size (the
    default of `wtf probe train`, the largest frames the benchmark scores), the metrics and the side-by-side
    video in a fresh process: its peak resident memory stays under LONG_CASE_MB."""
    import os
    import pickle
    import subprocess
    import sys

    from wantofight.annotate.video import ClipEncoder
    from wantofight.benchmark.episodes import open_runs
    from wantofight.benchmark.suite import Case

    run = recorded(policy="random", episodes=1, max_frames=1802, seed=11)  # random play: no KO ends it early
    _, (ep, *_) = open_runs([run])
    rows = 60 * 30 + 1
    assert ep.rows >= rows
    encoder = ClipEncoder(30, 240, 224)
    for a in range(0, rows, 256):
        for frame in ep.frames(np.arange(a, min(rows, a + 256))):
            encoder.write(frame)
    keys = np.stack([ep.episode.columns[f"p{p}_keys"][:rows] for p in (1, 2)], axis=1).astype(np.uint16)
    case = Case("long-60s", "long", "identity", "60 s", None, keys, ep.truth.rows(slice(0, rows)), encoder.finish(),
                np.zeros((2, 48, 48, 3), np.uint8))
    (tmp_path / "case.pkl").write_bytes(pickle.dumps(case))
    probe_dir = tmp_path / "probe"  # what it reads does not matter here, only the size of what it is fed
    train_probe(runs, probe_dir, ProbeConfig(size=(224, 240), steps=1, batch_size=8, max_frames=64, val_fraction=0.25))
    done = subprocess.run([sys.executable, "-c", SCORE_ONE_CASE, str(tmp_path / "case.pkl"), str(probe_dir),
                           str(tmp_path / "case.mp4")], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["rows"] == rows - 1 and (tmp_path / "case.mp4").stat().st_size > 0
    assert got["mb"] < LONG_CASE_MB, got
