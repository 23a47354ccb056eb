"""Where torch runs: `--device auto` (every command's default) is `cuda` when this machine has a GPU,
else `cpu`; `cpu`, `cuda` and `cuda:N` are taken as given."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """`auto` -> `cuda` when this machine has a GPU, else `cpu`; any other device as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
