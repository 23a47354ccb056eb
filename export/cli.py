"""`wtf export`: the command-line face of `export/`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import fail, stopped, warn, wrote

FORMATS = ("lerobot",)


def export_command(
    src: Path = typer.Argument(..., help="A recording run (wtf collect --out) or a curriculum dataset "
                                         "(wtf build-curriculum --out)."),
    format: str = typer.Option(..., "--format", help="Output format: lerobot (LeRobotDataset v3.0)."),
    out: Path = typer.Option(..., help="New folder for the export (must not exist, or be empty)."),
    tier: Optional[str] = typer.Option(None, help="Curriculum dataset only: tiers to export, e.g. single,dual "
                                                  "(single, dual, full; default all)."),
    fps: Optional[int] = typer.Option(None, help="Frame rate of the export, dividing the recording's (e.g. 30 "
                                                 "from 60); default the recording's."),
    overwrite: bool = typer.Option(False, help="Replace an existing --out, once the new export is complete."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Export recordings or clips as a LeRobotDataset (one episode per recorded episode or clip; docs/export.md).

    An interrupted export continues when the same command is run again."""
    from wantofight.annotate.episode import EpisodeError
    from wantofight.export.lerobot import export_lerobot
    from wantofight.export.sources import ExportError
    from wantofight.outputs import OutputExists, staging_dir

    if format not in FORMATS:
        fail(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    try:
        summary = export_lerobot(src, out, tiers=tier, fps=fps, progress=progress, warn=warn, overwrite=overwrite)
    except (ExportError, EpisodeError, OutputExists, OSError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        stopped(f"the episodes exported so far are kept in {staging_dir(out)} ({out} is as it was); run the same "
                "command again to continue")
    splits = ", ".join(f"{k} {v}" for k, v in summary["splits"].items())
    resumed = f", {summary['resumed']} of them from an earlier run" if summary["resumed"] else ""
    skipped = f", {summary['skipped']} broken skipped" if summary["skipped"] else ""
    wrote(out.resolve(), f"{summary['episodes']:,} episodes ({splits}{resumed}{skipped}), {summary['frames']:,} "
                         f"frames at {summary['fps']} fps, {summary['tasks']} tasks; features: "
                         f"{', '.join(summary['features'])}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
    app.command("export")(export_command)
