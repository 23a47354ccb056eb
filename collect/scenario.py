"""The `done` condition of a stable-retro scenario, evaluated from RAM values in Python.

stable-retro evaluates `done` inside `data.update_ram()`, which snapshots the whole memory map on
every call (a third of a recorded frame's cost on the NES). The recorder reads variables with
`data.lookup_all()` anyway, so plain conditions (`variables` with a comparison `op`, `any`/`all`)
are checked here; anything richer (`nodes`, `script`, delta measurements) falls back to stable-retro.
"""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Callable

OPS: dict[str, Callable[[int, int], bool]] = {
    "nonzero": lambda v, _: v != 0,
    "zero": lambda v, _: v == 0,
    "positive": lambda v, _: v > 0,
    "negative": lambda v, _: v < 0,
    "equal": operator.eq,
    "not-equal": operator.ne,
    "less-than": operator.lt,
    "greater-than": operator.gt,
    "less-or-equal": operator.le,
    "greater-or-equal": operator.ge,
}


class DoneCondition:
    """`done(values)` for a scenario; `None` from `load` means stable-retro must evaluate it."""

    def __init__(self, checks: list[tuple[str, Callable[[int, int], bool], int]], require_all: bool):
        self.checks, self.require_all = checks, require_all

    @classmethod
    def load(cls, scenario_path: Path | None) -> "DoneCondition | None":
        if scenario_path is None or not scenario_path.is_file():
            return None
        done = json.loads(scenario_path.read_text()).get("done", {})
        if set(done) - {"variables", "condition"} or not done.get("variables"):
            return None
        checks = []
        for name, spec in done["variables"].items():
            if set(spec) - {"op", "reference"} or spec.get("op") not in OPS:
                return None
            checks.append((name, OPS[spec["op"]], int(spec.get("reference", 0))))
        return cls(checks, require_all=done.get("condition", "any") == "all")

    def __call__(self, values: dict[str, int]) -> bool:
        results = (op(values[name], reference) for name, op, reference in self.checks)
        return all(results) if self.require_all else any(results)
