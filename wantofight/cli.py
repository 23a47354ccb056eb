"""The `wtf` command line: a thin Typer app; each command group lives beside its library code.

Command modules import their heavy dependencies (torch, stable_retro) inside the commands, so
`wtf --help` stays instant.
"""

from __future__ import annotations

import typer

from wantofight import __version__
from wantofight.annotate import cli as annotate_cli
from wantofight.annotate import curator_cli
from wantofight.benchmark import cli as benchmark_cli
from wantofight.cli_util import Group
from wantofight.collect import agents_cli
from wantofight.collect import cli as collect_cli
from wantofight.datasets import cli as datasets_cli
from wantofight.export import cli as export_cli
from wantofight.inference import cli as inference_cli
from wantofight.play import cli as play_cli
from wantofight.train import cli as train_cli
from wantofight.train import generate_cli
from wantofight_model import cli as model_cli

app = typer.Typer(
    name="wtf",
    help="wantofight: record, annotate, curate and train generative fighting-game engines.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=Group,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"wtf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the version and exit."),
) -> None:
    """wantofight: record, annotate, curate and train generative fighting-game engines."""

collect_cli.register(app)
annotate_cli.register(app)
curator_cli.register(app)
datasets_cli.register(app)
export_cli.register(app)
app.add_typer(agents_cli.app, name="agents")
app.add_typer(model_cli.app, name="model")
app.add_typer(train_cli.app, name="train")
inference_cli.register(app)
generate_cli.register(app, train_cli.app)
benchmark_cli.register(app)
play_cli.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
