"""Exponential moving average of the trainable weights (fp32 shadow copies, sharded like the params)."""

from __future__ import annotations

import torch
from torch import nn


class EMA:
    """shadow <- decay * shadow + (1 - decay) * param, after every optimiser step.

    The shadows are detached fp32 clones of the trainable parameters; under FSDP2 they are DTensor
    shards of the same layout, so the update is local and costs no communication.
    """

    def __init__(self, named_params: dict[str, nn.Parameter], decay: float):
        self.decay = decay
        self.params = named_params
        self.shadow = {name: p.detach().float().clone() for name, p in named_params.items()}

    @torch.no_grad()
    def update(self) -> None:
        for name, p in self.params.items():
            self.shadow[name].lerp_(p.detach().float(), 1.0 - self.decay)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Full (unsharded) CPU tensors, keyed like the model's parameters."""
        return {name: _full(t).cpu() for name, t in self.shadow.items()}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = sorted(set(self.shadow) - set(state))
        if missing:
            raise KeyError(f"EMA state lacks {len(missing)} tensors, e.g. {missing[:3]}")
        for name, t in self.shadow.items():
            _copy_full_into(t, state[name])

    @torch.no_grad()
    def copy_to(self, module_params: dict[str, nn.Parameter]) -> None:
        """Write the EMA weights into parameters of the same names (for sampling with EMA weights)."""
        for name, p in module_params.items():
            p.copy_(self.shadow[name].to(p.dtype))


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _copy_full_into(target: torch.Tensor, full: torch.Tensor) -> None:
    if hasattr(target, "full_tensor"):  # DTensor shard: scatter the full tensor with the same placements
        from torch.distributed.tensor import distribute_tensor

        target.copy_(distribute_tensor(full.to(target.dtype), target.device_mesh, target.placements))
    else:
        target.copy_(full.to(target))
