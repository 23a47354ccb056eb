"""wantofight: collect, annotate, curate, load and train generative fighting-game engines."""

__version__ = "0.1.0"
