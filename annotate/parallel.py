"""Run a function over episodes in K worker processes with a rich progress bar; results in order."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence


def map_ordered(fn: Callable, arg_tuples: Sequence[tuple], workers: int, label: str, progress: bool = True) -> list:
    """`[fn(*args) for args in arg_tuples]`, computed by `workers` processes (spawned: no forked
    Arrow threads), returned in input order whatever order they finish in."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    results: list = [None] * len(arg_tuples)
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("episodes"),
               TimeElapsedColumn())
    with Progress(*columns, disable=not progress) as bar:
        task = bar.add_task(label, total=len(arg_tuples))
        if workers == 1 or len(arg_tuples) <= 1:
            for i, args in enumerate(arg_tuples):
                results[i] = fn(*args)
                bar.advance(task)
            return results
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(fn, *args): i for i, args in enumerate(arg_tuples)}
            from concurrent.futures import as_completed

            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.advance(task)
    return results
