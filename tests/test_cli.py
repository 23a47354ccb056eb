"""What every `wtf` command shares: its help, `--version`, missing extras, Ctrl-C, progress without a terminal."""

from __future__ import annotations

import re

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
