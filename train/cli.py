"""`wtf train ...`: the three-stage trainer."""

from __future__ import annotations

import typer

app = typer.Typer(help="Train WanToFight: stage1 (bidirectional), stage2 (causal), stage3 (DMD).", no_args_is_help=True)
