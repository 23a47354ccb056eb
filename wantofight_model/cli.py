"""`wtf model ...`: inspect the WanToFight model presets."""

from __future__ import annotations

import typer

app = typer.Typer(help="Inspect WanToFight model presets.", no_args_is_help=True)
