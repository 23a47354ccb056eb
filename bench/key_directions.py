"""Does the model move the right fighter the way a held direction sends it? Counterfactual keys on walk cases.

    python bench/key_directions.py [--checkpoint duel-tiny] [--per-bucket 2] [--teacher-forced]

For each walk_forward / walk_back single-action case of bench/learns.py's suite (at most --per-bucket per player and
move), the case's prompt is continued three times with the same noise: the acting fighter holds LEFT, holds RIGHT,
or presses nothing from row 1 on, the other fighter nothing. The probe reads both fighters' x on the generated rows
8-16 (the second chunk); the table gives each one's mean shift from the prompt in native px. A model that follows
the keys moves the actor left with LEFT, right with RIGHT (unless a wall stops it), and leaves the other fighter
where it stands. A shift of the *other* fighter's reading is a fighter drawn in the wrong player's look: the probe
tells the two apart by their sprites. Used for docs/model.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HELD = {"LEFT": 1 << 2, "RIGHT": 1 << 3, "nothing": 0}
"""The direction slots of the key layout (docs/contracts.md: bit 2 LEFT, bit 3 RIGHT)."""
ROWS = slice(8, 17)
MOVED = 4.0
"""A shift of more than this many native px counts as a move."""


def shifts(checkpoint: str, suite_dir: Path, probe_dir: Path, per_bucket: int, teacher_forced: bool):
    """Yield (case, {held: (actor shift, other shift)}) for each walk case."""
    from wantofight.benchmark.probe import load_probe
    from wantofight.benchmark.run import Producer, Variant, case_bucket, load_checkpoint, resized
    from wantofight.benchmark.suite import Suite
    from wantofight.inference.generation import resolve_checkpoint

    suite, probe = Suite(suite_dir), load_probe(probe_dir)
    variant = Variant("checkpoint", checkpoint=str(resolve_checkpoint(checkpoint)), steps=4,
                      teacher_forced=teacher_forced)
    producer = Producer(variant, probe.size, load_checkpoint(variant, suite, probe, "cpu"))
    seen = {}
    for case in suite.cases():
        if case.scenario != "single-action" or case.label not in ("walk_forward", "walk_back"):
            continue
        bucket = case_bucket(case)
        seen[bucket] = seen.get(bucket, 0) + 1
        if seen[bucket] > per_bucket:
            continue
        real = resized(case.frames(), probe.size)
        actor = case.actor - 1
        out = {}
        for name, bit in HELD.items():
            masks = np.zeros((ROWS.stop, 2), np.uint16)  # rows 0-16: the prompt and two chunks
            masks[1:, actor] = bit
            x = probe.read(np.concatenate(list(producer.generate(case, real, masks))))["x"]
            out[name] = (float(x[ROWS, actor].mean() - x[0, actor]), float(x[ROWS, 1 - actor].mean() - x[0, 1 - actor]))
        yield case, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="duel-tiny", help="a run, a checkpoint folder or a shipped model's name")
    parser.add_argument("--per-bucket", type=int, default=2, help="walk cases per player and move (default 2)")
    parser.add_argument("--teacher-forced", action="store_true", help="the first chunk from the recorded one, "
                        "whatever the keys (default: free-running from the prompt)")
    parser.add_argument("--suite", type=Path, default=ROOT / "data" / "bench" / "suite")
    parser.add_argument("--probe", type=Path, default=ROOT / "runs" / "bench-probe" / "128x128")
    args = parser.parse_args()
    print(f"{args.checkpoint}, {'teacher-forced' if args.teacher_forced else 'free-running'}: the actor's / the other "
          f"fighter's shift over rows {ROWS.start}-{ROWS.stop - 1}, native px")
    print(f"{'case':18} {'move':13} {'prompt x':>10} " + " ".join(f"{h:>15}" for h in HELD))
    rows = []
    for case, out in shifts(args.checkpoint, args.suite, args.probe, args.per_bucket, args.teacher_forced):
        x0 = case.truth.values["x"][0]
        print(f"{case.case_id:18} P{case.actor} {case.label:10} {x0[0]:4.0f}/{x0[1]:4.0f} "
              + " ".join(f"{a:+6.0f} / {o:+6.0f}" for a, o in out.values()), flush=True)
        rows.append(out)
    if not rows:
        raise SystemExit(f"{args.suite}: no walk_forward or walk_back single-action case")
    mean = {h: np.mean([r[h] for r in rows], axis=0) for h in HELD}
    right = np.mean([r["LEFT"][0] < -MOVED for r in rows] + [r["RIGHT"][0] > MOVED for r in rows])
    other = np.mean([abs(r[h][1]) > MOVED for r in rows for h in ("LEFT", "RIGHT")])
    print(f"mean shift (actor / other): " + ", ".join(f"{h} {a:+.1f} / {o:+.1f}" for h, (a, o) in mean.items()))
    print(f"{len(rows)} cases: the actor moved the held way on {100 * right:.0f}% of (case, direction) pairs; the other "
          f"fighter's reading moved on {100 * other:.0f}% of them")


if __name__ == "__main__":
    main()
