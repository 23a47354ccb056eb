"""Curator tools: the key HUD against the clip's keys, `wtf inspect` (clip and raw episode, MP4, GIF,
PNG), `wtf stats`, `wtf query`, `wtf browse` (static files, server, flags → exclude → build)."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hud_helpers import index_line
from test_curator_data import OPTIONS, busiest_clip, clip_rows, curator_dataset, popcount
from wantofight import hud
from wantofight.annotate.curriculum import read_exclude
from wantofight.images import read_png
from wantofight.annotate.video import decode_mp4
from wantofight.cli import app


@pytest.fixture(scope="module")
def dataset(recorded, tmp_path_factory):
    return curator_dataset(recorded, tmp_path_factory)


def invoke(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


def check_hud_frame(image, layout, clip: dict, t: int, tolerance: int = 0) -> int:
    """Assert every slot cell of frame `t` shows what the clip's keys say; returns lit cells seen."""
    lit = 0
    for p in (1, 2):
        keys, new = clip[f"p{p}_keys"][t], clip[f"p{p}_pressed"][t]
        effective = clip[f"p{p}_effective"][t]
        color = hud.PLAYER_COLORS[p]
        for slot in range(16):
            held, pressed = keys >> slot & 1, new >> slot & 1
            if pressed and effective is False:
                fill, border = hud.dim(color), hud.DIM_BORDER
            elif pressed:
                fill, border = color, hud.NEW_BORDER
            elif held:
                fill, border = color, color
            else:
                fill, border = hud.UNLIT, hud.UNLIT
            y0, y1, x0, x1 = layout.slot_fill(p, slot)
            region = image[y0:y1, x0:x1].reshape(-1, 3).astype(int)
            where = f"frame {t} p{p} slot {slot} keys={keys:#06x} pressed={new:#06x} effective={effective}"
            assert np.abs(region.mean(axis=0) - fill).max() <= tolerance + 1e-9, where
            by0, _, bx0, bx1 = layout.slot_box(p, slot)
            edge = image[by0:by0 + layout.scale, (bx0 + bx1) // 2 - 1].astype(int)
            if tolerance == 0:
                assert np.abs(edge.mean(axis=0) - border).max() == 0, where + " (border)"
            lit += bool(held)
    return lit


# ---------------------------------------------------------------------------------------------
# The HUD


def test_hud_lights_exactly_the_held_slots_marks_new_presses_and_dims_ineffective_ones(dataset):
    ds, _, _ = dataset
    clip = busiest_clip(ds)
    frames = decode_mp4(clip["video"])
    out = hud.render_hud(frames, clip["p1_keys"], clip["p2_keys"], clip["p1_effective"], clip["p2_effective"],
                         labels=(clip["p1_action"], clip["p2_action"]), events=clip["events"],
                         start_index=clip["start_frame"], scale=2, p1_pressed=clip["p1_pressed"],
                         p2_pressed=clip["p2_pressed"])
    layout = hud.hud_layout(clip["height"], clip["width"], 2)
    assert out.shape == (clip["num_frames"], *layout.output_shape, 3) and out.dtype == np.uint8
    assert layout.output_shape[0] % 2 == 0 and layout.output_shape[1] % 2 == 0
    lit = sum(check_hud_frame(out[t], layout, clip, t) for t in range(len(out)))
    assert lit > 0
    # The frame itself sits untouched, upscaled, in the top-left corner.
    assert np.array_equal(out[:, : clip["height"] * 2 : 2, : clip["width"] * 2 : 2], frames)


def test_hud_ineffective_presses_and_derived_edges_on_synthetic_keys():
    frames = np.zeros((4, 32, 40, 3), dtype=np.uint8)
    a, right = 1 << 4, 1 << 3
    keys1, keys2 = [0, a | right, a | right, 0], [0, 0, a, a]
    out = hud.render_hud(frames, keys1, keys2, p1_effective=[True, False, True, None], scale=1)
    layout = hud.hud_layout(32, 40, 1)
    clip = {"p1_keys": keys1, "p2_keys": keys2, "p1_pressed": [0, a | right, 0, 0], "p2_pressed": [0, 0, a, 0],
            "p1_effective": [True, False, True, None], "p2_effective": [None] * 4}
    for t in range(4):
        check_hud_frame(out[t], layout, clip, t)
    y0, y1, x0, x1 = layout.slot_fill(1, 4)
    assert tuple(out[1, y0, x0]) == hud.dim(hud.PLAYER_COLORS[1])  # pressed while the game could not act
    assert tuple(out[2, y0, x0]) == hud.PLAYER_COLORS[1]  # still held next frame: lit, not dimmed
    with pytest.raises(ValueError, match="one mask per frame"):
        hud.render_hud(frames, keys1[:3], keys2)


def test_hud_counter_says_what_its_numbers_are():
    frames = np.zeros((4, 32, 40, 3), dtype=np.uint8)
    layout = hud.hud_layout(32, 40, 2)
    # A clip cut from an episode: its episode row, then its place in the clip.
    clip = hud.render_hud(frames, [0] * 4, [0] * 4, start_index=300, scale=2)
    assert [index_line(f, layout) for f in clip] == [f"ROW {300 + t}  FRAME {t} OF 4" for t in range(4)]
    # A video with no recording behind it (validation, generation, benchmark): one number, counted over
    # the whole video even when it is rendered a chunk at a time.
    chunk = hud.render_hud(frames, [0] * 4, [0] * 4, start_index=8, scale=2, timeline_span=(0, 12),
                           episode_rows=False)
    assert [index_line(f, layout) for f in chunk] == [f"FRAME {8 + t} OF 12" for t in range(4)]


# ---------------------------------------------------------------------------------------------
# wtf inspect


def test_inspect_writes_mp4_gif_and_contact_sheet_whose_hud_matches_the_keys(dataset, tmp_path):
    ds, _, _ = dataset
    clip = busiest_clip(ds)
    layout = hud.hud_layout(clip["height"], clip["width"], 2)

    result = invoke("inspect", ds, "--clip", clip["clip_id"], "--out", tmp_path / "c.mp4")
    assert result.exit_code == 0, result.output
    video = decode_mp4((tmp_path / "c.mp4").read_bytes())
    assert video.shape == (clip["num_frames"], *layout.output_shape, 3)
    for t in range(0, clip["num_frames"], 3):  # yuv420p is lossy: colours within a tolerance
        check_hud_frame(video[t], layout, clip, t, tolerance=40)

    result = invoke("inspect", ds, "--clip", clip["clip_id"], "--out", tmp_path / "s.png", "--every", "5",
                    "--columns", "3")
    assert result.exit_code == 0, result.output
    sheet = read_png((tmp_path / "s.png").read_bytes())
    th, tw = layout.output_shape
    picks = list(range(0, clip["num_frames"], 5))
    assert sheet.shape == (-(-len(picks) // 3) * (th + 4) - 4, min(3, len(picks)) * (tw + 4) - 4, 3)
    for i, t in enumerate(picks):
        r, c = divmod(i, 3)
        check_hud_frame(sheet[r * (th + 4):r * (th + 4) + th, c * (tw + 4):c * (tw + 4) + tw], layout, clip, t)

    pil = pytest.importorskip("PIL.Image")
    result = invoke("inspect", ds, "--clip", clip["clip_id"], "--out", tmp_path / "c.gif", "--scale", "1")
    assert result.exit_code == 0, result.output
    with pil.open(tmp_path / "c.gif") as gif:
        assert gif.n_frames == clip["num_frames"] and gif.size == hud.hud_layout(clip["height"], clip["width"], 1).output_shape[::-1]


def test_inspect_a_raw_episode_before_curriculum_building(dataset, tmp_path):
    import pyarrow.parquet as pq

    from wantofight.annotate.annotate import read_annotation

    _, _, runs = dataset
    episode = runs[1] / "episodes" / "ep000001"
    result = invoke("inspect", "--episode", episode, "--start", "100", "--frames", "80", "--out",
                    tmp_path / "e.png", "--every", "1", "--columns", "10", "--scale", "1")
    assert result.exit_code == 0, result.output
    frames = pq.read_table(episode / "frames.parquet").to_pydict()
    labels = read_annotation(episode).frames.to_pydict()
    clip = {k: labels[k][100:180] for k in ("p1_pressed", "p2_pressed", "p1_effective", "p2_effective")}
    clip.update({k: frames[k][100:180] for k in ("p1_keys", "p2_keys")})
    sheet = read_png((tmp_path / "e.png").read_bytes())
    layout = hud.hud_layout(224, 240, 1)
    th, tw = layout.output_shape
    for t in range(80):
        r, c = divmod(t, 10)
        check_hud_frame(sheet[r * (th + 4):r * (th + 4) + th, c * (tw + 4):c * (tw + 4) + tw], layout, clip, t)
    assert any(clip["p1_keys"]) or any(clip["p2_keys"])


def test_inspect_bad_input_fails_in_one_line_and_says_how_to_list_ids(dataset, tmp_path):
    ds, _, _ = dataset
    result = invoke("inspect", ds, "--clip", "0" * 20)
    assert result.exit_code != 0 and "wtf query" in result.output and "select clip_id" in result.output
    assert len(result.output.strip().splitlines()) <= 3  # one error line (wrapped by the terminal at most)
    clip_id = clip_rows(ds, ["clip_id"])[0]["clip_id"]
    result = invoke("inspect", ds, "--clip", clip_id, "--out", tmp_path / "x.avi")
    assert result.exit_code != 0 and ".mp4" in result.output
    assert invoke("inspect", ds).exit_code != 0
    result = invoke("inspect", tmp_path / "nothing", "--clip", clip_id)
    assert result.exit_code != 0 and "build-curriculum" in result.output


# ---------------------------------------------------------------------------------------------
# wtf stats, wtf query


def test_stats_json_counts_match_the_shards(dataset, tmp_path):
    ds, manifest, _ = dataset
    result = invoke("stats", ds, "--json", "--plots", tmp_path / "plots")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["clips"] == manifest["clips"]
    assert stats["tiers"] == {t: c for t, c in manifest["counts"].items() if c["train"] + c["val"]}
    rows = clip_rows(ds, ["tier", "p1_move", "p2_move", "side", "num_frames", "p1_keys", "p1_pressed", "p2_pressed",
                          "p1_effective", "event_types", "events", "p1_policy", "p2_policy"])
    singles = [r for r in rows if r["tier"] == "single-action"]
    for move, sides in stats["single_action"].items():
        for side, n in sides.items():
            assert n == sum((r["p1_move"] or r["p2_move"]) == move and r["side"] == side for r in singles)
    for p in ("p1", "p2"):
        counts = popcount([m for r in rows for m in r[f"{p}_pressed"]])
        assert [stats["keys"][p][s]["presses"] for s in stats["keys"][p]] == counts.tolist()
    held = popcount([m for r in rows for m in r["p1_keys"]])
    assert [v["held_frames"] for v in stats["keys"]["p1"].values()] == held.tolist()
    judged = [(f, n) for r in rows for f, n in zip(r["p1_effective"], r["p1_pressed"]) if n and f is not None]
    assert stats["effective"]["p1"]["new_press_rows"] == len(judged) > 0
    assert stats["effective"]["p1"]["effective"] == sum(f for f, _ in judged)
    assert stats["events"]["hit"] > 0 and stats["clips_with_event"]["hit"] == sum("hit" in r["event_types"] for r in rows)
    assert sum(stats["side_swaps"].values()) == stats["events"]["side_swap"] > 0
    assert stats["policies"]["pairs"]["scripted vs random"] == sum(r["p1_policy"] == "scripted" for r in rows)
    assert stats["lengths"]["full-match"]["max"] == 161
    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert {"tiers.png", "events.png", "keys.png", "lengths.png", "policies.png"} <= set(plots)
    assert all((tmp_path / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)

    table = invoke("stats", ds)
    assert table.exit_code == 0 and "Clips per tier" in table.output and "Effective presses" in table.output


def bar_boxes(ax) -> list:
    """Display-space boxes of the bars drawn in `ax` (empty bars draw nothing and are left out)."""
    from matplotlib.patches import Rectangle

    return [p.get_window_extent() for p in ax.patches
            if isinstance(p, Rectangle) and p.get_height() and p.get_width()]


def overlap(a, b) -> bool:
    """Whether two display boxes share more than half a pixel each way (touching edges do not count)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


def bin_start(name: str) -> int:
    return int(name.split("-")[0].rstrip("+"))


def test_stats_plots_show_length_bins_in_order_side_by_side_and_no_legend_on_a_bar(dataset, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from wantofight.annotate.stats import LENGTH_BINS, dataset_stats, write_plots

    ds, _, _ = dataset
    stats = dataset_stats(ds)
    assert {bin_start(name) for s in stats["lengths"].values() for name in s["histogram"]} <= set(LENGTH_BINS)
    figures = {}
    save = Figure.savefig

    def keep(fig, path, *args, **kwargs):  # the figures as written, with their final layout
        save(fig, path, *args, **kwargs)
        figures[Path(path).name] = fig

    monkeypatch.setattr(Figure, "savefig", keep)
    # The dataset's numbers, and tiers whose bars reach the top everywhere (no free corner for a legend).
    full = {**stats, "tiers": {t: {"train": 40, "val": 40} for t in stats["tiers"]}}
    for case, numbers in (("dataset", stats), ("full", full)):
        figures.clear()
        write_plots(numbers, tmp_path / case)
        assert {"tiers.png", "moves.png", "events.png", "keys.png", "lengths.png", "policies.png"} <= set(figures)
        for name, fig in figures.items():
            for ax in fig.axes:
                boxes = bar_boxes(ax)
                legend = ax.get_legend()
                if legend is not None:
                    frame = legend.get_window_extent()
                    assert not [b for b in boxes if overlap(b, frame)], f"{case} {name}: the legend covers a bar"
                pairs = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlap(a, b)]
                assert not pairs, f"{case} {name}: {len(pairs)} pair(s) of bars drawn over each other"
        labels = [t.get_text() for t in figures["lengths.png"].axes[0].get_xticklabels()]
        assert labels and [bin_start(t) for t in labels] == sorted(bin_start(t) for t in labels), labels


def test_query_prints_a_table_or_csv_and_rejects_bad_sql_in_one_line(dataset):
    ds, manifest, _ = dataset
    result = invoke("query", ds, "SELECT tier, count(*) AS n FROM clips GROUP BY tier ORDER BY tier", "--csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "tier,n"
    expected = {t: c["train"] + c["val"] for t, c in manifest["counts"].items() if c["train"] + c["val"]}
    assert {line.split(",")[0]: int(line.split(",")[1]) for line in lines[1:]} == expected
    table = invoke("query", ds, "SELECT clip_id, video, p1_keys FROM clips LIMIT 3")
    assert table.exit_code == 0 and "bytes>" in table.output and "3 row(s)" in table.output
    bad = invoke("query", ds, "SELECT nope FROM clips")
    assert bad.exit_code != 0 and "nope" in bad.output and len(bad.output.strip().splitlines()) <= 2


# ---------------------------------------------------------------------------------------------
# wtf browse


def load_js(path, name: str):
    text = path.read_text()
    prefix = f"window.{name} = "
    assert text.startswith(prefix)
    return json.loads(text[len(prefix):].rstrip().rstrip(";"))


def test_browse_writes_a_static_gallery_with_playable_hud_videos(dataset, tmp_path):
    ds, manifest, _ = dataset
    out = tmp_path / "gallery"
    result = invoke("browse", ds, "--out", out, "--limit", "4")
    assert result.exit_code == 0, result.output
    for name in ("index.html", "clip.html", "gallery.js", "gallery.css"):
        assert (out / name).is_file()
    index = load_js(out / "data" / "clips.js", "WTF_DATA")
    assert len(index["rows"]) == manifest["clips"]
    column = {name: i for i, name in enumerate(index["columns"])}
    rendered = [r[column["id"]] for r in index["rows"] if r[column["media"]]]
    assert len(rendered) == 4 and len(list((out / "media").glob("*.mp4"))) == 4
    row = next(r for r in clip_rows(ds) if r["clip_id"] == rendered[0])
    video = decode_mp4((out / "media" / f"{rendered[0]}.mp4").read_bytes())
    assert video.shape[:3] == (row["num_frames"], *hud.hud_layout(row["height"], row["width"], 1).output_shape)
    detail = load_js(out / "data" / "clip" / f"{rendered[0]}.js", "WTF_CLIP")
    assert detail["frames"]["p1_keys"] == row["p1_keys"] and detail["meta"]["clip_id"] == rendered[0]
    assert invoke("browse", ds, "--out", out, "--lazy").exit_code != 0  # --lazy needs --serve


def test_served_flags_round_trip_into_an_exclude_file_that_the_build_honours(dataset, tmp_path):
    from wantofight.annotate.gallery import build_gallery, make_server

    ds, _, runs = dataset
    out = tmp_path / "gallery"
    build_gallery(ds, out, lazy=True)
    server = make_server(out, ds, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        singles = [r["clip_id"] for r in clip_rows(ds, ["clip_id", "tier", "run"])
                   if r["tier"] == "single-action"]
        flagged = singles[0]
        # A lazily served clip is rendered on its first request.
        with urllib.request.urlopen(f"{base}/media/{flagged}.mp4") as response:
            assert decode_mp4(response.read()).shape[0] > 0
        # Byte ranges, which a browser needs to seek in a video.
        video = (out / "media" / f"{flagged}.mp4").read_bytes()
        for asked, expected in (("bytes=10-19", video[10:20]), ("bytes=-5", video[-5:]), ("bytes=7-", video[7:])):
            with urllib.request.urlopen(urllib.request.Request(f"{base}/media/{flagged}.mp4",
                                                               headers={"Range": asked})) as response:
                assert response.status == 206 and response.read() == expected, asked
        doc = {"version": 1, "clips": [{"clip_id": flagged, "reason": "sprite glitch"}]}
        request = urllib.request.Request(f"{base}/api/flags", json.dumps(doc).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            assert json.load(response)["clips"] == doc["clips"]
        with urllib.request.urlopen(f"{base}/api/flags") as response:
            assert json.load(response) == doc
        bad = urllib.request.Request(f"{base}/api/flags", b'{"clips": 3}', {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(bad)
    finally:
        server.shutdown()
        server.server_close()
    assert read_exclude(str(out / "exclude.json")) == {flagged: "sprite glitch"}
    # The curator's file plus an id this build does not cut (a clip of another dataset, say).
    exclude = tmp_path / "exclude.json"
    doc = json.loads((out / "exclude.json").read_text())
    doc["clips"].append({"clip_id": "0" * 20, "reason": "from another dataset"})
    exclude.write_text(json.dumps(doc))
    rebuilt = tmp_path / "rebuilt"
    result = invoke("build-curriculum", *runs, "--out", rebuilt, "--tiers", "single", "--exclude", exclude,
                    "--val-fraction", OPTIONS.val_fraction, "--seed", OPTIONS.seed, "--no-balance", "--workers", 2,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    assert f"excluded 1 clip listed in {exclude} (1 listed id not among this build's clips)" in result.output
    left = {r["clip_id"] for r in clip_rows(rebuilt, ["clip_id"])}
    assert flagged not in left and left == set(singles) - {flagged}
    manifest = json.loads((rebuilt / "manifest.json").read_text())
    assert (manifest["dropped"]["excluded"], manifest["dropped"]["exclude_ids_not_found"]) == (1, 1)
    assert manifest["build_options"]["exclude"] == str(exclude)
