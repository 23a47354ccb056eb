"""Run a function over episodes in K worker processes, or on a Ray cluster's actors, with a progress
display; results in order."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator, Sequence

from wantofight.cluster import Cluster
from wantofight.interrupts import workers_ignore_ctrl_c
from wantofight.progress import Progress


def map_ordered(fn: Callable, arg_tuples: Sequence[tuple], workers: int, label: str, progress: bool = True,
                cluster: Cluster | None = None, warn: Callable[[str], None] | None = None) -> list:
    """`[fn(*args) for args in arg_tuples]`, computed by `workers` processes (spawned: no forked
    Arrow threads) or, given a `cluster` (or a `shared_workers` pool), by its Ray actors (`warn` hears
    each retry); returned in input order whatever order they finish in. Each call's first argument
    names its unit in messages.

    On Ctrl-C the workers are ended at once (their episode's files are written atomically, so an
    unfinished one leaves nothing) and KeyboardInterrupt is raised."""
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if cluster is not None:
        return _map_on_ray(fn, arg_tuples, cluster, label, progress, warn)
    results: list = [None] * len(arg_tuples)
    with Progress(label, len(arg_tuples), "episodes", enabled=progress) as bar:
        if workers == 1 or len(arg_tuples) <= 1:
            for i, args in enumerate(arg_tuples):
                results[i] = fn(*args)
                bar.advance()
            return results
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
        try:
            with workers_ignore_ctrl_c():  # the pool starts its processes as work is submitted
                futures = {pool.submit(fn, *args): i for i, args in enumerate(arg_tuples)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.advance()
        except BaseException:
            _end_now(pool)
            raise
        pool.shutdown()
    return results


def _end_now(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued work and end the running workers (shutdown alone would wait for them)."""
    # ProcessPoolExecutor.terminate_workers() does this from Python 3.14 on; until then the processes
    # are only reachable as `_processes`.
    processes = list((pool._processes or {}).values())
    manager = pool._executor_manager_thread
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
    # The pool's manager thread sees the ended workers and closes its wake-up pipe. Waiting for it here keeps
    # that close from racing the wake-up that Python 3.11 sends it at exit, which printed "OSError: [Errno 9]
    # Bad file descriptor" after the one-line stop message now and then (the wake-up checks "closed" and writes
    # without a lock in 3.11's concurrent.futures.process._ThreadWakeup).
    if manager is not None:
        manager.join(timeout=5)


@contextmanager
def shared_workers(cluster: Cluster | None, warn: Callable[[str], None] | None = None) -> Iterator:
    """For a command that maps over episodes more than once (build-curriculum: plan, then cut): one
    set of Ray actors for every `map_ordered(..., cluster=<this>)` in the block, started by the first
    (each start costs a second or more). Without a cluster, None: local workers as usual."""
    if cluster is None:
        yield None
        return
    from wantofight.cluster import RayPool, say

    with RayPool(cluster, warn=warn or say) as pool:
        yield pool


def _map_on_ray(fn: Callable, arg_tuples: Sequence[tuple], cluster, label: str, progress: bool, warn) -> list:
    """On a Cluster's new actors, or on a `shared_workers` pool's (started here if it is not yet)."""
    from wantofight.cluster import RayPool, say

    results: list = [None] * len(arg_tuples)
    if not arg_tuples:
        return results
    with ExitStack() as stack:
        pool = cluster if isinstance(cluster, RayPool) else stack.enter_context(RayPool(cluster, warn=warn or say))
        if not pool.started:
            pool.start(len(arg_tuples))
        pool.retried.clear()  # the summary names this call's retries
        with Progress(label, len(arg_tuples), "episodes", enabled=progress) as bar:
            for i, result in pool.imap(fn, arg_tuples, [str(args[0]) for args in arg_tuples]):
                results[i] = result
                bar.advance()
        say(pool.summary(label, len(arg_tuples), "episodes"))
    return results
