"""Loading a pruned VAE decoder (`wtf generate --decoder`): a folder written by `wtf train decoder`.

    OUT/decoder.safetensors    the pruned decoder's weights
    OUT/pruned_decoder.json    format, hidden width of each residual block, kept channel indices, source VAE

train/vae/pruned_decoder.py prunes, fine-tunes and saves (its docstring says what is pruned and why);
this module rebuilds the smaller blocks on the VAE's own decoder and loads the weights into them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from torch import nn

FORMAT = "wantofight-pruned-decoder/1"


class PruningError(ValueError):
    """Bad pruning settings or a saved decoder that does not fit the VAE."""


def residual_blocks(decoder: nn.Module) -> dict[str, nn.Module]:
    """The decoder's residual blocks by module name (mid block and up blocks): the Wan layout's causal 3D
    blocks, or the per-frame autoencoder's 2D ones (`ResnetBlock2D`)."""
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanResidualBlock
    from diffusers.models.resnet import ResnetBlock2D

    return {name: m for name, m in decoder.named_modules() if isinstance(m, (WanResidualBlock, ResnetBlock2D))}


def norm_scale(norm: nn.Module) -> torch.Tensor:
    """The per-channel scale of a block's hidden norm: the Wan RMS norm's `gamma`, GroupNorm's `weight`."""
    return norm.gamma if hasattr(norm, "gamma") else norm.weight


def width_step(block: nn.Module) -> int:
    """Hidden widths a block can be pruned to are multiples of this: GroupNorm's groups (2D blocks), else 1."""
    return getattr(block.norm2, "num_groups", 1)


def prune_block(block: nn.Module, keep: torch.Tensor | int) -> None:
    """Rebuild conv1 / norm2 / conv2 of a residual block with only the kept hidden channels (in place).
    `keep`: channel indices (copies their weights) or a width (structure only, weights loaded later)."""
    width = keep if isinstance(keep, int) else int(keep.numel())
    old1, old_norm, old2 = block.conv1, block.norm2, block.conv2
    device, dtype = old1.weight.device, old1.weight.dtype
    if isinstance(old_norm, nn.GroupNorm):  # the per-frame autoencoder's ResnetBlock2D
        if width % old_norm.num_groups:
            raise PruningError(f"a hidden width of {width} does not split into the block's {old_norm.num_groups} "
                               "GroupNorm groups")
        conv1 = nn.Conv2d(old1.in_channels, width, old1.kernel_size, old1.stride, old1.padding)
        norm2 = nn.GroupNorm(old_norm.num_groups, width, eps=old_norm.eps, affine=True)
        conv2 = nn.Conv2d(width, old2.out_channels, old2.kernel_size, old2.stride, old2.padding)
    else:
        from diffusers.models.autoencoders.autoencoder_kl_wan import WanCausalConv3d, WanRMS_norm

        conv1 = WanCausalConv3d(old1.in_channels, width, old1.kernel_size, padding=1)
        norm2 = WanRMS_norm(width, images=False)
        conv2 = WanCausalConv3d(width, old2.out_channels, old2.kernel_size, padding=1)
    conv1, norm2, conv2 = (m.to(device, dtype) for m in (conv1, norm2, conv2))
    if not isinstance(keep, int):
        with torch.no_grad():
            conv1.weight.copy_(old1.weight[keep])
            conv1.bias.copy_(old1.bias[keep])
            norm_scale(norm2).copy_(norm_scale(old_norm)[keep])
            if isinstance(old_norm, nn.GroupNorm):
                norm2.bias.copy_(old_norm.bias[keep])
            conv2.weight.copy_(old2.weight[:, keep])
            conv2.bias.copy_(old2.bias)
    block.conv1, block.norm2, block.conv2 = conv1, norm2, conv2
    if not isinstance(old_norm, nn.GroupNorm):
        from wantofight_model.cpu_kernels import use_fast_cpu_kernels

        use_fast_cpu_kernels(block)  # the new layers take the VAE's CPU kernels, as the ones they replace


def load_pruned_decoder(folder: str | Path, vae, device: torch.device | str = "cpu") -> nn.Module:
    """The pruned decoder saved in `folder`, rebuilt on the structure of `vae`'s decoder."""
    from safetensors.torch import load_file

    folder = Path(folder)
    meta_path = folder / "pruned_decoder.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{folder} holds no pruned decoder (no pruned_decoder.json; make one with "
                                "`wtf train decoder`)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise PruningError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT}")
    decoder = copy.deepcopy(vae.autoencoder.decoder)
    blocks = residual_blocks(decoder)
    missing = sorted(set(meta["hidden_widths"]) - set(blocks))
    if missing:
        raise PruningError(f"{folder} was pruned from another decoder: it has blocks {missing[:3]} this VAE lacks")
    for name, width in meta["hidden_widths"].items():
        prune_block(blocks[name], int(width))
    try:
        decoder.load_state_dict(load_file(str(folder / "decoder.safetensors")))
    except RuntimeError as err:
        raise PruningError(f"{folder}: the pruned decoder does not fit this VAE ({str(err).splitlines()[0]}); "
                           f"it was pruned from {meta.get('vae')}") from None
    return decoder.to(device).eval().requires_grad_(False)
