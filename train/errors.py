"""The trainer's one error type: a run that cannot start or continue, said in one line."""


class TrainError(RuntimeError):
    """A run that cannot start or continue; the message says what to change."""
