"""PyTorch datasets over the curriculum shards (imported as `wantofight.datasets`)."""
