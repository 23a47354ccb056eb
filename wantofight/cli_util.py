"""Shared helpers for command modules: one console, one way to fail, one way to stop on Ctrl-C."""

from __future__ import annotations

from functools import partial
from typing import Iterable, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from wantofight.outputs import OutputExists

UNWRAPPED = 100_000
"""Console width without a terminal: wide enough that rich never breaks a line (it would at 80 columns)."""


def _console(stderr: bool = False) -> Console:
    """Rich's console on a terminal; piped or written to a file, one that never wraps, so a long path or a
    table row stays one line for grep, `| tee` and the next program."""
    terminal = Console(stderr=stderr)
    return terminal if terminal.is_terminal else Console(stderr=stderr, soft_wrap=True, width=UNWRAPPED)


console = _console()
errors = _console(stderr=True)

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
OVERWRITE_OPTION = typer.Option(
    False, "--overwrite",
    help="Replace an existing --out: the new one is built beside it and swapped in only once complete, so a "
         "stopped run leaves the old one as it was.")
DEVICE_HELP = "cpu, cuda, cuda:N, or auto (cuda when this machine has a GPU, else cpu)."
DEVICE_OPTION = typer.Option("auto", "--device", help=DEVICE_HELP)
MAX_STEPS_OPTION = typer.Option(None, "--max-steps", hidden=True, help="The old name of --steps, kept for a release.")


def step_count(steps: int | None, max_steps: int | None) -> int | None:
    """`--steps N`, or the same given by its old name `--max-steps N` (hidden); an error names the option
    as the user typed it."""
    if steps is not None and max_steps is not None:
        fail("--max-steps is the old name of --steps: give --steps only")
    typed, value = ("--max-steps", max_steps) if max_steps is not None else ("--steps", steps)
    if value is not None and value < 1:
        fail(f"{typed} must be >= 1, got {value}")
    return value


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


def wrote(path, details: str) -> None:
    """A command's last line, one style for all: `wrote PATH: what is there now` (stdout; a path is not
    read as rich markup)."""
    console.print(f"wrote {path}: {details}", markup=False, highlight=False)


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
        name_arguments(self)
        return super().main(*args, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            stopped("interrupted")
        except OutputExists as err:  # raised by the library calls of every command that writes a folder
            fail(str(err))
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


def name_arguments(command) -> None:
    """One name per argument in the usage line, the help and the errors: `RUN_DIRS...`, where Typer
    shows `{run_dirs}...` in the usage line and `run_dirs...` in the help."""
    for param in command.get_params(typer.Context(command)):
        if param.param_type_name == "argument" and param.metavar is None:
            param.metavar = param.name.upper() + ("..." if param.nargs != 1 else "")
            param.get_usage_pieces = partial(_usage_piece, param)
    for sub in getattr(command, "commands", {}).values():
        name_arguments(sub)


def _usage_piece(param, ctx=None) -> list[str]:
    return [param.metavar if param.required else f"[{param.metavar}]"]
