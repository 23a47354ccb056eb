"""How close generated frames are to the real ones, as `wtf eval` and `wtf benchmark run` report it.

    psnr, ssim, lp = score(generated, real, lpips_net)     # (T, H, W, 3) uint8 each
    net, backend = lpips_metric("alexnet-owt-7be5be79.pth") # (None, why not) when LPIPS cannot run

PSNR and SSIM are torchmetrics' (data range 1; SSIM Gaussian 11x11, sigma 1.5). LPIPS is the `lpips`
package's v0.1 linear layers on torchvision's ImageNet AlexNet, read from a local file or torchvision's
cache and never downloaded: only package registries are reachable from the project's machines. torch,
torchmetrics and lpips come with the `model` extra and are imported by the functions that use them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


class EvalError(ValueError):
    """Bad inputs to scoring (`wtf eval`, `wtf benchmark run`); the message names the input."""


def torchmetrics_image():
    """PSNR and SSIM from torchmetrics, or an EvalError that says how to install it."""
    try:
        from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure
    except ImportError as err:
        raise EvalError("wtf eval needs torchmetrics for PSNR/SSIM: pip install torchmetrics") from err
    return peak_signal_noise_ratio, structural_similarity_index_measure


ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
"""torchvision's ImageNet AlexNet weights, the backbone LPIPS v0.1 was calibrated on."""


def alexnet_weights(path: str | Path | None = None) -> Path | None:
    """The AlexNet backbone file to use: `path` when given, else torchvision's cache entry if present.
    Nothing is downloaded: only package registries are reachable from the project's machines."""
    import torch

    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise EvalError(f"--lpips-backbone {path}: no such file; give torchvision's AlexNet weights "
                            f"({ALEXNET_FILE}, a state dict with features.*.weight / bias)")
        return path
    cached = Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_FILE
    return cached if cached.is_file() else None


def lpips_metric(backbone: str | Path | None = None):
    """(callable on (N, 3, H, W) in [-1, 1], description) or (None, why not).

    The `lpips` package's v0.1 linear layers ship inside the package; its AlexNet backbone is
    torchvision's ImageNet AlexNet, read from `backbone` (or torchvision's cache) and loaded into the
    package's layer slices by name, so no download is ever attempted.
    """
    try:
        import lpips
    except ImportError:
        return None, "unavailable: the lpips package is not installed (pip install lpips)"
    path = alexnet_weights(backbone)
    if path is None:
        return None, (f"unavailable: no AlexNet backbone weights offline; pass --lpips-backbone PATH to "
                      f"torchvision's {ALEXNET_FILE}")
    import io
    import warnings
    from contextlib import redirect_stdout

    import torch

    with redirect_stdout(io.StringIO()), warnings.catch_warnings():  # lpips prints its setup
        warnings.simplefilter("ignore")
        net = lpips.LPIPS(net="alex", version="0.1", pnet_rand=True, verbose=False).eval()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        load_alexnet_features(net.net, state)
    except (RuntimeError, KeyError, ValueError, OSError, TypeError) as err:
        raise EvalError(f"--lpips-backbone {path}: not torchvision AlexNet weights "
                        f"({type(err).__name__}: {str(err).splitlines()[0][:160]})") from None
    return net, f"lpips {getattr(lpips, '__version__', '?')} (AlexNet from {path.name}, v0.1 linear layers)"


def load_alexnet_features(trunk: torch.nn.Module, state: dict) -> None:
    """Copy torchvision AlexNet `features.I.*` tensors into lpips' `sliceK.I.*` modules (strict)."""
    if not isinstance(state, dict):
        raise TypeError(f"expected a state dict, got {type(state).__name__}")
    ours = trunk.state_dict()  # keys like slice1.0.weight: slice K holds features[I] under name I
    mapped = {key: state[f"features.{key.split('.', 1)[1]}"] for key in ours}
    trunk.load_state_dict(mapped, strict=True)


def eight_bit(frames: torch.Tensor) -> torch.Tensor:
    """Frames in [-1, 1] -> the 8-bit values a video file would hold, as floats (0..255, rounded): what
    every PSNR "over 8-bit RGB" compares, and what `inference.generation.to_uint8` writes."""
    return ((frames.float().clamp(-1, 1) + 1) * 127.5).round()


def psnr_db(mse, peak: float = 1.0, cap: float | None = None):
    """PSNR in dB of a mean squared error (a number or an array) on pixels whose range is `peak` (1 for
    [0, 1], 2 for [-1, 1], 255 for 8-bit): inf where it is 0, or at most `cap`. The project's one PSNR."""
    mse = np.asarray(mse, dtype=np.float64)
    with np.errstate(divide="ignore"):
        db = 10 * np.log10(peak**2 / mse)
    if cap is not None:
        db = np.minimum(db, cap)
    return float(db) if db.ndim == 0 else db


SCORE_BATCH = 16
"""Frames per call into SSIM and LPIPS: their float intermediates for 64 native frames at once held 1.3 GB."""


def score(generated: np.ndarray, real: np.ndarray, lpips_net=None) -> tuple[float, float, float | None]:
    """(T, H, W, 3) uint8 each -> (PSNR dB of the pooled squared error, mean SSIM, mean LPIPS or None),
    computed SCORE_BATCH frames at a time (the same values as all at once)."""
    import torch

    _, ssim_fn = torchmetrics_image()
    sse, ssims, lps = 0.0, [], []
    for i in range(0, len(generated), SCORE_BATCH):
        a = torch.from_numpy(generated[i:i + SCORE_BATCH]).permute(0, 3, 1, 2).float() / 255  # (t, 3, H, W) in [0, 1]
        b = torch.from_numpy(real[i:i + SCORE_BATCH]).permute(0, 3, 1, 2).float() / 255
        sse += float(((a.double() - b.double()) ** 2).sum())
        ssims.append(ssim_fn(a, b, data_range=1.0, reduction="none"))
        if lpips_net is not None:
            with torch.no_grad():
                lps.append(lpips_net(a * 2 - 1, b * 2 - 1).flatten())
    psnr = psnr_db(sse / generated.size)
    lp = float(torch.cat(lps).mean()) if lps else None
    return psnr, float(torch.cat(ssims).mean()), lp
