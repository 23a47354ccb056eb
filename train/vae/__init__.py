"""The game VAE's training, in one folder: a game-domain autoencoder trained on duel frames, either
diffusers' `AutoencoderKLWan` in a small config (the Wan layout, `model.vae.kind=wan`) or the per-frame
`FrameAutoencoder` (diffusers' 2D `AutoencoderKL` on each frame, `model.vae.kind=frame`).

    report = train_vae("data/curriculum", "runs/vae", size=(128, 128), max_steps=2000)
    vae = load_vae_folder("runs/vae")                 # what --vae / model.vae.pretrained load

The contract: VAE_DIR is a plain diffusers folder (`config.json` + `diffusion_pytorch_model.safetensors`)
of either class, 16 latent channels, whose config's `latents_mean` / `latents_std` are measured on the
training frames so that normalised latents have unit variance per channel, plus `report.json`. The Wan
layout compresses 4x in time (causal), the per-frame one not at all; both 8x in space by default
(docs/contracts.md, "VAE folders"). Nothing else in the code knows it was trained here: the DiT,
the streaming decoders and `wtf encode` take it as they take a Wan2.1 VAE (`wtf train decoder` prunes the
Wan layout only). The folder appears complete or not at all (built beside it, renamed).

`VAETrainer` is the shared trainer skeleton with the autoencoder as its network: `batch()` cuts a
random `vae.clip_frames` run and `vae.crop` square from each data window, `loss()` is L1 (+ MSE) on
pixels (+ `vae.fighter_weight` x MSE on the fighters' pixels) + an L1 on horizontal/vertical pixel
differences (sprite edges) + a small KL (+ `vae.adv_weight` x an adversarial term from a patch critic on
the fighters, which `step()` then updates: train/vae/critic.py), `validate()` measures PSNR on fixed
held-out windows.
Checkpoints, Ctrl-C and `--resume` are the skeleton's; they live in the staging folder
`.VAE_DIR.partial/` until the run ends. Settings: `--set vae.FIELD=VALUE` (below), the architecture
`--set model.vae.base_dim=32`, the optimiser `--set optim.lr=...`.
"""


# config.py    VAETrainConfig (`--set vae.*`), the run's default TrainConfig, GAME_VAE, parse_size
# losses.py    Reconstruction (the training forward), reconstruction_loss, stage_picture, fighter_mask
# critic.py    the patch critic on the fighters (`vae.adv_weight`)
# measure.py   PSNR of a round trip (whole, last latent frame, fighters), latent statistics
# trainer.py   VAETrainer and train_vae (`wtf train vae`)
# pruned_decoder.py   `wtf train decoder`: a narrower streaming decoder distilled from a VAE's
# The models themselves (WanVAE, StreamingDecoder; FrameVAE) are wantofight_model/vae.py and frame_vae.py.
