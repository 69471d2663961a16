"""Run outputs: TensorBoard and JSON logs, console progress, checkpoints."""
