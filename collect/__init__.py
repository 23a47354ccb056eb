"""Drive an emulator with both players and record frames, keys and RAM (`wtf collect`)."""
