"""Shared helpers for command modules: one console, one way to fail."""

from __future__ import annotations

from typing import Iterable, NoReturn

import typer
from rich.console import Console
from typer.core import TyperGroup

console = Console()
errors = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the bad thing and exit non-zero."""
    errors.print(f"[bold red]error:[/] {message}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a one-line warning (a skipped episode, a corrupt row) and carry on."""
    errors.print(f"[yellow]warning:[/] {message}", soft_wrap=True, highlight=False)


def typed_options(ctx: typer.Context, names: Iterable[str]) -> set[str]:
    """The options among `names` that the user typed (so `--resume` can refuse conflicting ones)."""
    # Compared by name: Typer may bundle its own click, whose ParameterSource enum is a different class.
    return {n for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"}


class Group(TyperGroup):
    """The root `wtf` group: help without type tags."""

    def main(self, *args, **kwargs):
        hide_type_tags(self)
        return super().main(*args, **kwargs)


def hide_type_tags(command) -> None:
    """Drop the `<str>` / `<bool>` tags Typer prints beside every option and argument (help text and
    default already say what a value is); the help option is built here so it loses its tag too."""
    for param in command.get_params(typer.Context(command)):
        param.display_type_rich = _no_type
    for sub in getattr(command, "commands", {}).values():
        hide_type_tags(sub)


def _no_type(ctx=None) -> str:
    return ""
