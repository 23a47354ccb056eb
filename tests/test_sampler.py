"""CurriculumSchedule and CurriculumSampler: tiers per step, rank shares, determinism, resume."""

from __future__ import annotations

import itertools

import pytest

from wantofight.datasets.sampler import CurriculumSampler, CurriculumSchedule

PAPER = [
    {"until": 100, "weights": {"single-action": 1.0}},
    {"until": 300, "weights": {"single-action": 0.5, "dual-action": 0.5}},
    {"until": None, "weights": {"full-match": 0.8, "single-action": 0.1, "dual-action": 0.1}},
]
ITEMS = ["single-action"] * 12 + ["dual-action"] * 7 + ["full-match"] * 8


def run(sampler: CurriculumSampler, steps: int) -> list[list]:
    return list(itertools.islice(iter(sampler), steps))


def test_schedule_validates_round_trips_and_gives_weights():
    schedule = CurriculumSchedule(PAPER)
    assert CurriculumSchedule.from_dict(schedule.to_dict()) == schedule
    assert schedule.weights_at(0) == {"single-action": 1.0} and schedule.weights_at(99) == {"single-action": 1.0}
    assert schedule.weights_at(100) == {"single-action": 0.5, "dual-action": 0.5}
    assert schedule.weights_at(10**9)["full-match"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="valid tiers"):
        CurriculumSchedule([{"until": None, "weights": {"boss-fight": 1}}])
    with pytest.raises(ValueError, match="until=None"):
        CurriculumSchedule([{"until": 10, "weights": {"single-action": 1}}])
    with pytest.raises(ValueError, match="greater than 10"):
        CurriculumSchedule([{"until": 10, "weights": {"single-action": 1}}, {"until": 5, "weights": {"single-action": 1}},
                            {"until": None, "weights": {"single-action": 1}}])
    with pytest.raises(ValueError, match="positive sum"):
        CurriculumSchedule([{"until": None, "weights": {"single-action": 0}}])


def test_a_tier_missing_from_the_data_is_an_error_naming_it():
    with pytest.raises(ValueError, match="dual-action"):
        CurriculumSampler(["single-action", "full-match"], CurriculumSchedule(PAPER), batch_size=2)
    with pytest.raises(ValueError, match="dual-action \\(7\\).*8"):
        CurriculumSampler(ITEMS, CurriculumSchedule(PAPER), batch_size=4, world_size=2)


def test_the_schedule_yields_the_right_tiers_at_the_right_steps():
    sampler = CurriculumSampler(ITEMS, CurriculumSchedule(PAPER), batch_size=4, seed=3)
    batches = run(sampler, 1300)
    tiers = [{ITEMS[i] for i, _ in batch} for batch in batches]
    assert all(len(t) == 1 for t in tiers)  # one tier per step
    tiers = [t.pop() for t in tiers]
    assert set(tiers[:100]) == {"single-action"}
    assert set(tiers[100:300]) == {"single-action", "dual-action"} and 60 < tiers[100:300].count("dual-action") < 140
    late = tiers[300:]
    assert 0.7 < late.count("full-match") / len(late) < 0.9 and "single-action" in late and "dual-action" in late
    assert [step for batch in batches[:3] for _, step in batch] == [0] * 4 + [1] * 4 + [2] * 4
    assert all(len(b) == 4 for b in batches) and sampler.step == 1300


def test_two_ranks_get_disjoint_shares_that_cover_the_split():
    schedule = CurriculumSchedule.constant({"single-action": 1, "dual-action": 1, "full-match": 1})
    ranks = [CurriculumSampler(ITEMS, schedule, batch_size=2, seed=9, rank=r, world_size=2, pairs=False)
             for r in range(2)]
    steps = 60
    seen = [run(r, steps) for r in ranks]
    tiers_of = [[ITEMS[b[0]] for b in s] for s in seen]
    assert tiers_of[0] == tiers_of[1]  # every rank draws the same tier at every step
    for a, b in zip(*seen):
        assert not set(a) & set(b)  # disjoint at every step
    # Within one pass over a tier the two ranks together see each of its clips at most once: all of
    # them where the global batch (4) divides the tier (single 12, full 8); 4 of dual's 7, then a
    # new pass in another order.
    for tier, size in (("single-action", 12), ("dual-action", 4), ("full-match", 8)):
        stream = [i for a, b in zip(*seen) if ITEMS[a[0]] == tier for i in a + b]
        assert len(stream) >= 2 * size
        assert len(set(stream[:size])) == size and len(set(stream[size:2 * size])) == size
        if size == ITEMS.count(tier):
            assert sorted(stream[:size]) == [i for i, t in enumerate(ITEMS) if t == tier]
        assert set(stream) == {i for i, t in enumerate(ITEMS) if t == tier}  # leftovers come in later passes


def test_the_same_seed_gives_the_same_sequence_and_another_seed_another():
    schedule = CurriculumSchedule(PAPER)
    first = run(CurriculumSampler(ITEMS, schedule, 3, seed=1), 400)
    assert run(CurriculumSampler(ITEMS, schedule, 3, seed=1), 400) == first
    assert run(CurriculumSampler(ITEMS, schedule, 3, seed=2), 400) != first


def test_resume_at_step_k_continues_the_same_sequence():
    schedule = CurriculumSchedule(PAPER)
    whole = run(CurriculumSampler(ITEMS, schedule, 3, seed=5, rank=1, world_size=2), 500)
    assert run(CurriculumSampler(ITEMS, schedule, 3, seed=5, rank=1, world_size=2, start_step=257), 243) == whole[257:]
    trained = CurriculumSampler(ITEMS, schedule, 3, seed=5, rank=1, world_size=2)
    run(trained, 300)  # a DataLoader prefetched past the last trained step
    state = trained.state_dict(step=120)
    fresh = CurriculumSampler(ITEMS, schedule, 3, seed=5, rank=1, world_size=2)
    fresh.load_state_dict(state)
    assert fresh.step == 120 and run(fresh, 380) == whole[120:]
    other = CurriculumSampler(ITEMS, schedule, 3, seed=6)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)
    bounded = CurriculumSampler(ITEMS, schedule, 3, seed=5, start_step=10, max_steps=15)
    assert len(bounded) == 5 and len(list(bounded)) == 5
