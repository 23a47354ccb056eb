"""WanToFight generator model."""
