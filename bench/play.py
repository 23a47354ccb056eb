"""`wtf play` on the emulator: frame times and input-to-screen latency, measured with real X key events
(not a test).

Each --scales value plays one recorded session of --seconds in a private Xvfb (which keeps its screen
in a file, for --screenshot): P1 is `human`, driven by xdotool holding RIGHT and LEFT in turn for
100-300 ms with 100-300 ms gaps; P2 stands (`idle`), so P1's x moves only because of the keys. The
scales run side by side in one run, under the same load. Per scale it prints:

- rows/s and the frame-time histogram: time between successive input reads, the emulator's frame
  period (16.7 ms at 60 rows/s); "late" rows are those over 1.5 periods (a visible hitch);
- per-row work: input read → that row's frame on screen (step, video encoding, HUD, scaling, flip);
- latency of each key-down, in frames of 1/60 s, from the moment xdotool returned (the event already
  sent to the X server) to the flip that shows (a) the key lit in the HUD, (b) the fighter moving:
  the first row whose RAM x changed, plus the game's measured screen lag (meta.json
  `screen_ram_lag_frames`, 1 for duel: the NES shows RAM one frame late).

    python bench/play.py > bench/results/play.txt
    python bench/play.py --scales 3 --seconds 4 --p2 scripted --screenshot docs/play.png   # docs/play.md's picture
    python bench/play.py --checkpoint RUN --steps 4 --seconds 20    # a model session (wtf play --checkpoint)
    python bench/play.py --checkpoint RUN --seconds 6 --screenshot docs/play-model.png
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from wantofight.hud import hud_layout
from wantofight.collect.keys import SLOT_INDEX
from wantofight.play.controls import KeyMap
from wantofight.play.session import PlaySettings, play

PERIOD_MS = 1000 / 60
BINS_MS = [0, 15, 16, 17, 18, 20, 25, 33.4, float("inf")]


def start_xvfb(fbdir: Path) -> tuple[subprocess.Popen, str]:
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten", "tcp",
                               "-fbdir", str(fbdir)], pass_fds=(write,), stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as pipe:
        return server, f":{pipe.readline().strip()}"


def xdotool(*args: str) -> str:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, check=True).stdout


def find_window() -> str:
    while True:
        # by process: xdotool's --name misses SDL's UTF-8 WM_NAME
        found = subprocess.run(["xdotool", "search", "--onlyvisible", "--pid", str(os.getpid())], capture_output=True,
                               text=True).stdout.split()
        if found:
            return found[0]
        time.sleep(0.05)


class Driver(threading.Thread):
    """Presses P1's RIGHT and LEFT in turn for `seconds`, then Esc; keeps when each key-down was sent."""

    def __init__(self, keymap: KeyMap, seconds: float, seed: int, screenshot=None, hold=(0.1, 0.3), intro=1.3):
        super().__init__(daemon=True)
        self.keymap, self.seconds, self.rng, self.screenshot = keymap, seconds, random.Random(seed), screenshot
        self.hold, self.intro = hold, intro
        self.downs: list[tuple[float, str]] = []  # (perf_counter after xdotool returned, slot)

    def run(self) -> None:
        window = find_window()
        xdotool("windowfocus", "--sync", window)
        time.sleep(self.intro)  # duel's round intro (60 frames) when nobody can act; the model's first chunk
        keys = self.keymap.players[0]
        end = time.perf_counter() + self.seconds
        slot = "RIGHT"
        while time.perf_counter() < end:
            xdotool("keydown", keys[slot])
            self.downs.append((time.perf_counter(), slot))
            time.sleep(self.rng.uniform(*self.hold))
            xdotool("keyup", keys[slot])
            time.sleep(self.rng.uniform(*self.hold))
            slot = "LEFT" if slot == "RIGHT" else "RIGHT"
        if self.screenshot is not None:  # walking in with a punch: two keys lit in P1's HUD row
            xdotool("keydown", keys["RIGHT"], "keydown", keys["A"])
            time.sleep(0.1)
            self.screenshot(window)
            xdotool("keyup", keys["RIGHT"], "keyup", keys["A"])
        xdotool("key", "Escape")


def latencies(downs, timing, rows: dict, lag: int) -> tuple[list[float], list[float]]:
    """Per key-down: frames from sending to the HUD showing it, and to the fighter moving on screen."""
    reads = sorted(timing.read.items())
    hud, screen = [], []
    keys, x = np.array(rows["p1_keys"]), np.array(rows["p1_x"])
    for sent, slot in downs:
        bit = 1 << SLOT_INDEX[slot]
        first = next((row for row, at in reads if at >= sent), None)
        if first is None:
            continue
        held = [r for r in range(first, min(first + 3, len(keys))) if keys[r] & bit]
        if not held:
            continue
        r = held[0]
        moved = next((q for q in range(r, min(r + 10, len(x))) if x[q] != x[r - 1]), None)
        hud.append((timing.shown[r] - sent) * 1000 / PERIOD_MS)
        if moved is not None and moved + lag in timing.shown:
            screen.append((timing.shown[moved + lag] - sent) * 1000 / PERIOD_MS)
    return hud, screen


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def session(scale: int, seconds: float, keymap: KeyMap, seed: int, p2: str, xvfb: int, screenshot=None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        driver = Driver(keymap, seconds, seed, screenshot)
        driver.start()
        ours, server = time.process_time(), cpu_seconds(xvfb)
        result = play(PlaySettings(p1="human", p2=p2, record=run, scale=scale, seed=seed))
        ours, server = time.process_time() - ours, cpu_seconds(xvfb) - server
        driver.join()
        episode = run / "episodes" / "ep000000"
        rows = pq.read_table(episode / "frames.parquet").to_pydict()
        lag = json.loads((episode / "meta.json").read_text())["screen_ram_lag_frames"]
    timing = result.timing
    intervals = timing.read_intervals() * 1000
    work = np.array([timing.shown[t] - timing.read[t] for t in timing.read if t in timing.shown]) * 1000
    hud, screen = latencies(driver.downs, timing, rows, lag)
    return {"scale": scale, "rows": result.frames, "rate": timing.rate(), "intervals": intervals, "work": work,
            "hud": np.array(hud), "screen": np.array(screen), "presses": len(driver.downs),
            "cpu_ms": 1000 * ours / result.frames, "xvfb_ms": 1000 * server / result.frames,
            "shown": len(timing.shown), "read": len(timing.read), "recorded": len(rows["frame_index"])}


def model_session(checkpoint: str, steps: int, device: str, seconds: float, keymap: KeyMap, seed: int,
                  screenshot=None) -> None:
    """`wtf play --checkpoint --side-by-side`: P1 holds RIGHT and LEFT in turn for 0.5-1.2 s (longer than a
    chunk); prints ms per chunk, rows/s and key → screen latency (to the first shown row of a chunk taken
    after the key went down that holds it)."""
    from wantofight.play.model import ModelPlaySettings, play_model

    driver = Driver(keymap, seconds, seed, screenshot, hold=(0.5, 1.2), intro=2.0)
    driver.start()
    result = play_model(ModelPlaySettings(checkpoint=checkpoint, state="Fight", side_by_side=True, steps=steps,
                                          device=device))
    driver.join()
    rows = np.concatenate(result.chunks)[:, 0] if result.chunks else np.zeros(0, np.uint16)  # row r: rows[r - 1]
    taken = np.repeat(result.chunk_taken_at, 8)
    shown = result.timing.shown
    latency = []
    for sent, slot in driver.downs:
        bit = 1 << SLOT_INDEX[slot]
        row = next((r for r in range(1, min(result.rows, len(rows)) + 1)
                    if rows[r - 1] & bit and taken[r - 1] >= sent and r in shown), None)
        if row is not None:
            latency.append(shown[row] - sent)
    ms = np.array(result.chunk_seconds) * 1000
    lat = np.array(latency) * 1000
    period = 1000 / 30
    print(f"wtf play --checkpoint {checkpoint} --side-by-side --steps {steps} --device {device}: "
          f"{len(ms)} chunks of 8 rows, {result.rows} generated rows shown")
    print(f"  ms per chunk: mean {ms.mean():.0f}, median {np.median(ms):.0f}, max {ms.max():.0f} "
          f"(real time at 30 rows/s: {8 * period:.0f})")
    ticks = np.diff(result.timing.ticks) * 1000
    print(f"  generated rows/s on screen: {result.rows / max(result.seconds, 1e-9):.1f}; the window's own rows "
          f"(input read, picture shown): {1000 / ticks.mean():.1f}/s, median {np.median(ticks):.1f} ms apart, "
          f"max {ticks.max():.0f} ms")
    if len(lat):
        print(f"  key -> first generated row holding it on screen: mean {lat.mean():.0f} ms "
              f"({lat.mean() / period:.1f} rows), max {lat.max():.0f} ms ({lat.max() / period:.1f} rows); "
              f"{len(lat)} of {len(driver.downs)} presses")


def save_screenshot(fbdir: Path, out: Path):
    """Crop the play window out of Xvfb's screen file (an XWD image) and write it as PNG."""

    def take(window: str) -> None:
        import av

        from wantofight.images import write_png

        geometry = dict(line.split("=") for line in xdotool("getwindowgeometry", "--shell", window).split())
        x, y, w, h = (int(geometry[k]) for k in ("X", "Y", "WIDTH", "HEIGHT"))
        with av.open(str(fbdir / "Xvfb_screen0"), format="xwd_pipe") as container:
            screen = next(container.decode(video=0)).to_ndarray(format="rgb24")
        write_png(out, screen[y:y + h, x:x + w])

    return take


def describe(stats: dict) -> list[str]:
    counts, _ = np.histogram(stats["intervals"], bins=BINS_MS)
    total = max(len(stats["intervals"]), 1)
    lines = [f"scale {stats['scale']}: {stats['recorded']} rows recorded, {stats['shown']} shown, "
             f"{stats['read']} input "
             f"reads (rows 1-{stats['read'] - 1}, then the one that found Esc), {stats['rate']:.2f} rows/s; "
             "frame time (input read to input read):"]
    for lo, hi, n in zip(BINS_MS, BINS_MS[1:], counts):
        label = f"{lo:>5.1f}-{hi:<5.1f} ms" if hi != float("inf") else f"{lo:>5.1f}+       ms"
        lines.append(f"  {label} {n:6d}  {100 * n / total:5.1f}%  {'#' * round(50 * n / total)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="key presses per session, after the intro")
    parser.add_argument("--scales", default="1,2,3", help="window scales to compare")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--screenshot", type=Path, help="save the last session's window as PNG (docs/play.png)")
    parser.add_argument("--p2", default="idle", help="P2's player (idle keeps P1's x moving only by the keys)")
    parser.add_argument("--checkpoint", help="measure a model session instead (wtf play --checkpoint)")
    parser.add_argument("--steps", type=int, default=4, help="with --checkpoint: denoising steps per chunk")
    parser.add_argument("--device", default="cpu", help="with --checkpoint: cpu or cuda")
    args = parser.parse_args()
    keymap = KeyMap.load()
    with tempfile.TemporaryDirectory() as fbdir:
        server, display = start_xvfb(Path(fbdir))
        os.environ["DISPLAY"] = display
        if args.checkpoint:
            try:
                shot = save_screenshot(Path(fbdir), args.screenshot) if args.screenshot else None
                return model_session(args.checkpoint, args.steps, args.device, args.seconds, keymap, args.seed, shot)
            finally:
                server.terminate()
                server.wait()
        try:
            scales = [int(s) for s in args.scales.split(",")]
            results = []
            for i, scale in enumerate(scales):
                last = args.screenshot and i == len(scales) - 1
                shot = save_screenshot(Path(fbdir), args.screenshot) if last else None
                results.append(session(scale, args.seconds, keymap, args.seed, args.p2, server.pid, shot))
        finally:
            server.terminate()
            server.wait()
    load = os.getloadavg()
    print(f"wtf play on duel, 60 rows/s target, P1 human (xdotool) vs P2 {args.p2}, recording on; Xvfb; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end; "
          f"python {sys.version.split()[0]}")
    print()
    print("work: input read -> frame on screen (wall time); cpu: CPU time per row of this process (emulator, video\n"
          "encoding, HUD, scaling, the driver thread's waits) and of the X server (taking the window's pixels)")
    print(f"{'scale':>5} {'window':>9} {'rows':>6} {'rows/s':>7} {'late>25ms':>10} {'work ms mean/p99':>17} "
          f"{'cpu ms/row wtf+X':>17} {'HUD latency fr mean/max':>24} {'screen latency fr mean/max':>27} {'presses':>8}")
    layout = hud_layout(224, 240, scale=1)  # duel's frame; the window drops the HUD's event timeline
    base = (layout.width, layout.timeline_y)
    for s in results:
        late = int((s["intervals"] > 1.5 * PERIOD_MS).sum())
        hud = f"{s['hud'].mean():.2f}/{s['hud'].max():.2f}" if len(s["hud"]) else "-"
        scr = f"{s['screen'].mean():.2f}/{s['screen'].max():.2f}" if len(s["screen"]) else "-"
        print(f"{s['scale']:>5} {base[0] * s['scale']:>4}x{base[1] * s['scale']:<4} {s['rows']:>6} {s['rate']:>7.2f} "
              f"{late:>10} {s['work'].mean():>8.2f}/{np.percentile(s['work'], 99):<8.2f} "
              f"{s['cpu_ms']:>8.2f}+{s['xvfb_ms']:<8.2f} {hud:>24} {scr:>27} "
              f"{len(s['screen']):>4}/{s['presses']:<3}")
    for s in results:
        print()
        print("\n".join(describe(s)))


if __name__ == "__main__":
    main()
