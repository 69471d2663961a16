"""One run, the loop: build its parts from the config, run plan -> collect -> update -> evaluate -> log -> save,
play a checkpoint, stop on a signal, continue a run (resume), or hand the same run to rl-games' learner.

The loop imports the parts (agent, envs, scheduler, diagnostics, io, config); it never imports the lab."""
