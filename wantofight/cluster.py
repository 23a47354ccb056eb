"""`--ray ADDRESS`: the long commands' per-unit work on the actors of a Ray cluster instead of local processes.

    with RayPool(Cluster("auto"), setup=open_recorder, setup_args=(...)) as pool:
        pool.start(len(units))                       # every actor is set up before anything is written
        for i, result in pool.imap(record_episode, units, names):
            ...

A command's unit (one episode to record, annotate or cut) runs through the same function as on
local workers (`encode` runs its units on Ray Data instead, with the same contract: cluster_data.py).
An actor is a long-lived worker process that builds its `setup` (an emulator) once and keeps it for
every unit it runs, as a local worker does. A unit whose actor dies (its node left, it was killed)
runs again on another actor, up to `max_retries` times, so units must be idempotent: the commands
publish each result by one rename that a second attempt cannot repeat.
An exception raised by the unit itself is not retried (it would fail again): the pool lets the units
in flight finish, then raises it.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from wantofight import __version__

DEFAULT_RAY_PORT = 6379
CONNECT_TIMEOUT_S = 5.0
WAIT_S = 1.0
"""How long the driver blocks in ray.wait at a time (Ctrl-C is seen between waits)."""
KILL_WAIT_S = 5.0
"""How long `close` waits for the actors it ended to be gone."""


class ClusterError(RuntimeError):
    """No cluster to run on, or a worker that cannot run the job; the message says which and why."""


@dataclass(frozen=True)
class Cluster:
    """Where a command's units run when they do not run on this machine's processes."""

    address: str
    """`HOST:PORT` of the head node (`ray start --head` prints it), `auto` (the cluster this machine
    joined with `ray start`) or `local` (a one-machine cluster started inside this process)."""
    workers: int | None = None
    """Actors at once (one CPU each); None: one per CPU of the cluster."""
    max_retries: int = 3
    """Times a unit is run again after the actor running it died."""

    def __post_init__(self) -> None:
        if not self.address:
            raise ClusterError("--ray needs an address: HOST:PORT of the head node, auto or local")
        if self.workers is not None and self.workers < 1:
            raise ClusterError(f"--workers must be at least 1, got {self.workers}")
        if self.max_retries < 0:
            raise ClusterError(f"--max-retries must be at least 0, got {self.max_retries}")


def connect(cluster: Cluster) -> None:
    """Join (or, for `local`, start) the cluster once per process; later calls reuse the connection."""
    import ray  # not installed: the CLI names the [ray] extra

    if cluster.address not in ("auto", "local"):
        check_reachable(cluster.address)
    if ray.is_initialized():
        return
    options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    # Ray core's C++ logger in this process prints to stderr. At ERROR it says, at every start of a Ray Data
    # actor (restartable, as a retried unit needs), that the actor's arguments live in the object store: not
    # an error for a run that holds them to its end. Only its fatal lines, then (set it to see more).
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    if cluster.address == "local":
        options["include_dashboard"] = False
        # Ray starts its workers at nice 15 (raylet's worker_niceness) so its daemons stay responsive on a
        # cluster node; on one shared machine that makes `--ray local` lose every core to any other job,
        # where `--workers` processes run at the caller's priority. Same priority as --workers.
        options["_system_config"] = {"worker_niceness": 0}
    try:
        with quiet_stderr():  # Ray's C++ core prints a warning a second while it cannot find the head
            ray.init(address=cluster.address, **options)  # "local": always a new one-machine cluster
    except (ConnectionError, RuntimeError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ClusterError(f"cannot join a Ray cluster at {cluster.address!r}: {first}") from None


def check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, when nothing answers at `address` (ray.init waits long and
    prints a warning a second before it gives up)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host:
        host, port = port, str(DEFAULT_RAY_PORT)
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except ValueError:
        raise ClusterError(f"--ray {address!r}: expected HOST:PORT, auto or local") from None
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else err.strerror or type(err).__name__
        raise ClusterError(f"cannot reach a Ray cluster at {address} ({reason}); start one with "
                           "`ray start --head` or check the address") from None


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send what this process (and its native code) writes to file descriptor 2 nowhere for a while."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def actors_for(cluster: Cluster, units: int, gpus: float = 0) -> int:
    """Join the cluster; how many actors run at once: one per CPU (or per `gpus` GPUs each), at most
    `--workers` and one per unit. Asking for GPUs from a cluster without them is a ClusterError."""
    connect(cluster)
    slots = cluster_cpus()
    if gpus:
        if cluster_gpus() < gpus:
            raise ClusterError(f"the Ray cluster at {cluster.address} has no GPU (its nodes offer "
                               f"{cluster_gpus():g}); use --device cpu, or start the nodes with GPUs")
        slots = min(slots, int(cluster_gpus() // gpus))
    return min(cluster.workers or slots, slots, max(units, 1))


def cluster_gpus() -> float:
    """GPUs the cluster's nodes offer (0 on CPU-only nodes)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0))


# -------------------------------------------------------------------------------------------------
# The actor


class Worker:
    """One Ray actor: builds `setup(*setup_args)` once; runs units with it (`fn(state, *unit)`), or
    without it (`fn(*unit)`) when there is no setup. A setup that fails is reported by `ready()`.

    It works in the driver's working folder, so the paths a user typed (relative ones too) mean the
    same on every node: the data lives on a filesystem each node mounts at the same place."""

    def __init__(self, setup: Callable | None, setup_args: tuple, cwd: str):
        self.stateful, self.state, self.error = setup is not None, None, None
        try:
            os.chdir(cwd)
        except OSError as err:
            self.error = (f"the working folder {cwd} is not there ({err.strerror}); put the data on a "
                          "filesystem every node mounts at the same path")
            return
        try:
            self.state = setup(*setup_args) if setup is not None else None
        except Exception as err:  # reported with the node's name by the driver, as one line
            self.error = str(err) or type(err).__name__

    def ready(self) -> dict:
        """Where the actor runs, its wantofight and its setup's error (None: set up); `checked` reads it."""
        import ray

        host, ip = socket.gethostname(), ray.util.get_node_ip_address()
        return {"where": host if host == ip else f"{host} ({ip})", "version": __version__, "error": self.error}

    def run(self, fn: Callable, unit: tuple):
        return fn(self.state, *unit) if self.stateful else fn(*unit)


def checked(ready: dict) -> str:
    """The node a worker's `ready()` names, once it can run the job; else a ClusterError naming the node."""
    if ready["error"] is not None:
        raise ClusterError(f"the Ray worker on {ready['where']} cannot run this job: {ready['error']}")
    if ready["version"] != __version__:
        raise ClusterError(f"the Ray worker on {ready['where']} has wantofight {ready['version']}, this machine "
                           f"{__version__}: install the same version on every node")
    return ready["where"]


# -------------------------------------------------------------------------------------------------
# The driver


@dataclass
class _Actor:
    handle: Any
    where: str = "a node not yet known"
    unit: int | None = None


@dataclass
class RayPool:
    """Actors on a cluster that run a command's units; see the module docstring."""

    cluster: Cluster
    setup: Callable | None = None
    setup_args: tuple = ()
    warn: Callable[[str], None] | None = None
    """Hears one line per retry."""
    gpus: float = 0
    """GPUs each actor holds (Ray gives it those, as CUDA_VISIBLE_DEVICES, so `cuda` in the actor is its
    own); 0: CPU actors."""
    cwd: str = field(default_factory=os.getcwd)
    """The folder each actor works in: the driver's, so the paths a user typed mean the same on every node."""
    retried: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._starting: dict[Any, _Actor] = {}
        self._running: dict[Any, _Actor] = {}
        self._idle: list[_Actor] = []
        self._started = 0

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._started > 0

    def start(self, units: int) -> None:
        """Join the cluster and start one actor per worker (at most one per unit); returns once each
        is set up. A worker that cannot run the job (a game it lacks, another wantofight) is a
        ClusterError naming its node."""
        import ray

        self._remote = ray.remote(num_cpus=1, num_gpus=self.gpus, max_restarts=0)(Worker)
        for _ in range(actors_for(self.cluster, units, self.gpus)):
            self._spawn()
        while self._starting:
            self._wait_ready()

    def imap(self, fn: Callable, units: Sequence[tuple], names: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """(index, result) of every unit, in the order they finish."""
        import ray

        todo = deque(range(len(units)))
        tries = [0] * len(units)
        failure: BaseException | None = None

        def give(actor: _Actor) -> None:
            if todo and failure is None:
                actor.unit = todo.popleft()
                self._running[actor.handle.run.remote(fn, units[actor.unit])] = actor
            else:
                self._idle.append(actor)

        while (todo and failure is None) or self._running:
            if self._starting:
                self._wait_ready(timeout=0 if self._running else WAIT_S)
            for actor in self._take_idle():
                give(actor)
            if not self._running:
                if not self._starting and todo and failure is None:
                    self._spawn()  # every actor died: start a new one (it waits for a free CPU)
                continue
            done, _ = ray.wait(list(self._running), num_returns=1, timeout=WAIT_S)
            if not done:
                continue
            actor = self._running.pop(done[0])
            i = actor.unit
            try:
                result = ray.get(done[0])
            except _lost_actor_errors() as err:
                tries[i] += 1
                note = (f"the worker on {actor.where} died while running {names[i]} ({_reason(err)}); "
                        f"running it again (retry {tries[i]} of {self.cluster.max_retries})")
                if tries[i] > self.cluster.max_retries:
                    failure = failure or ClusterError(
                        f"{names[i]} was not finished: its worker died {tries[i]} time(s), the last on {actor.where} "
                        f"({_reason(err)}; --max-retries {self.cluster.max_retries}); the finished ones are kept")
                else:
                    todo.appendleft(i)
                    self.retried.append(names[i])
                    if self.warn is not None:
                        self.warn(note)
                    self._spawn()  # a replacement, placed wherever the cluster has a free CPU
                continue
            except ray.exceptions.RayTaskError as err:
                failure = failure or _unwrap(err)
                self._idle.append(actor)
                continue
            yield i, result
            give(actor)
        if failure is not None:
            raise failure

    def summary(self, label: str, units: int, unit_name: str) -> str:
        """One line for the end of a run: how many units ran where, and what was retried."""
        retried = (f"{len(self.retried)} retried after a worker died ({', '.join(sorted(set(self.retried)))})"
                   if self.retried else "none retried")
        return (f"{label} on ray: {units} {unit_name} by {self._started} worker(s) on {len(self.hosts)} node(s), "
                f"{retried}")

    def close(self) -> None:
        """End every actor and wait (at most KILL_WAIT_S) until they are gone, so that what they left
        half-written (temporary files only) can be removed without one still writing into it."""
        import ray

        actors = [*self._starting.values(), *self._running.values(), *self._idle]
        for actor in actors:
            ray.kill(actor.handle, no_restart=True)
        self._starting, self._running, self._idle = {}, {}, []
        if actors:  # a call on a killed actor fails once it has exited
            pending = [actor.handle.ready.remote() for actor in actors]
            deadline = time.monotonic() + KILL_WAIT_S
            while pending and time.monotonic() < deadline:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=max(0.0, deadline - time.monotonic()))

    # ---------------------------------------------------------------------------------------------

    def _spawn(self) -> None:
        actor = _Actor(self._remote.remote(self.setup, self.setup_args, self.cwd))
        self._starting[actor.handle.ready.remote()] = actor
        self._started += 1

    def _take_idle(self) -> list[_Actor]:
        idle, self._idle = self._idle, []
        return idle

    def _wait_ready(self, timeout: float = WAIT_S) -> None:
        """Move actors that finished their setup to the idle list; a failed setup raises ClusterError."""
        import ray

        done, _ = ray.wait(list(self._starting), num_returns=len(self._starting), timeout=timeout)
        for ref in done:
            actor = self._starting.pop(ref)
            try:
                info = ray.get(ref)
            except _lost_actor_errors():
                self._spawn()  # its node went away before it was set up
                continue
            try:
                actor.where = checked(info)
            except ClusterError:
                self.close()
                raise
            self.hosts.add(actor.where)
            self._idle.append(actor)


def _lost_actor_errors() -> tuple[type[BaseException], ...]:
    """What a unit meets when its actor or node went away, rather than raising itself."""
    from ray import exceptions as e

    return tuple(getattr(e, name) for name in ("RayActorError", "WorkerCrashedError", "NodeDiedError",
                                               "ObjectLostError") if hasattr(e, name))


def _reason(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return type(err).__name__ + (f": {text[0][:120]}" if text else "")


def _unwrap(err) -> BaseException:
    """The unit's own exception (its message is the one-line error), with Ray's remote traceback as cause."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        cause.__cause__ = err
        return cause
    return err


def say(line: str) -> None:
    """Print a line to stderr beside the progress display."""
    print(line, file=sys.stderr, flush=True)
