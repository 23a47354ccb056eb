"""Does PPO learn to fight? Win rates against the scripted AI, measured side by side in one run.

    python bench/ppo.py [--minutes 30] [--matches 50] [--envs 2] [--out runs/bench-ppo]
    python bench/ppo.py --run runs/bench-ppo          # evaluate an existing run, no training

Trains a PPO fighter (P1) against the default scripted AI for at most --minutes with --envs
environment processes (2 on the project's 2-core machines), then plays --matches whole matches
(state Start, --fps 30 decisions) against the scripted AI for: the `random` collect policy, the
untrained network (the run's step-0 checkpoint: near-uniform actions every decision), and the
trained agent, sampled and deterministic. Prints win rate, wins/losses/draws and mean damage, plus
training env-steps/s (rollouts and updates together) and minutes from the run's log.jsonl.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--steps", type=int, default=5_000_000, help="upper bound; --minutes usually stops first")
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--matches", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2, help="evaluation processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-ppo"))
    parser.add_argument("--run", type=Path, default=None, help="evaluate this training run instead of training")
    args = parser.parse_args()

    from wantofight.collect.agents import EvalConfig, TrainConfig, evaluate, train

    run = args.run
    if run is None:
        run = args.out
        started = time.perf_counter()
        result = train(TrainConfig(steps=args.steps, envs=args.envs, seed=args.seed, checkpoint_every=50_000), run,
                       progress=False, time_limit_s=args.minutes * 60)
        print(f"trained {result.steps:,} steps in {(time.perf_counter() - started) / 60:.1f} min "
              f"({result.steps_per_second:,.0f} env-steps/s, {args.envs} env processes)")
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    last = log[-1]
    print(f"training run {run}: {last['step']:,} env-steps in {last['elapsed_s'] / 60:.1f} min, "
          f"{last['steps_per_s']:,.0f} env-steps/s over the run ({last['matches']} training matches, "
          f"last-100 training win rate {last['win_rate_last_100']})")

    candidates = [
        ("random (collect policy)", "random", False),
        ("untrained PPO (step 0)", f"ppo:{run / 'checkpoints' / 'step_0000000.zip'}", False),
        ("trained PPO, sampled", f"ppo:{run / 'final.zip'}", False),
        ("trained PPO, deterministic", f"ppo:{run / 'final.zip'}", True),
    ]
    print(f"\n{args.matches} matches each vs scripted (P1, state Start, seed {args.seed}):")
    print(f"{'policy':<28} {'win rate':>8} {'W/L/D':>10} {'dealt':>7} {'taken':>7} {'s':>6}")
    for label, spec, deterministic in candidates:
        report = evaluate(EvalConfig(policy=spec, opponent="scripted", matches=args.matches, seed=args.seed,
                                     deterministic=deterministic, workers=args.workers), progress=False)
        s = report.summary()
        wld = f"{s['wins']}/{s['losses']}/{s['draws']}"
        print(f"{label:<28} {s['win_rate']:>8.0%} {wld:>10} {s['mean_damage_dealt']:>7.1f} "
              f"{s['mean_damage_taken']:>7.1f} {s['seconds']:>6.0f}")


if __name__ == "__main__":
    main()
