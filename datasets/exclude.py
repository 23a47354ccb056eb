"""Curators' exclude lists for the loaders, in the format `wtf build-curriculum --exclude` reads
(`{"version": 1, "clips": [{"clip_id": ..., "reason": ...}]}`, docs/curriculum.md).

A dataset honours the file given to it and, when present, `DS_DIR/exclude.json` (where a curator
can drop a list without rebuilding); both are read with annotate's reader.
"""

from __future__ import annotations

from pathlib import Path

EXCLUDE_FILE = "exclude.json"


def load_excludes(root: Path, exclude: str | Path | None) -> dict[str, str]:
    """clip_id -> reason from `exclude` and `root/exclude.json`; a malformed file raises ValueError."""
    from wantofight.annotate.curriculum import BuildError, read_exclude

    paths = [Path(exclude)] if exclude is not None else []
    if (Path(root) / EXCLUDE_FILE).is_file():
        paths.append(Path(root) / EXCLUDE_FILE)
    out: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            raise ValueError(f"exclude file {path} does not exist")
        try:
            out.update(read_exclude(str(path)))
        except BuildError as err:
            raise ValueError(str(err).removeprefix("--exclude ")) from None
    return out
