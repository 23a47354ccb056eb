"""`wtf query`: SQL over a dataset's shards with duckdb, through a `clips` view (one row per clip,
every shard column; docs/curriculum.md lists them)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from wantofight.annotate.inspect_clip import shard_files

CELL_CHARS = 60
"""Longest cell text in the terminal table; binary cells print as their size."""


class QueryError(ValueError):
    """SQL that duckdb rejects, or a dataset it cannot read; the message is duckdb's."""


def connect(ds_dir: Path):
    """A duckdb connection with the `clips` view over DS_DIR's shards."""
    try:
        import duckdb
    except ImportError:
        raise QueryError("wtf query needs duckdb: pip install -e \".[curate]\"") from None
    files = [str(p) for p in shard_files(ds_dir)]
    con = duckdb.connect()
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    con.execute(f"CREATE VIEW clips AS SELECT * FROM read_parquet([{listed}], union_by_name = true)")
    return con


def run_query(ds_dir: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of `sql` run against the `clips` view."""
    import duckdb

    con = connect(ds_dir)
    try:
        result = con.execute(sql)
    except duckdb.Error as err:
        raise QueryError(str(err).splitlines()[0]) from None
    if result.description is None:
        return [], []
    columns = [d[0] for d in result.description]
    return columns, result.fetchall()


def cell_text(value, limit: int | None = CELL_CHARS) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    text = str(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def to_csv(columns: list[str], rows: list[tuple]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell_text(v, limit=None) for v in row])
    return buffer.getvalue()


def to_table(columns: list[str], rows: list[tuple], max_rows: int):
    from rich.table import Table

    table = Table(show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows[:max_rows]:
        table.add_row(*(cell_text(v) for v in row))
    if len(rows) > max_rows:
        table.caption = f"{max_rows} of {len(rows)} rows shown (--max-rows, or --csv for all)"
    else:
        table.caption = f"{len(rows)} row(s)"
    return table
