"""The fighting-game benchmark (`wtf probe`, `wtf benchmark`): a frame -> state probe trained on RAM,
test cases mined from recordings, scoring of any model against the emulator, and the report.

It reads recordings (collect/), their annotations (annotate/) and checkpoints (train/, the model);
nothing but the CLI imports it. Rules and formats: docs/benchmark.md. Not to be confused with bench/, the
developers' speed scripts (bench/README.md).
"""
