"""Shared helpers for command modules: one console, one way to fail, one way to stop on Ctrl-C."""

from __future__ import annotations

from typing import Iterable, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

console = Console()
errors = Console(stderr=True)

# The import name of each optional dependency -> the extra of pyproject.toml that brings it.
# torch comes with both [model] and [ppo]; the agents' own checks name [ppo].
EXTRAS = {
    "torch": "model", "torchvision": "model", "diffusers": "model", "open_clip": "model", "safetensors": "model",
    "torchmetrics": "model", "lpips": "model", "stable_baselines3": "ppo", "duckdb": "curate", "matplotlib": "curate",
    "PIL": "curate", "pygame": "play", "ray": "ray",
}


RAY_OPTION = typer.Option(
    None, "--ray", metavar="ADDRESS",
    help="Run on a Ray cluster: HOST:PORT of its head, auto (the one this machine joined), or local; outputs go "
         "where every node sees them (docs/scaling.md).")
MAX_RETRIES_OPTION = typer.Option(3, help="With --ray: times a unit is run again after its worker died.")


def ray_cluster(ctx: typer.Context, address: str | None, workers: int, max_retries: int):
    """The `--ray` cluster to run on, or None for local workers. `--workers`, when typed, caps its actors
    (else one per CPU of the cluster); without ray installed, the root group names the [ray] extra."""
    import importlib.util

    from wantofight.cluster import Cluster, ClusterError

    if address is None:
        if "max_retries" in typed_options(ctx, ("max_retries",)):
            raise ClusterError("--max-retries applies to --ray runs only")
        return None
    if importlib.util.find_spec("ray") is None:
        raise ModuleNotFoundError("No module named 'ray'", name="ray")
    typed = "workers" in typed_options(ctx, ("workers",))
    return Cluster(address, workers if typed else None, max_retries)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the bad thing and exit non-zero."""
    errors.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print a one-line warning (a skipped episode, a corrupt row) and carry on."""
    errors.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True, highlight=False)


def stopped(message: str) -> NoReturn:
    """After Ctrl-C: one line saying what was kept and how to continue, exit code 130 (128 + SIGINT).
    Long commands call it from `except KeyboardInterrupt`; the root group does for the others."""
    errors.print(f"[yellow]stopped:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(130)


def typed_options(ctx: typer.Context, names: Iterable[str]) -> set[str]:
    """The options among `names` that the user typed (so `--resume` can refuse conflicting ones)."""
    # Compared by name: Typer may bundle its own click, whose ParameterSource enum is a different class.
    return {n for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"}


class Group(TyperGroup):
    """The root `wtf` group: help without type tags; a missing optional dependency as one line naming
    its extra, and Ctrl-C as one line and exit code 130, whichever command meets them."""

    def main(self, *args, **kwargs):
        hide_type_tags(self)
        return super().main(*args, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            stopped("interrupted")
        except ModuleNotFoundError as err:
            top = (err.name or "").split(".")[0]
            if top not in EXTRAS:
                raise
            command = " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))
            extra = EXTRAS[top]
            fail(f'{command} needs {top}, which comes with the [{extra}] extra: pip install -e ".[{extra}]"')


def hide_type_tags(command) -> None:
    """Drop the `<str>` / `<bool>` tags Typer prints beside every option and argument (help text and
    default already say what a value is); the help option is built here so it loses its tag too."""
    for param in command.get_params(typer.Context(command)):
        param.display_type_rich = _no_type
    for sub in getattr(command, "commands", {}).values():
        hide_type_tags(sub)


def _no_type(ctx=None) -> str:
    return ""
