"""The rooms import one way (docs/layout.md): each room imports only rooms on a lower floor, the model
and the ground floor import no room at all. Every import counts, those inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS = {
    "wantofight_model": 0,  # the model: imports nothing of the pipeline
    "ground": 0,            # wantofight/ but cli.py: console, progress, Ctrl-C, outputs, devices, Ray pools,
                            # MP4 (video), PSNR / SSIM / LPIPS (fidelity)
    "collect": 1,
    "annotate": 2,
    "datasets": 3,
    "inference": 4,         # loading a model, streaming its rollout, decoding to video: no trainer
    "train": 5,             # one floor with benchmark and play: only the root app imports the trainer
    "export": 5,
    "benchmark": 5,
    "play": 5,
    "cli": 6,               # wantofight/cli.py: the root `wtf` app registers every room's commands
}
FOLDERS = {"collect": "collect", "annotate": "annotate", "datasets": "datasets", "inference": "inference",
           "train": "train", "export": "export", "benchmark": "benchmark", "play": "play",
           "wantofight_model": "wantofight_model", "ground": "wantofight"}


def room_of_file(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "wantofight":
        return "cli" if rel.name == "cli.py" else "ground"
    return rel.parts[0]


def room_of_module(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "wantofight_model":
        return "wantofight_model"
    if parts[0] != "wantofight":
        return None
    if len(parts) == 1:
        return "ground"
    if parts[1] in FLOORS:
        return parts[1]
    return "cli" if parts[1] == "cli" else "ground"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from wantofight import train` names a room in the imported names
            if node.module == "wantofight":
                found += [(node.lineno, f"wantofight.{alias.name}") for alias in node.names]
    return found


def violations() -> list[str]:
    bad = []
    for folder in sorted(set(FOLDERS.values())):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "games" in path.relative_to(ROOT).parts:  # the game's own build tools, not a room
                continue
            room = room_of_file(path)
            for line, module in imports(path):
                other = room_of_module(module)
                if other is None or other == room:
                    continue
                if FLOORS[other] >= FLOORS[room]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} ({room}, floor {FLOORS[room]}) imports {module} "
                               f"({other}, floor {FLOORS[other]})")
    return bad


def test_every_import_runs_down_the_floors():
    assert violations() == []


def test_the_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch):
    """The ablation: an import of train/ inside a function of collect/ is found."""
    fake = tmp_path / "collect"
    fake.mkdir()
    (fake / "sneaky.py").write_text("def f():\n    from wantofight.train import trainer\n    return trainer\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert violations() == ["collect/sneaky.py:2 (collect, floor 1) imports wantofight.train (train, floor 5)"]


def test_the_check_sees_the_benchmark_import_the_trainer(tmp_path, monkeypatch):
    """The benchmark and `wtf play` stand on inference/, beside train/: importing the trainer is sideways."""
    fake = tmp_path / "benchmark"
    fake.mkdir()
    (fake / "sneaky.py").write_text("from wantofight.train.trainer import Trainer\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert violations() == ["benchmark/sneaky.py:1 (benchmark, floor 5) imports wantofight.train.trainer "
                            "(train, floor 5)"]


def test_every_package_folder_is_installed():
    """pyproject.toml lists its packages one by one (the rooms install under `wantofight.`): a new
    sub-folder with an __init__.py (train/vae/) must be listed, or a non-editable install lacks it."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, where = set(project["packages"]), project["package-dir"]
    for name, folder in where.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            if "games" in init.relative_to(ROOT).parts:
                continue
            sub = init.parent.relative_to(ROOT / folder).parts
            assert ".".join((name, *sub)) in listed, f"{init.parent.relative_to(ROOT)} is not in pyproject's packages"
