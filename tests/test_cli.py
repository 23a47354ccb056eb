"""What every `wtf` command shares: its help, `--version`, missing extras, Ctrl-C, progress without a terminal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from annotate_helpers import copy_run
from datasets_helpers import small_dataset
from wantofight import __version__
from wantofight.cli import app
from wantofight.progress import Progress

runner = CliRunner()

COMMANDS = [
    [], ["collect"], ["replay"], ["games"], ["annotate"], ["build-curriculum"], ["inspect"], ["stats"], ["browse"],
    ["query"], ["encode"], ["generate"], ["eval"], ["agents"], ["agents", "train"], ["agents", "eval"], ["model"],
    ["model", "info"], ["train"], ["train", "stage1"], ["train", "stage2"], ["train", "stage3"], ["train", "decoder"],
    ["play"],
]


# ---------------------------------------------------------------------------------------------
# Help and version


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "wtf")
def test_help_shows_no_type_tags(command):
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.output
    tags = re.findall(r"<(?:str|int|float|bool|path|list\[str\])>|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN)\b", result.output)
    assert not tags, result.output


def all_commands():
    """Every leaf command of `wtf` as (its words, its click command)."""
    import typer.main

    def walk(command, words):
        subs = getattr(command, "commands", None)
        if not subs:
            return [(words, command)]
        return [leaf for name, sub in sorted(subs.items()) for leaf in walk(sub, [*words, name])]

    return walk(typer.main.get_command(app), [])


@pytest.mark.parametrize("words", [words for words, command in all_commands()
                                   if any(p.param_type_name == "argument" for p in command.params)],
                         ids=" ".join)
def test_the_usage_line_names_the_arguments_as_the_help_does(words):
    result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    panel = result.output[result.output.index("Arguments"):result.output.index("Options")]
    names = re.findall(r"^│ [* ]\s+(\S+)", panel, re.MULTILINE)  # the argument column of the help
    assert names and "{" not in usage
    assert all(re.fullmatch(r"[A-Z][A-Z_]*(\.\.\.)?", name) for name in names), names
    assert all(name in usage for name in names), (usage, names)


def test_one_vocabulary_steps_and_device_auto_on_every_command():
    """A step count is `--steps` everywhere (`--max-steps` only as a hidden old name) and `--device`
    defaults to auto wherever a command has one."""
    options = {(" ".join(words), opt): param for words, command in all_commands() for param in command.params
               for opt in getattr(param, "opts", [])}
    visible = {key for key, param in options.items() if not getattr(param, "hidden", False)}
    assert not [key for key in visible if key[1] == "--max-steps"]
    for command in ("train stage1", "train stage2", "train stage3", "train vae", "train decoder", "probe train",
                    "agents train"):
        assert (command, "--steps") in visible, command
    for command in ("train stage1", "train stage2", "train stage3", "train vae"):
        assert options[(command, "--max-steps")].hidden
    devices = {key[0]: param.default for key, param in options.items() if key[1] == "--device"}
    assert set(devices) >= {"generate", "eval", "play", "encode", "benchmark run", "train stage1", "train stage2",
                            "train stage3", "train vae"}
    assert set(devices.values()) == {"auto"}, devices


@pytest.mark.parametrize("command, library", [
    (["train", "stage1"], "wantofight.train.run.run_stage"),
    (["train", "stage2", "--init-from", "s1"], "wantofight.train.run.run_stage"),
    (["train", "stage3", "--teacher", "s2"], "wantofight.train.stage3.train_stage3"),
    (["train", "vae"], "wantofight.train.vae.trainer.train_vae"),
], ids=lambda c: " ".join(c) if isinstance(c, list) else "")
def test_steps_and_its_old_name_reach_the_trainer_alike_and_errors_name_what_was_typed(command, library, monkeypatch):
    import importlib
    import inspect

    import torch

    module, name = library.rsplit(".", 1)
    signature = inspect.signature(getattr(importlib.import_module(module), name))
    calls = []

    def record(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        calls.append({**arguments, **arguments.get("kwargs", {})})

    monkeypatch.setattr(library, record)
    base = [*command, "--data", "ds", "--out", "run"]
    for flag in ("--steps", "--max-steps"):
        result = runner.invoke(app, [*base, flag, "7"])
        assert result.exit_code == 0, result.output
    # the step count, and `auto` resolved to this machine's device, as the library receives them
    received = [(call["max_steps"], call["device"]) for call in calls]
    assert received == [(7, "cuda" if torch.cuda.is_available() else "cpu")] * 2
    for flag in ("--steps", "--max-steps"):
        result = runner.invoke(app, [*base, flag, "0"])
        assert result.exit_code == 2 and result.output.strip() == f"error: {flag} must be >= 1, got 0"
    result = runner.invoke(app, [*base, "--steps", "7", "--max-steps", "7"])
    assert result.exit_code == 2 and "old name of --steps" in result.output
    assert len(calls) == 2


@pytest.mark.parametrize("args, message", [
    (["probe", "train", "runs", "--out", "probe", "--steps", "0"], "--steps must be >= 1, got 0"),
    (["probe", "train", "runs", "--out", "probe", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["train", "decoder", "--data", "ds", "--out", "dec", "--steps", "-1"], "--steps must be >= 0, got -1"),
    (["train", "decoder", "--data", "ds", "--out", "dec", "--keep", "0"], "--keep must be in (0, 1], got 0.0"),
], ids=lambda a: " ".join(a[:2]) + " " + a[-2] if isinstance(a, list) else "")
def test_config_errors_name_the_option_the_user_typed(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.output.strip() == f"error: {message}"
    assert not any(tmp_path.iterdir())


def test_version_prints_the_package_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wtf {__version__}"


# ---------------------------------------------------------------------------------------------
# The minimal install (`pip install -e .`): a command that needs an extra says which, in one line

EXTRA_MODULES = ("torch", "torchvision", "diffusers", "open_clip", "safetensors", "torchmetrics", "lpips",
                 "stable_baselines3", "duckdb", "matplotlib", "PIL", "pygame")
# None in sys.modules makes `import torch` raise ModuleNotFoundError and find_spec return None: uninstalled.
MINIMAL = (f"import sys; sys.modules.update(dict.fromkeys({EXTRA_MODULES!r}));"
           "from wantofight.cli import app; app(sys.argv[1:], prog_name='wtf')")


def minimal_wtf(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", MINIMAL, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize(
    "args, extra",
    [
        (["model", "info"], "model"),
        (["train", "stage1", "--data", "ds", "--out", "run"], "model"),
        (["train", "stage2", "--init-from", "s1", "--data", "ds", "--out", "run"], "model"),
        (["train", "stage3", "--teacher", "s2", "--data", "ds", "--out", "run"], "model"),
        (["train", "decoder", "--data", "ds", "--out", "run"], "model"),
        (["encode", "ds", "--out", "lat", "--vae", "tiny"], "model"),
        (["generate", "--checkpoint", "c", "--first-frames", "f.png", "--keys", "k", "--refs", "a,b", "--out", "o.mp4"],
         "model"),
        (["eval", "--checkpoint", "c", "--data", "ds"], "model"),
        (["query", "ds", "SELECT 1"], "curate"),
        (["agents", "train", "--out", "run"], "ppo"),
        (["agents", "eval", "--policy", "ppo:final.zip"], "ppo"),
        (["collect", "--policy", "ppo:final.zip", "--out", "data"], "ppo"),
        (["play", "--record", "session"], "play"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_a_missing_extra_is_one_line_naming_it(tmp_path, args, extra):
    proc = minimal_wtf(*args, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "Traceback" not in output
    assert len(output.strip().splitlines()) == 1, output
    assert re.search(rf"pip install -e ['\"]\.\[{extra}\]['\"]", output), output


def test_the_minimal_install_collects(tmp_path):
    for args in (["--help"], ["games"]):
        proc = minimal_wtf(*args)
        assert proc.returncode == 0, proc.stderr
    proc = minimal_wtf("collect", "--policy", "random", "--episodes", "1", "--max-frames", "30", "--out", "data",
                       "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote ") and "1 episode(s)" in proc.stdout


# ---------------------------------------------------------------------------------------------
# Progress without a terminal: plain lines every WTF_PROGRESS_SECONDS, on stderr


@pytest.fixture(scope="module")
def match_run(recorded) -> Path:
    return recorded(policy="scripted", p2_policy="random", episodes=2, max_frames=400, fps=30, seed=1)


def test_progress_prints_a_line_when_due_and_a_last_one(capsys, monkeypatch):
    monkeypatch.setenv("WTF_PROGRESS_SECONDS", "0")
    with Progress("encode", 3, "windows", "{mb:.1f} MB", mb=0.0) as bar:
        for _ in range(3):
            bar.advance(mb=1.5)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("encode: 1/3 windows (33%) · 1.5 MB · 0:00:00 elapsed")
    assert len(lines) == 3 and lines[-1].startswith("encode: 3/3 windows (100%)")  # the last state once
    with Progress("encode", 3, "windows") as bar:
        bar.advance()
        bar.every = 3600  # the rest falls between two due lines: the end prints the last state
        bar.advance(2)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["encode: 1/3 windows", "encode: 3/3 windows"]
    monkeypatch.setenv("WTF_PROGRESS_SECONDS", "5")
    with Progress("encode", 3, "windows") as bar:  # done within 5 s: quiet
        bar.advance(3)
    monkeypatch.setenv("WTF_PROGRESS_SECONDS", "0")
    with Progress("encode", 3, "windows", enabled=False) as bar:  # --no-progress
        bar.advance(3)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["collect", "annotate", "build-curriculum", "encode", "agents train",
                                     "agents eval", "train stage1"])
def test_long_commands_print_progress_lines_without_a_terminal(command, match_run, recorded, tmp_path_factory,
                                                               tmp_path):
    cases = {  # command -> (its arguments, built only for that command; the line it must print)
        "collect": (lambda: ["collect", "--policy", "idle", "--episodes", "2", "--max-frames", "30", "--out",
                             str(tmp_path / "run")], r"collect: 1/2 episodes \(50%\) · \d+ frames"),
        "annotate": (lambda: ["annotate", str(copy_run(match_run, tmp_path / "run")), "--workers", "2"],
                     r"annotate: 1/2 episodes"),
        "build-curriculum": (lambda: ["build-curriculum", str(match_run), "--out", str(tmp_path / "ds"),
                                      "--clip-frames", "33", "--tiers", "full"], r"^cut: 1/2 episodes"),
        "encode": (lambda: ["encode", str(small_dataset(recorded, tmp_path_factory)), "--out", str(tmp_path / "lat"),
                            "--vae", "tiny", "--frames", "9", "--size", "16x32", "--tiers", "dual"],
                   r"encode: 1/\d+ windows"),
        "agents train": (lambda: ["agents", "train", "--out", str(tmp_path / "ppo"), "--steps", "128", "--n-steps",
                                  "64", "--batch-size", "64"], r"train: \d+/128 steps .* steps/s · \d+ matches"),
        "agents eval": (lambda: ["agents", "eval", "--policy", "idle", "--matches", "2", "--state", "Close"],
                        r"eval: 1/2 matches \(50%\) · win rate 0%"),
        # the trainer every stage shares
        "train stage1": (lambda: ["train", "stage1", "--data", str(small_dataset(recorded, tmp_path_factory)), "--out",
                                  str(tmp_path / "s1"), "--steps", "2", "--set", "data.frames=9", "--set",
                                  "data.batch_size=1", "--set", "validation.every=0"],
                         r"stage1: 1/2 steps \(50%\) · loss [\d.]+ .* elapsed"),
    }
    args, expected = cases[command]
    result = runner.invoke(app, args(), env={"WTF_PROGRESS_SECONDS": "0"})
    assert result.exit_code == 0, result.output
    assert re.search(expected, result.stderr, re.MULTILINE), result.stderr
    assert not re.search(expected, result.stdout), result.stdout  # stdout keeps only results
    # each bar is named for its own work (build-curriculum's is not `encode`, the name of another command)
    label = expected.lstrip("^").split(":")[0]
    progress_lines = [line for line in result.stderr.splitlines() if re.match(r"[\w-]+: [\d,/]+ ", line)]
    assert {line.split(":")[0] for line in progress_lines} <= {label, "plan", "annotate"}, progress_lines
    assert all(a != b for a, b in zip(progress_lines, progress_lines[1:])), progress_lines  # no line twice


def test_piped_output_keeps_each_line_whole_and_prints_it_once(match_run, tmp_path):
    """Through a pipe (no terminal, no COLUMNS) rich would break lines at 80 columns: a result line with
    a long path and a table row each stay one line, and no line is printed twice."""
    deep = tmp_path / "a-folder-whose-name-alone-is-long-enough-to-pass-the-eighty-columns-of-a-pipe"
    deep.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "WTF_PROGRESS_SECONDS": "0"}

    def wtf(*args: str) -> tuple[list[str], list[str]]:
        proc = subprocess.run([sys.executable, "-m", "wantofight.cli", *args], cwd=deep, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        for lines in (proc.stdout.splitlines(), proc.stderr.splitlines()):
            assert all(a != b for a, b in zip(lines, lines[1:])), lines  # e.g. a last progress line twice
        return proc.stdout.splitlines(), proc.stderr.splitlines()

    out, _ = wtf("collect", "--policy", "idle", "--episodes", "1", "--max-frames", "20", "--out", str(deep / "run"))
    assert out == [f"wrote {deep / 'run' / 'episodes'}: 1 episode(s), 20 frames"]
    out, err = wtf("build-curriculum", str(match_run), "--out", str(deep / "ds"), "--clip-frames", "33",
                   "--tiers", "full")
    assert out[-1].startswith(f"wrote {deep / 'ds'}: ") and out[-1].endswith(" skipped"), out
    assert {line.split(":")[0] for line in err} == {"plan", "cut"}, err
    note = "forty characters that no cell cuts short"  # three of them make a row of 150 columns
    out, _ = wtf("query", str(deep / "ds"), f"SELECT clip_id, '{note}' AS a, '{note}' AS b, '{note}' AS c FROM clips "
                 "ORDER BY clip_id LIMIT 3")
    rows = [line for line in out if line.count(note) == 3]
    assert len(rows) == 3 and all(re.search(r"[0-9a-f]{20}", line) for line in rows), out


# ---------------------------------------------------------------------------------------------
# Ctrl-C: the terminal's SIGINT to the whole process group; one line, exit 130, within ~2 s


def interrupted(args: list[str], working, settle: float = 0.5) -> tuple[subprocess.CompletedProcess, float]:
    """Run `wtf ARGS` in its own session, wait until `working(pid)`, send SIGINT to the whole group as
    a terminal does; returns the finished process and the seconds it took to stop."""
    proc = subprocess.Popen([sys.executable, "-m", "wantofight.cli", *args, "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not working(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never got to work"
            time.sleep(0.05)
        time.sleep(settle)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(args, proc.returncode, out, err), time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def assert_stopped_cleanly(proc: subprocess.CompletedProcess, seconds: float, kept: str) -> None:
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stopped: ") and kept in lines[0], proc.stderr
    assert seconds < 5, f"took {seconds:.1f} s to stop"


def group_size(pgid: int) -> int:
    """Processes in the process group (a command and its workers)."""
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the name: state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        count += int(fields[2]) == pgid
    return count


def test_ctrl_c_agents_train_saves_the_step_and_says_how_to_resume(tmp_path):
    out = tmp_path / "run"
    proc, seconds = interrupted(["agents", "train", "--out", str(out), "--steps", "1000000", "--n-steps", "64",
                                 "--batch-size", "64", "--checkpoint-every", "1000000"],
                                lambda pid: (out / "checkpoints" / "step_0000000.zip").exists(), settle=1.5)
    assert_stopped_cleanly(proc, seconds, "add --resume")
    assert len(list((out / "checkpoints").glob("step_*.zip"))) == 2  # the untrained net and the interrupted step


def test_ctrl_c_agents_eval_ends_its_workers_without_tracebacks():
    proc, seconds = interrupted(["agents", "eval", "--policy", "scripted", "--matches", "20", "--workers", "2"],
                                lambda pid: group_size(pid) >= 3, settle=2)  # the command and its 2 workers
    assert_stopped_cleanly(proc, seconds, "run it again")


def test_ctrl_c_build_curriculum_stops_its_workers_and_keeps_finished_parts(match_run, tmp_path):
    out = tmp_path / "ds"
    # Overlapping 33-frame windows every 2 frames: several seconds of clip encoding per episode.
    proc, seconds = interrupted(["build-curriculum", str(match_run), "--out", str(out), "--workers", "2",
                                 "--clip-frames", "33", "--stride", "2", "--tiers", "full"],
                                lambda pid: any(out.glob(".parts-*")))
    assert_stopped_cleanly(proc, seconds, "run the same command again")
    assert not (out / "manifest.json").exists()


def test_ctrl_c_encode_leaves_no_partial_cache(recorded, tmp_path_factory, tmp_path):
    out = tmp_path / "lat"
    proc, seconds = interrupted(["encode", str(small_dataset(recorded, tmp_path_factory)), "--out", str(out),
                                 "--vae", "tiny", "--frames", "9", "--size", "16x32", "--batch-size", "8"],
                                lambda pid: any(out.glob("*/*.partial")), settle=0)
    assert_stopped_cleanly(proc, seconds, "run the same command again")
    assert list(out.iterdir()) == []  # no tier folder, no shard, no manifest
