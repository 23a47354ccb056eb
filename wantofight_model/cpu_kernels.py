"""The Wan VAE's layers on faster CPU kernels: its convolutions on oneDNN, its RMS norm as a sum.

For a float32 convolution on the CPU, PyTorch chooses between oneDNN and its own im2col kernel
(`slow_conv3d`, `_slow_conv2d`); for a batch of 1, a kernel of at most 3x3 and no groups it takes
oneDNN only when N x C x T x H (N x C x H x W in 2D) exceeds 20,480 (`use_mkldnn` in
aten/src/ATen/native/Convolution.cpp: "for some case, native is faster"). The Wan VAE streams a few
frames at a time (the decoder one latent frame, the encoder 4 frames), so at the game's sizes nearly
every one of its convolutions falls below that line, and there oneDNN is the faster one by far. Its
RMS norm (`WanRMS_norm`) calls `F.normalize` over the channel dimension, a strided `linalg_vector_norm`
that is many times slower on the CPU than the same sum of squares written out. On the CPU the decoder
is most of what generating a chunk costs (the tiny DiT is a few percent of it), so these two set the
speed of `wtf generate`, `wtf play`, `wtf benchmark run` and `wtf encode` with a Wan-layout VAE
(`python bench/cpu_kernels.py` measures both side by side).

`use_fast_cpu_kernels(module)` turns each `WanCausalConv3d` and `nn.Conv2d` of `module` into its
oneDNN twin and each `WanRMS_norm` into `SumRMSNorm`: the same layers (same parameters, same state
dict) that take the faster kernel when it applies (CPU, float32, zero padding, no gradient asked for)
and PyTorch's own otherwise (training, bf16, CUDA), as before. The frames agree with PyTorch's kernels
to float32 rounding (tests/test_model_vae.py).
"""

from __future__ import annotations

import functools

import torch
from torch import nn


def _fast(x: torch.Tensor, *weights) -> bool:
    """The faster CPU kernel applies: float32 on the CPU, and no gradient to carry."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and all(w.dtype == torch.float32 for w in weights)
            and not (torch.is_grad_enabled() and (x.requires_grad or any(w.requires_grad for w in weights))))


class _OneDNN:
    """A convolution layer's `_conv_forward` on oneDNN."""

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if _fast(input, weight) and self.padding_mode == "zeros" and isinstance(self.padding, tuple):
            return torch.mkldnn_convolution(input, weight, bias, self.padding, self.stride, self.dilation, self.groups)
        return super()._conv_forward(input, weight, bias)


class OneDNNConv2d(_OneDNN, nn.Conv2d):
    """`nn.Conv2d` on oneDNN (the Wan VAE's spatial up- and downsampling, one frame at a time)."""


@functools.cache
def _classes() -> dict[type, type]:
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanCausalConv3d, WanRMS_norm

    class OneDNNCausalConv3d(_OneDNN, WanCausalConv3d):
        """`WanCausalConv3d` on oneDNN."""

    class SumRMSNorm(WanRMS_norm):
        """`WanRMS_norm` with the channel norm as a sum of squares: x / max(|x|, 1e-12), as F.normalize."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not _fast(x, self.gamma):
                return super().forward(x)
            dim = 1 if self.channel_first else -1
            norm = x.square().sum(dim, keepdim=True).sqrt_().clamp_min_(1e-12)
            return x / norm * self.scale * self.gamma + self.bias

    for cls in (OneDNNCausalConv3d, SumRMSNorm):  # they pickle by this module's name (its __getattr__ below)
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return {WanCausalConv3d: OneDNNCausalConv3d, WanRMS_norm: SumRMSNorm, nn.Conv2d: OneDNNConv2d}


def __getattr__(name: str):  # built on first use: importing this module does not import diffusers
    found = {cls.__name__: cls for cls in _classes().values()}.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found


def use_fast_cpu_kernels(module: nn.Module) -> nn.Module:
    """Every `WanCausalConv3d`, `nn.Conv2d` and `WanRMS_norm` of `module` (in place) on the faster CPU
    kernels; returns `module`."""
    return _swap(module, _classes())


def use_pytorch_kernels(module: nn.Module) -> nn.Module:
    """The inverse: every layer of `module` back in its diffusers / torch class (PyTorch's own kernel
    choice), in place; returns `module`. What the faster kernels are measured and tested against."""
    return _swap(module, {fast: plain for plain, fast in _classes().items()})


def _swap(module: nn.Module, classes: dict[type, type]) -> nn.Module:
    for m in module.modules():
        if type(m) in classes:
            m.__class__ = classes[type(m)]
    return module
