"""`wtf agents ...`: train and evaluate PPO fighters (the `[ppo]` extra)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Train and evaluate learned (PPO) fighters.", no_args_is_help=True)
