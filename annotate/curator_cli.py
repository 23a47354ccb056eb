"""`wtf inspect`, `wtf stats`, `wtf browse`, `wtf query`: the curator tools (docs/curator.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wantofight.cli_util import console, errors, fail, wrote


def inspect_command(
    ds_dir: Optional[Path] = typer.Argument(None, help="A dataset (the --out of `wtf build-curriculum`)."),
    clip: Optional[str] = typer.Option(None, "--clip", help="Clip id (list them with `wtf query DS_DIR ...`)."),
    episode: Optional[Path] = typer.Option(None, help="A raw recording, RUN_DIR/episodes/ID, instead of a clip."),
    out: Optional[Path] = typer.Option(None, help="Output file: .mp4, .gif, or .png (contact sheet). Default CLIP.mp4."),
    scale: int = typer.Option(2, help="Integer upscale of frame and HUD."),
    every: Optional[int] = typer.Option(None, help="Contact sheet: every k-th frame (default: about 16 tiles)."),
    columns: int = typer.Option(4, help="Contact sheet: tiles per row."),
    start: int = typer.Option(0, help="--episode: first row."),
    frames: Optional[int] = typer.Option(None, help="--episode: rows to render (default: to the end)."),
) -> None:
    """Render a clip with the key HUD: both players' 16 slots, action labels, frame index, event timeline."""
    from wantofight.annotate.inspect_clip import InspectError, clip_view, describe, episode_view, read_clip, write_view

    if (clip is None) == (episode is None):
        fail("give either DS_DIR --clip CLIP_ID or --episode RUN_DIR/episodes/ID")
    if clip is not None and ds_dir is None:
        fail("--clip needs the dataset folder: wtf inspect DS_DIR --clip CLIP_ID")
    try:
        view = clip_view(read_clip(ds_dir, clip)) if clip else episode_view(episode, start=start, frames=frames)
        target = out or Path(f"{view.name}.mp4")
        with _progress(len(view.frames), f"rendering {view.name}") as step:
            write_view(view, target, scale=scale, every=every, columns=columns, progress=step)
    except InspectError as err:
        fail(str(err))
    wrote(target, describe(view, scale))


def stats_command(
    ds_dir: Path = typer.Argument(..., help="A dataset (the --out of `wtf build-curriculum`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON instead of tables."),
    plots: Optional[Path] = typer.Option(None, help="Write PNG charts into this folder."),
) -> None:
    """Coverage: clips per tier and split, moves and sides, events, key presses, effective presses, lengths, policies."""
    from wantofight.annotate.inspect_clip import InspectError
    from wantofight.annotate.stats import dataset_stats, print_stats, stats_json, write_plots

    try:
        stats = dataset_stats(ds_dir)
        written = write_plots(stats, plots) if plots else []
    except (InspectError, ValueError) as err:
        fail(str(err))
    if as_json:
        typer.echo(stats_json(stats))
    else:
        print_stats(stats, console)
    if written and as_json:  # stdout stays one JSON document; the plots are named on stderr
        errors.print(f"wrote {plots}: {len(written)} plot(s)", markup=False, highlight=False)
    elif written:
        wrote(plots, f"{len(written)} plot(s)")


def browse_command(
    ds_dir: Path = typer.Argument(..., help="A dataset (the --out of `wtf build-curriculum`)."),
    out: Path = typer.Option(..., help="Folder for the gallery (open OUT/index.html, or use --serve)."),
    serve: Optional[int] = typer.Option(None, help="Serve the gallery on http://127.0.0.1:PORT (0 picks a port)."),
    limit: Optional[int] = typer.Option(None, help="Render videos for the first N clips only (default: all)."),
    lazy: bool = typer.Option(False, help="Render no video up front; --serve renders each clip when first shown."),
    exclude: Optional[Path] = typer.Option(None, help="--serve: exclude file the flags go to (default OUT/exclude.json)."),
    scale: int = typer.Option(1, help="Upscale of the rendered clip videos (pages show them at 2× anyway)."),
) -> None:
    """A static HTML gallery: filterable, paged grid; clip pages with the HUD video; flags → exclude.json."""
    from wantofight.annotate.gallery import GalleryError, build_gallery, make_server
    from wantofight.annotate.inspect_clip import InspectError

    if lazy and serve is None:
        fail("--lazy renders clips on request, so it needs --serve PORT")
    if limit is not None and limit < 0:
        fail(f"--limit must be 0 or more, got {limit}")
    try:
        with _progress(None, "rendering clip videos") as step:
            report = build_gallery(ds_dir, out, limit=limit, lazy=lazy, scale=scale, progress=step)
    except (GalleryError, InspectError) as err:
        fail(str(err))
    wrote((out / "index.html").resolve(), f"gallery of {report['clips']} clips ({report['media']} rendered)")
    if serve is None:
        return
    try:
        server = make_server(out, ds_dir, serve, exclude=exclude, scale=scale)
    except OSError as err:
        fail(f"cannot serve on port {serve}: {err}")
    host, port = server.server_address[:2]
    target = exclude or out / "exclude.json"
    console.print(f"serving http://{host}:{port}/ (flags → {target}); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def query_command(
    ds_dir: Path = typer.Argument(..., help="A dataset (the --out of `wtf build-curriculum`)."),
    sql: str = typer.Argument(..., help='SQL over the `clips` view, e.g. "SELECT tier, count(*) FROM clips GROUP BY tier".'),
    csv: bool = typer.Option(False, "--csv", help="Print CSV (all rows) instead of a table."),
    max_rows: int = typer.Option(200, help="Rows shown in the table."),
) -> None:
    """Run SQL (duckdb) over the dataset's shards; one row per clip in the `clips` view."""
    from wantofight.annotate.inspect_clip import InspectError
    from wantofight.annotate.query import QueryError, run_query, to_csv, to_table

    try:
        columns, rows = run_query(ds_dir, sql)
    except (QueryError, InspectError) as err:
        fail(str(err))
    if csv:
        typer.echo(to_csv(columns, rows), nl=False)
    else:
        console.print(to_table(columns, rows, max_rows))


class _progress:
    """The shared progress display fed by `step(n)`; `step(total)` before any item sets an unknown
    total, `step(None)` counts one item. Quiet when nothing is reported."""

    def __init__(self, total: int | None, what: str):
        from wantofight.progress import Progress

        self.bar = Progress(what, total, transient=True)

    def __enter__(self):
        self.bar.__enter__()
        return self.step

    def step(self, n) -> None:
        if n is None:
            self.bar.advance()
        elif self.bar.total is None:
            self.bar.update(total=n)
        else:
            self.bar.advance(n)

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)
        return False


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root `wtf` app."""
    app.command("inspect")(inspect_command)
    app.command("stats")(stats_command)
    app.command("browse")(browse_command)
    app.command("query")(query_command)
