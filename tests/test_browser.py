"""The gallery in a real browser: headless Debian Chromium driven by Playwright (never `playwright
install`). Loads from `wtf browse --serve`, narrows the grid by tier, plays a clip page, and
round-trips a flag into the exclude file. Screenshots go to the test's tmp dir.

CI installs the browser with `apt-get install -y chromium`; without it this test fails (it does not skip).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from test_curator_data import clip_rows, curator_dataset
from wantofight.annotate.curriculum import read_exclude
from wantofight.annotate.gallery import build_gallery, make_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def served(recorded, tmp_path_factory):
    ds, manifest, _ = curator_dataset(recorded, tmp_path_factory)
    out = tmp_path_factory.mktemp("browse") / "gallery"
    build_gallery(ds, out, limit=8)  # the rest is rendered by the server on request
    server = make_server(out, ds, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield ds, out, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def page(tmp_path):
    if not Path(CHROMIUM).is_file() and not shutil.which("chromium"):
        pytest.fail(f"the browser test needs Debian's Chromium at {CHROMIUM}: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail('the browser test needs the playwright package: pip install -e ".[dev]"')
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1280, "height": 900},
        )  # fmt: skip
        # Only localhost: anything else is refused before it leaves the browser.
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("http://127.0.0.1")
                      else route.abort())
        try:
            yield context.new_page()
        finally:
            context.close()


def test_gallery_filters_plays_and_flags(served, page, tmp_path):
    ds, out, base = served
    rows = clip_rows(ds, ["clip_id", "tier"])
    page.goto(f"{base}/index.html")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator(".card").count() == min(48, len(rows))
    assert "served" in page.inner_text("#mode")
    page.screenshot(path=str(tmp_path / "gallery.png"))

    full = [r["clip_id"] for r in rows if r["tier"] == "full-match"]
    page.select_option("#f-tier", "full-match")
    page.wait_for_function(f"document.querySelectorAll('.card').length === {len(full)}")
    tiers = page.eval_on_selector_all(".card", "cards => cards.map(c => c.dataset.tier)")
    assert set(tiers) == {"full-match"} and len(full) < len(rows)
    assert f"{len(full)} of {len(rows)} clips" in page.inner_text("#count")
    page.screenshot(path=str(tmp_path / "gallery-full-match.png"))

    clip_id = page.get_attribute(".card", "data-clip")
    page.click(".card")
    page.wait_for_url(f"**/clip.html#{clip_id}")
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_function("(() => { const v = document.getElementById('video');"
                           " return v.readyState >= 2 && v.currentTime > 0.2; })()", timeout=20000)
    assert page.locator("#events tr").count() > 1 and page.locator("#labels tr").count() > 1
    # The bottom of the picture is the HUD's event timeline: the player's controls sit under it, not on it.
    assert page.eval_on_selector("#video", "v => v.controls") is False
    video_box, bar_box = page.locator("#video").bounding_box(), page.locator("#controls").bounding_box()
    assert bar_box["y"] >= video_box["y"] + video_box["height"] - 0.5
    page.click("#play")
    page.wait_for_function("document.getElementById('video').paused")
    page.eval_on_selector("#seek", "s => { s.value = '3'; s.dispatchEvent(new Event('input')); }")
    page.wait_for_function("document.getElementById('frame').dataset.frame === '3'")
    page.click("#step-next")
    page.wait_for_function("document.getElementById('frame').dataset.frame === '4'")
    page.click("#step-prev")
    page.click("#step-prev")
    page.wait_for_function("document.getElementById('frame').dataset.frame === '2'")
    page.screenshot(path=str(tmp_path / "clip.png"))

    page.fill("#reason", "HUD off by one")
    page.click("#flag")
    page.wait_for_selector("body[data-flagged='1']")
    page.wait_for_function("document.getElementById('flag-state').textContent.startsWith('written')")
    assert read_exclude(str(out / "exclude.json")) == {clip_id: "HUD off by one"}

    page.goto(f"{base}/index.html#flagged=1")
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_function("document.querySelectorAll('.card').length === 1")
    assert page.get_attribute(".card.flagged", "data-clip") == clip_id
    for name in ("gallery.png", "gallery-full-match.png", "clip.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
