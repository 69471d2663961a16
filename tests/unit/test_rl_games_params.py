"""agent=rl_games's params tree (isaac_ppo/loop/rlgames_params.py) carries the agent config's adaptive schedule as
IsaacGymEnvs' train YAMLs give it to rl-games: schedule_type legacy (rl-games' default) or standard (the hands')."""
from __future__ import annotations

import pytest

pytest.importorskip("hydra")


@pytest.mark.parametrize("task, expected", [("Cartpole", "legacy"), ("ShadowHandOpenAI_LSTM", "standard"),
                                            ("AllegroHand", "standard")])
def test_the_schedule_type_is_the_agent_configs(task, expected):
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.loop.rlgames_params import build_params

    words = [f"task={task}", "sim=mujoco", "num_envs=64", "agent.num_mini_batches=4", "max_iterations=1"]
    config = build_params(compose_config(words), 64, "/tmp/run", states=7)["config"]
    assert config["schedule_type"] == expected
    assert config["central_value_config"]["schedule_type"] == expected
    config = build_params(compose_config(words + ["agent.schedule_type=legacy"]), 64, "/tmp/run")["config"]
    assert config["schedule_type"] == "legacy"
