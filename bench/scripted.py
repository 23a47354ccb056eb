"""How strong is the scripted match AI? Win rates from both sides, measured side by side in one run.

    python bench/scripted.py [--matches 32] [--before REV] [--workers 2] [--seed 0]

Plays --matches whole matches (state Start, --fps 30 decisions, half as P1 and half as P2) of the
scripted AI against: the `random` collect policy; the `mash` policy (walks
at the foe, presses A or B on most rows); and an untrained PPO network (`wtf agents train`'s step-0
checkpoint: near-uniform actions on every row; needs the [ppo] extra, skipped without it). With
--before REV it also plays the `Scripted` of git revision REV, so one run
prints before and after. Match i of each pairing uses the seed `match_seed(seed, i)`, the same for
every AI, so the two are measured on the same episodes' opponent draws.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scripted_at(rev: str):
    """The `Scripted` class at git revision `rev`: collect/scripted.py, or collect/policies.py before
    the AI had its own module."""
    for path in ("collect/scripted.py", "collect/policies.py"):
        shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0 and "class Scripted" in shown.stdout:
            break
    else:
        raise SystemExit(f"error: no Scripted class at revision {rev}")
    module = types.ModuleType(f"scripted_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(shown.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module.Scripted


def build(name: str, before: str | None, ppo_path: str | None):
    """A fresh policy for one match."""
    from wantofight.collect.policies import RandomButtons, make_policy
    from wantofight.collect.scripted import Scripted

    if name == "scripted":
        return Scripted()
    if name == "scripted-before":
        return scripted_at(before)()
    if name == "random":
        return RandomButtons()
    if name == "masher":
        return make_policy("mash")
    return make_policy(f"ppo:{ppo_path}")


_match = None


def play(job: tuple) -> tuple:
    """(ai, opponent, side, index, ...) → (ai, opponent, side, result, dealt, taken, moves): one whole match."""
    global _match
    from wantofight.collect.agents import match_seed
    from wantofight.collect.fight_env import Match, Tally
    from wantofight.collect.game_registry import resolve_game
    from wantofight.collect.policies import PlayerContext
    from wantofight.collect.recorder import player_seeds

    ai, opponent, side, index, seed, before, ppo_path = job
    if _match is None:
        if importlib.util.find_spec("torch") is not None:
            import torch

            torch.set_num_threads(1)  # the other worker owns the other core
        _match = Match(resolve_game("duel"), frame_skip=2, states=("Start",))
    policies = [build(ai, before, ppo_path), build(opponent, before, ppo_path)]
    if side == 1:
        policies.reverse()
    episode_seed = match_seed(seed, index)
    for p, (policy, player_seed) in enumerate(zip(policies, player_seeds(episode_seed))):
        policy.reset(PlayerContext(player=p, game=_match.game, seed=player_seed, episode_seed=episode_seed))
    tally = Tally(side)
    ram, t = _match.start("Start"), 0
    while not _match.done() and t < 10_000:
        t += 1
        prev, ram = ram, _match.advance(tuple(int(policy.act(ram, t)) for policy in policies))
        tally.update(prev, ram)
    result = tally.result(ram) if _match.done() else "draw"
    return ai, opponent, side, result, tally.dealt, tally.taken, tally.moves


def untrained_ppo(folder: Path) -> Path:
    """An untrained PPO network, as `wtf agents train` saves at step 0."""
    from stable_baselines3 import PPO

    from wantofight.collect.agents import TrainConfig, save_model
    from wantofight.collect.fight_env import FightEnv

    config = TrainConfig()
    model = PPO("MlpPolicy", FightEnv(config.env_config()), seed=config.seed, device="cpu",
                policy_kwargs={"net_arch": list(config.net)})
    return save_model(model, folder / "step_0000000.zip", config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matches", type=int, default=32, help="per pairing, half from each side")
    parser.add_argument("--before", default=None, help="also play the Scripted of this git revision")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from wantofight.collect.game_registry import resolve_game

    ais = (["scripted-before"] if args.before else []) + ["scripted"]
    opponents = ["random", "masher"]
    with tempfile.TemporaryDirectory() as tmp:
        ppo_path = None
        if importlib.util.find_spec("stable_baselines3") is not None:
            ppo_path = str(untrained_ppo(Path(tmp)))
            opponents.append("untrained PPO")
        jobs = [(ai, opp, index % 2, index, args.seed, args.before, ppo_path)
                for ai in ais for opp in opponents for index in range(args.matches)]
        started = time.perf_counter()
        with mp.get_context("spawn").Pool(args.workers) as pool:
            results = pool.map(play, jobs, chunksize=1)
        seconds = time.perf_counter() - started

    label = {"scripted-before": f"scripted @ {args.before}", "scripted": "scripted (this tree)"}
    print(f"{args.matches} whole matches per pairing (state Start, --fps 30, seed {args.seed}, half as P1, half as P2); "
          f"{len(jobs)} matches in {seconds:.0f} s on {args.workers} workers")
    print(f"{'AI':<24} {'opponent':<14} {'win rate':>8} {'W/L/D':>9} {'as P1':>6} {'as P2':>6} {'dealt':>6} {'taken':>6}")
    for ai in ais:
        for opp in opponents:
            rows = [r for r in results if r[0] == ai and r[1] == opp]
            wins = [sum(r[3] == "win" for r in rows if r[2] == side) for side in (0, 1)]
            per_side = [sum(r[2] == side for r in rows) for side in (0, 1)]
            losses, draws = (sum(r[3] == kind for r in rows) for kind in ("loss", "draw"))
            wld = f"{sum(wins)}/{losses}/{draws}"
            dealt = sum(r[4] for r in rows) / len(rows)
            taken = sum(r[5] for r in rows) / len(rows)
            print(f"{label[ai]:<24} {opp:<14} {sum(wins) / len(rows):>8.0%} {wld:>9} "
                  f"{wins[0]:>3}/{per_side[0]:<2} {wins[1]:>3}/{per_side[1]:<2} {dealt:>6.1f} {taken:>6.1f}")
    print("\nmoves each AI started, share over all its matches:")
    names = {m["id"]: m["name"] for m in resolve_game("duel").info["moves"]}
    for ai in ais:
        used = Counter()
        for r in results:
            if r[0] == ai:
                used.update(r[6])
        total = sum(used.values()) or 1
        print(f"{label[ai]:<24} " + ", ".join(f"{names[i]} {n / total:.0%}" for i, n in sorted(used.items())))


if __name__ == "__main__":
    main()
