"""ShadowHandOpenAI_FF: IsaacGymEnvs' sim-to-real variant of ShadowHand (OpenAI's Learning Dexterity setting) on the
port's hand, with the task file's values (cfg/task/ShadowHandOpenAI_FF.yaml): openai observations (42) for the
policy and full_state's 211 for an asymmetric critic, 20 Hz control (controlFrequencyInv 3), targets averaged with
weight 0.3, 8-second episodes (resetTime) restarted by each success up to 50, a success within 0.4 rad, a fall
costing 50, random forces on the block, and IsaacGymEnvs' domain randomisation on (task.randomize: true).

IsaacGymEnvs writes this variant as its ShadowHand class reading another task file (its YAML's name is ShadowHand);
here the class is ShadowHand's (shadow_hand.py: the 20 Hz step, resetTime and the random forces are there, off
under ShadowHand.yaml), declared under its own name so that task=ShadowHandOpenAI_FF finds its file, its agent
(ShadowHandOpenAI_FFPPO: IsaacGymEnvs' ShadowHandPPOAsymm values) and its entries in RESULTS. ShadowHandOpenAI_LSTM
is the same task under another name: its file starts from ShadowHandOpenAI_FF's (8,192 envs) and its agent is
IsaacGymEnvs' ShadowHandPPOAsymmLSTM.
"""
from __future__ import annotations

import dataclasses

from isaac_ppo.envs.registry import ContractFacts
from isaac_ppo.tasks.manipulation.shadow_hand import ShadowHand


class ShadowHandOpenAI(ShadowHand):
    # the contract suite runs it without the randomisation's observation noise (the last actions must read 0 after
    # a reset) and with ShadowHand's success tolerance, 0.1 rad (at 0.4 a drawn goal is often reached at once, and a
    # success restarts the episode's clock, which the suite's step counts cannot foresee); the block's x (column 15
    # of the 42) starts within resetPositionNoise of 0
    spec = dataclasses.replace(
        ShadowHand.spec, name="ShadowHandOpenAI_FF",
        contract=ContractFacts(overrides={"task": {"randomize": False}, "env": {"successTolerance": 0.1}},
                               last_actions_in_obs=True, reset_column=15, reset_noise=0.01))


class ShadowHandOpenAILSTM(ShadowHandOpenAI):
    spec = dataclasses.replace(ShadowHandOpenAI.spec, name="ShadowHandOpenAI_LSTM")
