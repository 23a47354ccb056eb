"""95% intervals over cases for the report's rates (docs/benchmark.md, "How much a figure means").

    wilson(7, 20)                               # (0.18, 0.57): a share of cases (identity binding)
    bootstrap(values)                           # a mean over cases (action following, both fighters found)
    paired_bootstrap(ratio, model, emulator)    # a figure of several variants on the same cases (a gain)

Binding is a count of cases, so its interval is Wilson's score interval. A following share is a mean
of per-case shares, whose spread is not binomial: its interval is a percentile bootstrap over cases,
BOOTSTRAP_DRAWS resamples with a fixed seed, so the same cases always give the same interval. A
figure that combines variants (the gain over the first frame) resamples the cases jointly: each draw
keeps a case for every variant or for none.
"""

from __future__ import annotations

import math

import numpy as np

Z95 = 1.959964
BOOTSTRAP_DRAWS = 2000
SEED = 0
CHANCE = 0.5
"""Identity binding by chance: a model that ignores who pressed what binds a case half the time."""


def wilson(successes: int, n: int) -> tuple[float, float] | None:
    """Wilson's 95% score interval of a proportion (None for no cases)."""
    if n <= 0:
        return None
    p, z2 = successes / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def cases_to_exclude_chance() -> int:
    """The fewest cases whose interval can exclude CHANCE at all: even with every case bound, fewer
    cases leave an interval that reaches down to it (4 for 50%)."""
    n = 1
    while wilson(n, n)[0] <= CHANCE:
        n += 1
    return n


def bootstrap(values, draws: int = BOOTSTRAP_DRAWS) -> tuple[float, float] | None:
    """Percentile 95% interval of the mean of per-case values (None where missing; None for no cases)."""
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if not len(values):
        return None
    idx = np.random.default_rng(SEED).integers(0, len(values), (draws, len(values)))
    means = values[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired_bootstrap(figure, *columns, draws: int = BOOTSTRAP_DRAWS) -> tuple[float, float] | None:
    """Percentile 95% interval of `figure(mean of column 1, mean of column 2, ...)`, the columns being
    per-case values of the same cases in the same order; draws where the figure is undefined (None)
    are left out, and no interval is given when more than half are."""
    cols = [np.asarray(c, dtype=np.float64) for c in columns]
    if not cols or not len(cols[0]):
        return None
    idx = np.random.default_rng(SEED).integers(0, len(cols[0]), (draws, len(cols[0])))
    got = [figure(*(c[i].mean() for c in cols)) for i in idx]
    got = np.asarray([g for g in got if g is not None and np.isfinite(g)])
    if len(got) < draws / 2:
        return None
    return float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5))
