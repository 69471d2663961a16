"""isaac-ppo-train's own --help and --version (Hydra's help is --hydra-help)."""
from __future__ import annotations

import sys

HELP = """usage: isaac-ppo-train [KEY=VALUE ...] [-m]    (Hydra overrides; -m runs a sweep)

Train PPO on an IsaacGymEnvs task, on the embedded MuJoCo ports (sim=mujoco, CPU) or Isaac Gym (sim=isaacgym).

  isaac-ppo-train task=Ant                                   train Ant with IsaacGymEnvs' settings
  isaac-ppo-train task=Ant num_envs=2048 seed=1 max_iterations=300
  isaac-ppo-train -m task=Ant seed=0,1,2                     a sweep: one run per seed
  isaac-ppo-train task=Ant resume=auto                       continue this experiment's newest run
  isaac-ppo-train task=Ant test=true checkpoint=PATH         play a checkpoint (.pt, or an rl-games .pth)

Common keys: task=Ant|Anymal|Cartpole|Humanoid  sim=auto|mujoco|mjwarp|isaacgym  device=cpu|cuda  num_envs=N  seed=N (-1: random)
  max_iterations=N  max_env_steps=N  agent.learning_rate=X  agent.minibatch_size=N | agent.num_mini_batches=N
  scheduler=fixed|budget|schedule|adaptive|concurrent  preset=NAME  diagnostics=default|full|off
  eval.interval_env_steps=N (env steps)  experiment=NAME  runs_dir=DIR  (train=NAME is agent=NAME, as in IsaacGymEnvs)

Results: runs_dir/<experiment or task>/<date_time>/: metrics.jsonl (a row per iteration), metrics.json (the
summary, with final_eval: the number to compare runs on), tb/ (TensorBoard), config.yaml, checkpoints/
(last.pt, best.pt, iter_*.pt), train.log. Compare runs with isaac-ppo-report DIR; export a policy with
isaac-ppo-export. Every key: isaac-ppo-train --cfg job; Hydra's own help: --hydra-help. README: the keys,
the schedulers, what each number means."""


def version() -> str:
    """The package's version and those of what it runs on (read from the installed metadata: no imports)."""
    from importlib import metadata

    from isaac_ppo import __version__

    def of(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    parts = ", ".join(f"{name} {of(name)}" for name in ("torch", "mujoco", "hydra-core", "rl-games"))
    return f"isaac-ppo {__version__} (python {sys.version.split()[0]}, {parts})"
