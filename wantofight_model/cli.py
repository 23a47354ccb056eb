"""`wtf model ...`: inspect the WanToFight model presets."""

from __future__ import annotations

import json

import typer

app = typer.Typer(help="Inspect WanToFight model presets.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Inspect WanToFight model presets."""


@app.command()
def info(
    preset: str = typer.Option("tiny", "--preset", help="Model preset (tiny, wan-1.3b)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Parameter counts per component and activation sizes per chunk (built on the meta device)."""
    from wantofight_model.presets import PRESETS

    if preset not in PRESETS:
        raise typer.BadParameter(f"unknown preset {preset!r}; valid presets: {', '.join(sorted(PRESETS))}",
                                 param_hint="--preset")
    from wantofight_model.info import format_info, model_info

    result = model_info(preset)
    typer.echo(json.dumps(result, indent=2) if as_json else format_info(result))
