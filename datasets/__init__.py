"""PyTorch datasets over the curriculum shards (imported as `wantofight.datasets`)."""

if __name__ == "datasets":  # imported by its bare name from the repository root
    from wantofight.shadowing import hand_over

    hand_over(__name__, __path__[0])
