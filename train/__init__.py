"""The three-stage WanToFight trainer (`wtf train`)."""
