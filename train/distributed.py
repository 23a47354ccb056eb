"""torchrun plumbing: process group, DDP / FSDP2 wrapping, full state dicts, reductions.

One process per GPU under `torchrun --nproc-per-node G -m wantofight.cli train stage1 ...`; a plain
`wtf train stage1` is world size 1 and touches no process group. CPU runs (tests) use gloo.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(device: str | None = None) -> DistInfo:
    """Join the process group torchrun describes in the environment (if any) and pick the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank if world > 1 else (dev.index or 0))
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=rank, world_size=world)
    return DistInfo(rank, world, local_rank, dev)


def teardown(barrier: bool = False) -> None:
    """Leave the process group. `barrier` (after a run that ended well on every rank): wait for the other
    ranks first, so no rank destroys gloo's pairs while another still has work on them (a rank of a 2-process
    CPU test once aborted in teardown with "terminate called without an active exception")."""
    if dist.is_available() and dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


def resolve_parallel(parallel: str, preset: str, info: DistInfo) -> str:
    """auto -> none on one process, fsdp for wan-1.3b on GPUs, ddp otherwise."""
    if not info.enabled:
        return "none"
    if parallel == "auto":
        return "fsdp" if preset == "wan-1.3b" and info.device.type == "cuda" else "ddp"
    return parallel


def wrap(dit: nn.Module, strategy: str, info: DistInfo, bf16: bool) -> nn.Module:
    """Return the module the training step calls: the DiT itself, DDP(DiT), or the DiT fully_shard-ed in place."""
    if strategy == "none":
        return dit
    if strategy == "ddp":
        ids = [info.device.index] if info.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(dit, device_ids=ids)
    if strategy == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
        kwargs = {"mp_policy": mp} if mp is not None else {}
        for block in dit.blocks:  # one all-gather per block: peak memory = one block's full weights
            fully_shard(block, **kwargs)
        fully_shard(dit, **kwargs)
        return dit
    raise ValueError(f"parallel={strategy!r}; valid: none, ddp, fsdp")


@contextmanager
def no_sync(module: nn.Module, skip: bool):
    """While `skip`, backward leaves this module's gradients local (DDP's no_sync, FSDP2's gradient sync
    off): all but the last micro-batch of an accumulation. A no-op on an unwrapped module."""
    if not skip:
        yield
    elif isinstance(module, nn.parallel.DistributedDataParallel):
        with module.no_sync():
            yield
    elif hasattr(module, "set_requires_gradient_sync"):  # FSDP2
        module.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            module.set_requires_gradient_sync(True)
    else:
        yield


def unwrap(module: nn.Module) -> nn.Module:
    return module.module if isinstance(module, nn.parallel.DistributedDataParallel) else module


def is_sharded(module: nn.Module) -> bool:
    return any(hasattr(p, "full_tensor") for p in module.parameters())


def model_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """Full CPU state dict of the (possibly DDP- or FSDP-wrapped) module; collective under FSDP."""
    module = unwrap(module)
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().cpu() for k, v in module.state_dict().items()}


def load_model_state(module: nn.Module, state: dict[str, torch.Tensor]) -> None:
    module = unwrap(module)
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(module, state, options=StateDictOptions(full_state_dict=True))
    else:
        module.load_state_dict(state)


def optimizer_state(module: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    module = unwrap(module)
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(module, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def load_optimizer_state(module: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    module = unwrap(module)
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(module, optimizer, state, options=StateDictOptions(full_state_dict=True))
    else:
        optimizer.load_state_dict(state)


def mean(value: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Average a tensor over ranks (a no-op on one process)."""
    if info.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= info.world_size
    return value


def gather(value: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Every rank's tensor (the same shape on each), concatenated along dim 0 in rank order: the global
    batch when dim 0 is the batch (a no-op on one process)."""
    if not info.enabled:
        return value
    parts = [torch.empty_like(value) for _ in range(info.world_size)]
    dist.all_gather(parts, value.contiguous())
    return torch.cat(parts)


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True on every rank when `flag` is true on any (a Ctrl-C seen by one rank stops them all alike)."""
    if not info.enabled:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=info.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


