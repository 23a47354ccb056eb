"""What every `wtf` command shares: its help, `--version`, missing extras, Ctrl-C, progress without a terminal."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from wantofight import __version__
from wantofight.cli import app

runner = CliRunner()

COMMANDS = [
    [], ["collect"], ["replay"], ["games"], ["annotate"], ["build-curriculum"], ["inspect"], ["stats"], ["browse"],
    ["query"], ["encode"], ["generate"], ["eval"], ["agents"], ["agents", "train"], ["agents", "eval"], ["model"],
    ["model", "info"], ["train"], ["train", "stage1"], ["train", "stage2"], ["train", "stage3"], ["train", "decoder"],
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


def test_version_prints_the_package_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wtf {__version__}"


# ---------------------------------------------------------------------------------------------
# The minimal install (`pip install -e .`): a command that needs an extra says which, in one line

EXTRA_MODULES = ("torch", "torchvision", "diffusers", "open_clip", "safetensors", "torchmetrics", "lpips",
                 "stable_baselines3", "duckdb", "matplotlib", "PIL")
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
    assert "recorded 1 episode(s)" in proc.stdout
