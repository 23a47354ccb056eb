"""`--ray` through Ray Data: a command's units as `Dataset.map_batches` over an actor pool, one batch
per unit. `wtf encode` runs here, so each actor holds one VAE (and CLIP) for all the units it runs,
on a CPU or on a GPU of its node.

    pool = DataPool(Cluster("auto"), setup=open_encoders, setup_args=(...), attempts_dir=parts / ".attempts")
    for i, result in pool.imap(encode_part, units, names):
        ...
    say(pool.summary("encode", len(units), "units"))

It keeps the contract of `cluster.RayPool` (one-line errors naming the node, `--max-retries`, a
summary of what ran again), which Ray Data does not give by itself: Ray Data restarts an actor that
died and runs its batch again without telling the driver. So each attempt first leaves a marker file
in `attempts_dir` (on the filesystem every node shares, beside the command's output): an actor that
finds a unit already tried more than `max_retries` times fails it with a line naming the node it
last died on, and the driver names the units that ran again. An error raised by the unit itself is
not retried; it comes back to the driver as a result, which stops the run and raises it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from wantofight.cluster import Cluster, ClusterError, Worker, actors_for, checked


@dataclass
class DataPool:
    """Units on a cluster's actors through Ray Data; see the module docstring."""

    cluster: Cluster
    setup: Callable
    setup_args: tuple
    attempts_dir: Path
    """Where each attempt at a unit leaves its marker: a folder every node sees at the same path."""
    warn: Callable[[str], None] | None = None
    """Hears one line per unit that ran again."""
    gpus: float = 0
    """GPUs each actor holds; 0: CPU actors."""
    cwd: str = field(default_factory=os.getcwd)
    retried: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    started: int = 0
    """Actors in the pool (the most that ran at once)."""

    def actors(self, units: int) -> int:
        """Join the cluster; how many actors run at once (cluster.actors_for)."""
        return actors_for(self.cluster, units, self.gpus)

    def imap(self, fn: Callable, units: Sequence[tuple], names: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """(index, result) of every unit (`fn(state, *unit)`), in the order they finish."""
        import ray.data

        actors = self.actors(len(units))
        if not units:
            return
        self.started = max(self.started, actors)
        quiet_ray_data()
        shutil.rmtree(self.attempts_dir, ignore_errors=True)
        self.attempts_dir.mkdir(parents=True)
        worker = unit_worker(self.setup, self.setup_args, self.cwd, fn, list(units), list(names),
                             str(self.attempts_dir), self.cluster.max_retries)
        rows = ray.data.from_items([{"i": i} for i in range(len(units))], override_num_blocks=len(units))
        rows = rows.map_batches(worker, batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=1,
                                **({"num_gpus": self.gpus} if self.gpus else {}))
        done = rows.iter_rows()
        try:
            for row in done:
                yield int(row["i"]), self._result(row, names)
        finally:
            close = getattr(done, "close", None)
            if close is not None:
                close()  # ends the execution: Ray Data stops the actors it started
            shutil.rmtree(self.attempts_dir, ignore_errors=True)

    def summary(self, label: str, units: int, unit_name: str) -> str:
        """One line for the end of a run: how many units ran where, and what was retried."""
        retried = (f"{len(self.retried)} retried after a worker died ({', '.join(sorted(set(self.retried)))})"
                   if self.retried else "none retried")
        return (f"{label} on ray: {units} {unit_name} by {self.started} worker(s) on {len(self.hosts)} node(s), "
                f"{retried}")

    def _result(self, row: dict, names: Sequence[str]) -> Any:
        where = checked(row["ready"])
        if row["retries_spent"]:
            raise ClusterError(row["retries_spent"])
        outcome = pickle.loads(row["outcome"])
        if isinstance(outcome, BaseException):
            raise outcome  # the unit's own error: its message is the one-line error
        self.hosts.add(where)
        attempt = int(row["attempt"])
        if attempt > 1:
            name = names[int(row["i"])]
            self.retried.append(name)
            if self.warn is not None:
                self.warn(f"{name} ran again on {where} after its worker on {row['died_on']} died "
                          f"(retry {attempt - 1} of {self.cluster.max_retries})")
        return outcome


def unit_worker(setup: Callable, setup_args: tuple, cwd: str, fn: Callable, units: list, names: list,
                attempts_dir: str, max_retries: int) -> type:
    """The actor class Ray Data starts: a `cluster.Worker` (the setup, in the driver's working folder)
    that runs one unit per batch and returns a row saying what happened."""

    class UnitWorker:
        def __init__(self) -> None:
            self.worker = Worker(setup, setup_args, cwd)
            self.ready = self.worker.ready()
            self.where = self.ready["where"]

        def __call__(self, batch: dict) -> dict:
            import numpy as np

            i = int(batch["i"][0])
            row = {"i": i, "ready": self.ready, "retries_spent": "", "attempt": 0, "died_on": "",
                   "outcome": pickle.dumps(None)}
            if not self.worker.error:
                tried = sorted(Path(attempts_dir).glob(f"{i}.*"), key=lambda p: p.stat().st_mtime)
                died_on = tried[-1].name.split(".", 2)[2].rsplit(".", 1)[0] if tried else ""
                row.update(attempt=len(tried) + 1, died_on=died_on)
                if len(tried) > max_retries:
                    row["retries_spent"] = (f"{names[i]} was not finished: its worker died {len(tried)} time(s), the "
                                            f"last on {died_on} (--max-retries {max_retries}); the finished ones "
                                            "are kept")
                else:
                    (Path(attempts_dir) / f"{i}.{uuid.uuid4().hex[:8]}.{self.where}.{os.getpid()}").touch()
                    try:
                        row["outcome"] = pickle.dumps(fn(self.worker.state, *units[i]))
                    except Exception as err:  # not retried: it would fail again
                        row["outcome"] = _pickled_error(err)
            return {k: np.array([v], dtype=object) for k, v in row.items()}

    return UnitWorker


def quiet_ray_data() -> None:
    """Ray Data's own progress bars off (the command draws one bar for the whole job) and its log lines
    (an execution's start, plan and end) to its log file only, at INFO; its errors still reach the terminal."""
    import logging

    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    for handler in logging.getLogger("ray.data").handlers:
        if type(handler).__name__ != "SessionFileHandler":
            handler.setLevel(logging.ERROR)


def _pickled_error(err: Exception) -> bytes:
    try:
        return pickle.dumps(err)
    except Exception:  # an exception that does not pickle still reaches the driver as its message
        return pickle.dumps(RuntimeError(f"{type(err).__name__}: {err}"))

