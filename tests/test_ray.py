"""`--ray`: the same runs on a real local Ray cluster (a head and worker nodes, one CPU each).

Byte for byte the local run's episodes, dataset and latent cache; a worker node killed mid-collection loses only
its unfinished episode, which is retried (or, with --max-retries 0, left to --resume); bad
addresses and workers without the game are one-line errors that write nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wantofight.cli import app
from wantofight.cluster import Cluster
from wantofight.collect import episode_files
from wantofight.collect.run import CollectError, RunSettings, collect

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster as LocalCluster  # noqa: E402

pytestmark = pytest.mark.slow
runner = CliRunner()
# Tell the driver a node is gone within ~2 s of its raylet dying (Ray's default waits ~30 s).
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
KILLED_RUN = dict(policy="random", episodes=5, max_frames=400, fps=60, seed=11)


@pytest.fixture(scope="module")
def cluster():
    """A head and one worker node, each with one CPU; the test process is the driver."""
    local = LocalCluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": HEALTH})
    local.add_node(num_cpus=1)
    ray.init(address=local.address, log_to_driver=False)
    yield local
    ray.shutdown()
    local.shutdown()


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def invoke(*args: str):
    result = runner.invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result


# ---------------------------------------------------------------------------------------------
# The same bytes as the local run


@pytest.fixture
def one_torch_thread():
    """This process's torch on one thread for the test, as a one-CPU Ray actor's."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_ray_collect_build_curriculum_and_encode_equal_the_local_run(cluster, tmp_path, monkeypatch, one_torch_thread):
    """Relative paths on purpose: actors work in the driver's folder, as on a shared filesystem. The local
    run encodes with one torch thread, as each one-CPU actor does: float32 convolutions sum in an order
    that depends on the thread count (docs/scaling.md)."""
    from wantofight.datasets import latent_cache

    monkeypatch.setattr(latent_cache, "UNIT_WINDOWS", 2)  # several units of 2 windows, one batch each
    record = ["collect", "--policy", "scripted", "--p2-policy", "random", "--episodes", "2", "--max-frames", "90",
              "--seed", "4", "--out", "run"]
    build = ["build-curriculum", "run", "--out", "ds", "--clip-frames", "17", "--stride", "8", "--val-fraction", "0.5"]
    encode = ["encode", "ds", "--out", "latents", "--vae", "tiny", "--frames", "9", "--size", "16x32",
              "--ref-size", "32", "--batch-size", "2"]
    for where, extra in (("local", ["--workers", "2"]), ("ray", ["--ray", cluster.address])):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        result = invoke(*record, *extra)
        if where == "ray":
            assert "collect on ray: 2 episodes by 2 worker(s) on" in result.output
        invoke(*build, *extra)
        result = invoke(*encode, *(extra if where == "ray" else []))
        if where == "ray":
            assert "units by 2 worker(s) on" in result.output
    local, remote = files_of(tmp_path / "local"), files_of(tmp_path / "ray")
    assert sorted(remote) == sorted(local)
    assert {"run/episodes/ep000001/inputs.bk2", "ds/manifest.json", "ds/full-match/val-00000.parquet",
            "run/episodes/ep000000/annotation.json", "latents/manifest.json", "latents/full-match/train-00000.parquet",
            } <= set(local)
    assert json.loads(local["latents/manifest.json"])["counts"]["full-match"]["train"] > 2  # more than one unit
    for name in local:
        if name == "latents/manifest.json":  # names its source by absolute path: .../local/ds, .../ray/ds
            local[name], remote[name] = (local[name].replace(str(tmp_path / "local").encode(), b""),
                                         remote[name].replace(str(tmp_path / "ray").encode(), b""))
        assert remote[name] == local[name], name


# ---------------------------------------------------------------------------------------------
# A worker node dies mid-collection


def in_flight_on(node, episodes_dir: Path) -> list[str]:
    """Episodes being written by a worker process of `node` (their temporary folder names its pid)."""
    raylet = node.all_processes["raylet"][0].process.pid
    ids = []
    for tmp in episodes_dir.glob(f"{episode_files.TMP_PREFIX}*"):
        pid = int(tmp.name.rsplit("-", 1)[1])
        if parent_pid(pid) == raylet:
            ids.append(tmp.name.split("-")[1])
    return ids


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def collect_and_kill_a_node(cluster, out: Path, max_retries: int) -> tuple[list, list[str], str]:
    """Collect KILLED_RUN on the cluster plus a third node, and remove that node while it records.
    Returns (results or the error, the retry lines, the killed episode id)."""
    node = cluster.add_node(num_cpus=1)
    outcome, notes = [], []

    def run():
        try:
            outcome.append(collect(RunSettings(**KILLED_RUN), out, progress=False, warn=notes.append,
                                   cluster=Cluster(cluster.address, workers=3, max_retries=max_retries)))
        except CollectError as err:
            outcome.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    while not (killed := in_flight_on(node, out / "episodes")):
        assert thread.is_alive() and time.monotonic() < deadline, f"the extra node recorded nothing: {outcome}"
        time.sleep(0.02)
    cluster.remove_node(node, allow_graceful=False)
    thread.join(timeout=120)
    assert not thread.is_alive()
    return outcome[0], notes, killed[0]


def assert_complete(out: Path) -> list[str]:
    """Only whole episodes, no temporary folders; returns their ids."""
    assert not list((out / "episodes").glob(f"{episode_files.TMP_PREFIX}*"))
    ids = []
    for episode in episode_files.complete_episodes(out / "episodes"):
        meta = json.loads((episode / "meta.json").read_text())
        assert meta["frame_count"] == KILLED_RUN["max_frames"]
        assert {p.name for p in episode.iterdir()} == {"video.mp4", "frames.parquet", "meta.json", "start.state",
                                                       "inputs.bk2"}
        ids.append(episode.name)
    return ids


def test_a_killed_worker_node_loses_only_its_unfinished_episode(cluster, recorded, tmp_path):
    straight = files_of(recorded(**KILLED_RUN) / "episodes")

    # No retries: the run stops with one line naming the episode; what is there is whole; --resume completes.
    out = tmp_path / "stopped"
    error, _, killed = collect_and_kill_a_node(cluster, out, max_retries=0)
    assert isinstance(error, CollectError) and f"{killed} was not finished: its worker died 1 time(s)" in str(error)
    assert str(error).endswith("add --resume to record the rest")
    done = assert_complete(out)
    assert killed not in done and len(done) < KILLED_RUN["episodes"]
    invoke("collect", "--resume", "--episodes", str(KILLED_RUN["episodes"]), "--out", str(out), "--ray", cluster.address)
    assert assert_complete(out) == sorted(f"ep{i:06d}" for i in range(KILLED_RUN["episodes"]))
    assert files_of(out / "episodes") == straight

    # With retries: the killed node's episode runs again elsewhere and the run completes by itself.
    out = tmp_path / "retried"
    results, notes, killed = collect_and_kill_a_node(cluster, out, max_retries=3)
    assert isinstance(results, list), results
    assert any(f"while running {killed}" in note and "retry 1 of 3" in note for note in notes), notes
    assert sorted(r.episode_id for r in results) == sorted(straight_ids(straight))
    assert files_of(out / "episodes") == straight


def straight_ids(files: dict[str, bytes]) -> set[str]:
    return {name.split("/")[0] for name in files}


ENCODE = ["--vae", "tiny", "--frames", "9", "--size", "64x64", "--ref-size", "32", "--batch-size", "2", "--no-progress"]


def encode_and_kill_an_actor(ds: Path, out: Path, *args: str):
    """`wtf encode --ray` that SIGKILLs the actor running the first unit as soon as it starts it (the
    attempt's marker names the actor's pid). Returns the result and the killed unit's marker."""
    import os
    import signal

    killed: list[Path] = []

    def kill_the_first_actor():
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for marker in out.glob(".parts-*/.attempts/*"):
                os.kill(int(marker.name.rsplit(".", 1)[1]), signal.SIGKILL)
                killed.append(marker)
                break
            time.sleep(0.005)

    thread = threading.Thread(target=kill_the_first_actor)
    thread.start()
    result = runner.invoke(app, ["encode", str(ds), "--out", str(out), *ENCODE, *args])
    thread.join()
    assert killed, result.output
    return result, killed[0]


def test_an_encode_actor_killed_mid_unit_runs_it_again_and_the_cache_is_the_same(cluster, recorded, tmp_path,
                                                                                 monkeypatch, one_torch_thread):
    """Ray Data restarts the actor and runs its unit again; `--max-retries` still bounds it, per unit."""
    from wantofight.datasets import latent_cache

    monkeypatch.setattr(latent_cache, "UNIT_WINDOWS", 2)  # units of ~0.3 s: the kill lands inside one
    ds = tmp_path / "ds"
    invoke("build-curriculum", str(recorded(policy="scripted", episodes=1, max_frames=120)), "--out", str(ds),
           "--clip-frames", "33", "--stride", "16")
    invoke("encode", str(ds), "--out", str(tmp_path / "local"), *ENCODE)
    local = files_of(tmp_path / "local")
    assert json.loads(local["manifest.json"])["counts"]["full-match"]["train"] > 4  # several units

    result, marker = encode_and_kill_an_actor(ds, tmp_path / "retried", "--ray", cluster.address)
    assert result.exit_code == 0, result.output
    message = " ".join(result.output.split())
    unit = re.search(r"(full-match/(train|val)-\d{5}) ran again on .* \(retry 1 of 3\)", message)
    assert unit, message
    assert f"1 retried after a worker died ({unit[1]})" in message
    assert files_of(tmp_path / "retried") == local

    # --max-retries 0: one line naming the unit and where its worker died; the parts finished are kept,
    # the cache is not written; the same command again finishes it.
    out = tmp_path / "stopped"
    result, marker = encode_and_kill_an_actor(ds, out, "--ray", cluster.address, "--max-retries", "0")
    assert result.exit_code == 2, result.output
    died_on = marker.name.split(".", 2)[2].rsplit(".", 1)[0]
    assert re.search(r"full-match/(train|val)-\d{5} was not finished: its worker died 1 time\(s\), the last on "
                     + re.escape(f"{died_on} (--max-retries 0); the finished ones are kept"),
                     " ".join(result.output.split())), result.output
    assert not (out / "manifest.json").exists() and not list(out.glob("*/*.parquet"))
    invoke("encode", str(ds), "--out", str(out), *ENCODE[:-1], "--ray", cluster.address)
    assert files_of(out) == local


def test_a_unit_that_fails_by_itself_on_ray_data_raises_its_own_error(cluster, tmp_path):
    """Not retried (it would fail again): its exception, with its message, is the run's."""
    from wantofight.cluster_data import DataPool

    pool = DataPool(Cluster(cluster.address, workers=1), setup=int, setup_args=(5,), attempts_dir=tmp_path / "a")
    assert [r for _, r in pool.imap(divmod, [(2,)], ["one"])] == [(2, 1)]  # divmod(5, 2): state first
    with pytest.raises(ZeroDivisionError, match="integer division or modulo by zero"):
        list(pool.imap(divmod, [(2,), (0,)], ["fine", "bad"]))
    assert not (tmp_path / "a").exists()


# ---------------------------------------------------------------------------------------------
# Bad input: one line, nothing written


def test_an_unreachable_address_is_one_line_and_writes_nothing(recorded, tmp_path):
    run = recorded(policy="idle", episodes=1, max_frames=30)
    before = files_of(run)
    for command in (["collect", "--out", str(tmp_path / "run")], ["annotate", str(run)],
                    ["build-curriculum", str(run), "--out", str(tmp_path / "ds")]):
        result = runner.invoke(app, [*command, "--ray", "127.0.0.1:1"])
        assert result.exit_code == 2
        assert "cannot reach a Ray cluster at 127.0.0.1:1 (Connection refused)" in " ".join(result.output.split())
        assert len(result.output.strip().splitlines()) <= 2
    assert list(tmp_path.iterdir()) == [] and files_of(run) == before


def test_a_worker_without_the_game_is_named_and_nothing_is_written(cluster, tmp_path, monkeypatch):
    """The game is registered in this (driver) process only, as when a ROM was imported on one machine."""
    from stable_retro.data import Integrations

    from wantofight.collect.emulator import builtin_integrations, register_builtin

    shutil.copytree(builtin_integrations() / "Duel-Nes", tmp_path / "integrations" / "Lonely-Nes")
    register_builtin()
    monkeypatch.setattr(Integrations, "CUSTOM_PATHS", [*Integrations.CUSTOM_PATHS, str(tmp_path / "integrations")])
    out = tmp_path / "run"
    result = runner.invoke(app, ["collect", "--game", "Lonely-Nes", "--policy", "random", "--out", str(out),
                                 "--ray", cluster.address])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "the Ray worker on" in message and "cannot run this job: unknown game 'Lonely-Nes'" in message
    assert not out.exists()


def test_a_worker_that_cannot_see_the_working_folder_is_named(cluster, tmp_path):
    """As on a node that does not mount the driver's folder: one line naming the node and the folder, from
    the actor pool (collect, annotate, build-curriculum) and from Ray Data's (encode)."""
    from wantofight.cluster import ClusterError, RayPool
    from wantofight.cluster_data import DataPool

    missing = tmp_path / "not-mounted"
    with pytest.raises(ClusterError) as raised, RayPool(Cluster(cluster.address, workers=1), cwd=str(missing)) as pool:
        pool.start(1)
    data_pool = DataPool(Cluster(cluster.address, workers=1), setup=int, setup_args=(), cwd=str(missing),
                         attempts_dir=tmp_path / "attempts")
    with pytest.raises(ClusterError) as raised_on_data:
        list(data_pool.imap(divmod, [(1,)], ["one"]))
    for message in (str(raised.value), str(raised_on_data.value)):
        assert message.startswith("the Ray worker on ") and "\n" not in message
        assert (f"cannot run this job: the working folder {missing} is not there (No such file or directory); "
                "put the data on a filesystem every node mounts at the same path") in message


def test_ray_without_the_extra_names_it(monkeypatch, tmp_path):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a))
    result = runner.invoke(app, ["annotate", str(tmp_path), "--ray", "auto"])
    assert result.exit_code == 2
    assert 'needs ray, which comes with the [ray] extra: pip install -e ".[ray]"' in " ".join(result.output.split())


def test_encode_on_gpus_needs_a_cluster_with_gpus(cluster, recorded, tmp_path):
    """`--device cuda` gives each actor a GPU of its node; on this CPU-only cluster it is a one-line error
    that writes nothing (`auto`, the default, encodes on the CPUs: the byte-equality test above)."""
    run, ds = tmp_path / "run", tmp_path / "ds"
    shutil.copytree(recorded(policy="scripted", episodes=1, max_frames=60), run)
    invoke("build-curriculum", str(run), "--out", str(ds), "--clip-frames", "17", "--stride", "8")
    for device, expected in (("cuda", f"the Ray cluster at {cluster.address} has no GPU (its nodes offer 0); use "
                                      "--device cpu"),
                             ("cuda:1", "--device cuda:1 with --ray: use cuda")):
        out = tmp_path / f"latents-{device}"
        result = runner.invoke(app, ["encode", str(ds), "--out", str(out), "--vae", "tiny", "--frames", "9",
                                     "--size", "16x32", "--ray", cluster.address, "--device", device])
        assert result.exit_code == 2, result.output
        assert expected in " ".join(result.output.split())
        assert len(result.output.strip().splitlines()) <= 2 and not out.exists()


def test_ctrl_c_on_ray_ends_the_actors_and_keeps_only_complete_episodes(tmp_path):
    """The terminal's SIGINT during `collect --ray local`: one line, exit 130, every published episode whole
    (replay --verify), no temporary folder left, and `--resume` finishes the run."""
    from test_cli import assert_stopped_cleanly, interrupted

    from wantofight.collect.replay import verify_episode

    out = tmp_path / "run"
    # Enough work (~10 s on two actors) that the first published episode comes long before the last, on a
    # quiet machine or a loaded one: 8 short episodes all finished inside the settle time on a busy CI runner.
    episodes = 40
    args = ["collect", "--policy", "random", "--episodes", str(episodes), "--max-frames", "1200", "--fps", "60",
            "--seed", "5", "--out", str(out)]
    published = lambda: episode_files.complete_episodes(out / "episodes") if (out / "episodes").is_dir() else []  # noqa: E731
    proc, seconds = interrupted([*args, "--ray", "local", "--workers", "2"], lambda pid: len(published()) >= 1,
                                settle=0.3)
    assert_stopped_cleanly(proc, seconds, "--resume")
    kept = published()
    assert 1 <= len(kept) < episodes and not list((out / "episodes").glob(f"{episode_files.TMP_PREFIX}*"))
    assert all(verify_episode(e).ok for e in kept)
    invoke(*args, "--resume")
    assert len(published()) == episodes
