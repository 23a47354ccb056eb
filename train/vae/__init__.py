"""The game VAE's training, in one folder: a game-domain Wan VAE, diffusers' `AutoencoderKLWan` in a small
config, trained on duel frames.

    report = train_vae("data/curriculum", "runs/vae", size=(128, 128), max_steps=2000)
    vae = WanVAE.from_pretrained("runs/vae")          # what --vae / model.vae.pretrained load

The contract: VAE_DIR is a plain diffusers `AutoencoderKLWan` folder (`config.json` +
`diffusion_pytorch_model.safetensors`) with the Wan layout (4x time, 8x space, causal, 16 latent
channels), whose config's `latents_mean` / `latents_std` are measured on the training frames so that
normalised latents have unit variance per channel, plus `report.json`. Nothing else in the code
knows it was trained here: the DiT, `StreamingDecoder`, `wtf encode` and `wtf train decoder` take it
as they take a Wan2.1 VAE. The folder appears complete or not at all (built beside it, renamed).

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
# The model itself (WanVAE, StreamingDecoder) is wantofight_model/vae.py.
