"""Inference: load a trained or shipped model, stream its rollout from prompt frames and keys, decode it to
video (`wtf generate`). It imports no trainer: `train/`, `benchmark/` and `play/` stand on it."""
