"""Stage 2 (docs/stages.md): causal adaptation with diffusion forcing, initialised from a stage-1 checkpoint.

What changes from stage 1 (everything else, including the loop, checkpoints and resume, is shared):

 1. Attention is **block-causal**: bidirectional inside a chunk, each chunk sees itself and the 2
    previous chunks (`block_causal_mask`), exactly the receptive field of the rolling KV cache.
 2. **Every chunk gets its own noise level** (diffusion forcing). For a sample of chunk 0 + n chunks
    (latent frame 0, then frames 2c-1, 2c for chunk c):

        chunk 0   context: clean, or noised to sigma_ctx ~ U(0, noise_max) with prob. noise_prob
                  (stage 1's context noise augmentation, kept)
        chunk c   with prob. chunk_share (c < n): a clean context chunk, sigma_c ~ U(0, chunk_sigma_max)
                  otherwise sigma_c = shift(u_c), u_c ~ U(0, 1) independently per chunk (c = 1 .. n)
        x[c]      = (1 - sigma_c) z[c] + sigma_c n[c],   timestep 1000 sigma_c for both its frames
        loss      = mean over the target chunks (not context) of || v_theta(x, t)[c] - (n[c] - z[c]) ||^2

    The clean/noised context scheme: there is no separate "clean context" copy of the sequence.
    Chunk c is at once a denoising target at its own level sigma_c and the context of chunks c+1
    and c+2 *at that same level*, and the model is told each chunk's level through its per-frame
    timestep. So the model learns to predict a chunk from context at any mixture of noise levels,
    which covers inference, where the context is each earlier chunk as the cache stored it: clean
    (the clean cache write, which the context chunks train for) or at the noise level of its
    penultimate denoising step (the paper's write), and clean (t = 0) for the prompt.
    A single noise level for all chunks (stage 1's scheme) would only ever show the model context
    as noisy as the target itself, and the causal model collapses to that one level (docs/stages.md).
 3. The validation video is generated as at inference: chunk by chunk over the rolling KV cache.

`--init-from` takes a stage-1 run or checkpoint folder; its EMA weights (when present) become the
starting point. A stage-2 run, checkpoint or exported folder is taken the same way, to fine-tune it: its
weights with a fresh optimiser, schedule and step count (`--resume` continues a run exactly instead). A
Wan2.1 checkpoint (file or folder) is also accepted, as in stage 1.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from wantofight.train.stage1 import Stage1Trainer
from wantofight.train.trainer import TrainError


def is_trainer_checkpoint(path: str | Path) -> bool:
    """A run or checkpoint folder, or the name of a shipped model (a path that exists wins over a name, as in
    `resolve_checkpoint`)."""
    from wantofight.inference.shipped import shipped_path

    path = Path(path) if Path(path).exists() else shipped_path(str(path)) or Path(path)
    return path.is_dir() and ((path / "config.json").exists() or (path / "checkpoints").is_dir())


def load_trainer_weights(trainer, model: nn.Module, source: str | Path, expect_stages: tuple[str, ...],
                         prefer_ema: bool = True) -> Path:
    """Load a trainer checkpoint (run or checkpoint folder) of one of `expect_stages` into `model`
    (a WanToFight), after checking its preset and model config match the trainer's: the one difference
    allowed is a model trained without the previous-frame input loaded into one with it (its channels at
    zero, so it computes the same at the start)."""
    from wantofight.inference import checkpoints
    from wantofight.inference.generation import resolve_checkpoint
    from wantofight.inference.shipped import own_vae
    from wantofight.train import checkpoint as ckpt

    path = resolve_checkpoint(source)
    saved = checkpoints.read_config(path)
    if saved.get("stage") not in expect_stages:
        raise TrainError(f"{path} is a {saved.get('stage')} checkpoint; {trainer.stage} starts from "
                         f"{' or '.join(expect_stages)}")
    if saved.get("preset") != trainer.config.preset:
        raise TrainError(f"{path} was trained with preset {saved.get('preset')!r}, not {trainer.config.preset!r}: "
                         f"pass --preset {saved.get('preset')}")
    saved_model = dict(saved["model"])
    if saved_model.get("vae"):  # a shipped model names its own VAE relative to its folder
        saved_model["vae"] = {**saved_model["vae"], "pretrained": own_vae(path, saved_model["vae"].get("pretrained"))}
    changed = ckpt.model_differences(saved_model, trainer.model_config.to_dict())
    widened = changed == ["previous_frame_input=False"]  # the channels are added, at zero: the same model
    if changed and not widened:
        raise TrainError(f"{path} holds a model with different {', '.join(changed)}")
    try:
        state, used = checkpoints.read_weights(path, "ema" if prefer_ema else "model")
    except ValueError as e:
        raise TrainError(str(e)) from None
    state["patch_embedding.weight"] = model.dit.fit_patch_embedding(state["patch_embedding.weight"])
    model.dit.load_state_dict(state)
    ref = checkpoints.read_tensors(path, "reference_encoder.safetensors")
    if ref is not None:
        model.reference_encoder.load_state_dict(ref)
    trainer.log(f"initialised from {path} ({'EMA' if used == 'ema' else 'raw'} weights of step {saved.get('step')})"
                + ("; the previous-frame input it was trained without starts at zero" if widened else ""))
    return path


class Stage2Trainer(Stage1Trainer):
    """Block-causal attention and one noise level per chunk (diffusion forcing)."""

    stage = "stage2"
    attention = "block_causal"
    init_stages = ("stage1", "stage2")  # a stage 2 fine-tunes a stage-2 model (its weights, a fresh optimiser)

    def build_model(self, init_from):
        if init_from is not None and is_trainer_checkpoint(init_from):
            model = super().build_model(None)
            self.init_checkpoint = load_trainer_weights(self, model, init_from, self.init_stages)
            return model
        return super().build_model(init_from)

    def chunk_index(self, num_frames: int) -> torch.Tensor:
        """(F,) chunk of each latent frame: 0 for frame 0, ceil(f / 2) after it."""
        from wantofight_model.attention import chunk_of_frame

        return chunk_of_frame(torch.arange(num_frames), self.model_config.chunk_latent_frames)

    def draw(self, latents: torch.Tensor, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample noise (B, C, F, h, w) and per-frame sigmas (B, F), constant within a chunk; which
        frames are targets (`last_targets`, (B, F)): not chunk 0, not a context chunk."""
        B, _, F = latents.shape[:3]
        chunks = self.chunk_index(F).to(self.device)
        n_chunks = int(chunks[-1]) + 1
        ctx = self.config.context
        noises, sigmas, targets = [], [], []
        for i in range(B):
            gen = self.noise_generator(step, micro, self.global_index(i, B))
            u = torch.rand(n_chunks, generator=gen, device=self.device)
            use_ctx_noise, ctx_u = torch.rand(2, generator=gen, device=self.device)
            noises.append(torch.randn(latents.shape[1:], generator=gen, device=self.device))
            pick, level = torch.rand(2, n_chunks, generator=gen, device=self.device)  # last: earlier draws kept
            per_chunk = self.flow.shift_sigma(u)
            per_chunk[0] = ctx_u * ctx.noise_max if use_ctx_noise < ctx.noise_prob else 0.0
            context = pick < ctx.chunk_share
            context[0], context[-1] = True, False  # chunk 0 is the prompt; no chunk of the window continues the last
            per_chunk[1:] = torch.where(context[1:], level[1:] * ctx.chunk_sigma_max, per_chunk[1:])
            sigmas.append(per_chunk[chunks])
            targets.append(~context[chunks])
        self.last_sigmas = torch.stack(sigmas)  # (B, F), read by tests and logging
        self.last_targets = torch.stack(targets)  # (B, F) bool, read by `reduce_loss`
        return torch.stack(noises), self.last_sigmas

    def reduce_loss(self, squared: torch.Tensor) -> torch.Tensor:
        """(B, C, F, h, w) squared errors -> (B,) mean over the target chunks' frames of this draw: context
        chunks (chunk 0 and the clean ones) carry no loss."""
        mask = self.last_targets[:, None, :, None, None].to(squared.dtype)  # (B, 1, F, 1, 1)
        cells = mask.sum(dim=(1, 2, 3, 4)) * squared[0, :, 0].numel()  # (B,) target frames x C h w
        return (squared * mask).sum(dim=(1, 2, 3, 4)) / cells

    @torch.no_grad()
    def sample(self, batch: dict, steps: int, num_latent_frames: int) -> torch.Tensor:
        """Streaming generation over the rolling KV cache, from the clip's first frame and keys."""
        from wantofight_model.generate import StreamingGenerator

        z = batch["latents"][:, :, :num_latent_frames]
        F = z.shape[2]
        T = 1 + self.model_config.vae_time_factor * (F - 1)
        keys = batch["keys"][:, :T]
        L = self.model_config.chunk_frames
        generator = StreamingGenerator(self._sampling_model(), sampler=getattr(self, "sampler_name", "euler"))
        chunks = (keys[:, 1 + c * L:1 + (c + 1) * L] for c in range((T - 1) // L))
        gen = self.noise_generator(-1, 0, 0)
        with self.autocast():
            out = list(generator.generate_latents(z[:, :, :1], chunks, batch["ref_tokens"], steps,
                                                  prompt_keys=keys[:, :1], generator=gen))
        return torch.cat([z[:, :, :1]] + [o.float() for o in out], dim=2)

    def _sampling_model(self):
        return self.model
