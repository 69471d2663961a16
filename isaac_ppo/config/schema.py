"""The shape of the composed config: typed dataclasses, and the merge whose result the code reads.

The run's defaults live in the YAML tree (cfg/config.yaml and its groups); the agent's live here, each key declared
once with its type, default, domain and meaning (key()), so a task's agent YAML holds only what the task sets. A
field without a default is required, so a key missing from a user's own agent or diagnostics YAML is reported by
name instead of surfacing later as an OmegaConf error.
The task node is the task's own (IsaacGymEnvs keys) and the scheduler node is its class's constructor
arguments: both stay free-form here and are checked by what reads them.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from isaac_ppo.domains import Domain, choice, did_you_mean, integer, positive, real
from isaac_ppo.errors import UserError


def key(default: Any = MISSING, domain: Optional[Domain] = None, meaning: str = "", factory: Any = None) -> Any:
    """A config key, declared once: its type (the annotation), default (MISSING: required), domain (checked before
    a run starts: config/checks.py) and meaning."""
    metadata = {"domain": domain, "meaning": meaning}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass
class RnnConfig:
    """rl-games' network.rnn block, as IsaacGymEnvs' recurrent train configs write it (agent/model.py); name null
    (the default): no recurrence. (Always a node, never null itself, so that agent.network.rnn.name=lstm and
    agent.network.rnn={name:lstm,units:256} both work on the command line.)"""
    name: Optional[str] = key(None, choice("lstm", "gru", optional=True),
                              "the recurrent layer: lstm or gru; null: none (feed-forward)")
    units: Optional[int] = key(None, integer(1, optional=True), "its width (hidden units per layer); required with "
                                                                "a name")
    layers: int = key(1, integer(1), "stacked recurrent layers")
    before_mlp: bool = key(False, meaning="true: observation -> rnn -> MLP; false: observation -> MLP -> rnn")
    layer_norm: bool = key(False, meaning="a LayerNorm on the recurrent output")
    concat_input: bool = key(False, meaning="after the MLP: the rnn reads the MLP's output and the observation")


@dataclasses.dataclass
class NetworkConfig:
    hidden: List[int] = key(meaning="the MLP's widths (the actor's, and a shared or separate critic's)")
    activation: str = key("elu", choice("elu", "relu", "tanh", "selu"), "the hidden layers' activation")
    separate: bool = key(False, meaning="false: a shared actor-critic trunk (rl-games); true: separate actor and "
                                        "critic MLPs")
    init_log_std: float = key(0.0, real(), "the state-independent log-std's initial value")
    critic_hidden: Optional[List[int]] = key(None, meaning="a separate critic's own widths (null: the actor's)")
    rnn: RnnConfig = key(meaning="a recurrent actor-critic (rl-games' network.rnn); rnn.name null: feed-forward",
                         factory=RnnConfig)
    critic_rnn: RnnConfig = key(meaning="a separate critic's own recurrence (rl-games' central value rnn block); "
                                        "critic_rnn.name null: the actor's rnn", factory=RnnConfig)


@dataclasses.dataclass
class AgentConfig:
    """PPO's values. A task's agent YAML (cfg/agent/<Task>PPO.yaml) holds what the task sets (its network, rollout,
    minibatch, epochs, budget and what IsaacGymEnvs' <Task>PPO.yaml sets apart from these); every other key takes
    its default here: the value most of IsaacGymEnvs' PPO configs use, or rl-games' own. A full YAML that sets
    every key (IsaacGymEnvs style) loads as well."""

    network: NetworkConfig
    horizon: int = key(domain=integer(1), meaning="rollout length: control steps per env per iteration")
    minibatch_size: int = key(domain=integer(1), meaning="transitions per minibatch (the batch: num_envs x horizon)")
    mini_epochs: int = key(domain=integer(1), meaning="epochs over each batch")
    max_epochs: int = key(domain=integer(1), meaning="IsaacGymEnvs' name for the run's budget: PPO iterations (a "
                                                     "batch collected and learned from), when max_iterations is "
                                                     "not given; not epochs over a batch")
    num_mini_batches: Optional[int] = key(None, integer(1, optional=True),
                                          "minibatches per epoch (rsl_rl's form); given, minibatch_size = batch / "
                                          "this")
    learning_rate: float = key(3.0e-4, positive(), "Adam's step size (the adaptive schedule's start)")
    lr_schedule: str = key("adaptive", choice("adaptive", "linear", "constant"),
                           "adaptive (rl-games': the KL to kl_threshold), linear (to 0 at the budget) or constant")
    kl_threshold: float = key(0.008, positive(), "the adaptive schedule's target KL")
    schedule_type: str = key("legacy", choice("legacy", "standard"),
                             "when the adaptive schedule adapts: after every minibatch from its KL (legacy, rl-games' "
                             "default) or after every epoch from its minibatches' mean KL (standard: IsaacGymEnvs' "
                             "hand and manipulation configs); agent/ppo.py")
    kl_reference: str = key("update_start", choice("update_start", "previous_epoch"),
                            "what the adaptive schedule's KL measures a minibatch's policy change from: the "
                            "update's start (ours, rsl_rl's) or each row's previous epoch (rl-games', the measure "
                            "IsaacGymEnvs' kl_threshold values were set for); agent/ppo.py")
    gamma: float = key(0.99, real(0.0, 1.0, low_open=True), "the discount")
    lam: float = key(0.95, real(0.0, 1.0), "GAE lambda (rl-games: tau)")
    clip: float = key(0.2, positive(), "PPO's ratio clip (rl-games: e_clip), also the value clip")
    clip_value: bool = key(True, meaning="clip the value loss around the old values")
    critic_coef: float = key(4.0, real(0.0), "the value loss's weight")
    entropy_coef: float = key(0.0, real(0.0), "the entropy bonus's weight")
    bounds_loss_coef: float = key(0.0001, real(0.0), "the weight of the penalty on action means past [-1.1, 1.1]")
    truncate_grads: bool = key(True, meaning="clip the gradient's norm to grad_norm")
    grad_norm: float = key(1.0, positive(), "the gradient norm clipped to (with truncate_grads)")
    reward_scale: float = key(1.0, positive(), "the reward's scale before learning (rl-games: scale_value); a sign "
                                               "would turn the task's reward around, zero erase it")
    normalize_input: bool = key(True, meaning="running mean/std of the observations")
    normalize_value: bool = key(True, meaning="running mean/std of the returns, for the critic")
    normalize_advantage: bool = key(True, meaning="advantages standardised per minibatch")
    mixed_precision: bool = key(False, meaning="float16 autocast; CUDA only, ignored on the CPU (as rl-games)")
    normalizer_update: str = key("before_update", choice("before_update", "after_update"),
                                 "when the observation and value normalisers absorb a batch: before the update "
                                 "(it trains the policy that acts next) or after it (rsl_rl's order); agent/ppo.py")
    stale_clip: str = key("proximal", choice("behaviour", "proximal"),
                          "concurrent collection: clip around the policy at the update's start (proximal: decoupled "
                          "PPO; the default since issue 90) or pi / pi_behaviour (HTS-RL's ratio as issue 48 ran "
                          "it); agent/ppo.py")
    stale_weight: str = key("auto", choice("auto", "importance", "truncated", "none"),
                            "concurrent collection, the proximal clip: each transition's surrogate weighted by "
                            "pi_start / pi_behaviour (importance: decoupled PPO), by min(1, that ratio) "
                            "(truncated), or not at all (none: APPO's); auto: none where V-trace corrects the "
                            "advantages, importance where nothing else does; agent/stale.py")
    stale_correction: str = key("auto", choice("auto", "none", "vtrace"),
                                "concurrent collection: the advantages and value targets corrected for the "
                                "one-update lag by V-trace's truncated importance weights (vtrace, APPO's), or as "
                                "collected (none); auto: vtrace for a feed-forward network with the current update, "
                                "none for a recurrent one or stale_update=delayed; agent/stale.py")
    stale_update: str = key("current", choice("current", "delayed"),
                            "concurrent collection: the update computed at the current parameters, or at the "
                            "behaviour policy's with its step added to the current ones (HTS-RL's delayed "
                            "gradient); agent/stale.py")
    seq_length: int = key(4, integer(1), "recurrent networks: the steps of a truncated-BPTT chunk (rl-games' "
                                         "seq_length; its minibatches are whole chunks)")
    zero_rnn_on_done: bool = key(True, meaning="recurrent networks: the state is zeroed where an episode ends "
                                               "(rl-games')")
    games_to_track: int = key(100, integer(1), "the console's training return: the mean of the last this many "
                                               "finished episodes (rl-games')")
    name: str = key("PPO", meaning="the agent config's name (IsaacGymEnvs': <Task>PPO)")
    backend: str = key("isaac_ppo", choice("isaac_ppo", "rl_games"),
                       "who trains with these values: isaac_ppo, or rl-games (agent=rl_games: loop/rlgames.py)")


def schema_keys(cls: Any, prefix: str = "") -> List[str]:
    """Every dotted key a schema declares, its nested schemas' included (the task and scheduler nodes are free)."""
    import typing

    keys: List[str] = []
    for name, hint in typing.get_type_hints(cls).items():
        inner = [arg for arg in getattr(hint, "__args__", ()) if dataclasses.is_dataclass(arg)]  # Optional[X]
        hint = inner[0] if inner else hint
        if dataclasses.is_dataclass(hint):
            keys += schema_keys(hint, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def agent_domains() -> Dict[str, Domain]:
    """The domain of every agent key that declares one, by its dotted name (agent.network.activation, ...)."""
    found: Dict[str, Domain] = {}
    for prefix, cls in (("agent.", AgentConfig), ("agent.network.", NetworkConfig),
                        ("agent.network.rnn.", RnnConfig), ("agent.network.critic_rnn.", RnnConfig)):
        for field in dataclasses.fields(cls):
            if field.metadata.get("domain") is not None:
                found[prefix + field.name] = field.metadata["domain"]
    return found


@dataclasses.dataclass
class DiagnosticsConfig:
    enabled: bool
    interval_iterations: int
    samples: int
    delta: float
    tau: float
    grid: int
    coverage: bool
    coverage_method: str
    variants: bool
    plot: bool
    probe_set: str = ""


@dataclasses.dataclass
class EvalConfig:
    interval_env_steps: int
    num_envs: int
    final: bool
    stochastic: bool = False


@dataclasses.dataclass
class Config:
    task: Any
    agent: AgentConfig
    scheduler: Any
    diagnostics: DiagnosticsConfig
    eval: EvalConfig
    experiment: str
    num_envs: Optional[int]
    seed: int
    max_iterations: Optional[int]
    max_env_steps: Optional[int]
    sim: str
    device: str
    headless: bool
    test: bool
    checkpoint: str
    resume: str
    save_interval_iterations: int
    max_diverged_fraction: float
    play_episodes: int
    capture_video: bool
    save_probe_set: str
    torch_threads: int
    collect_torch_threads: int
    runs_dir: str
    multi_gpu: bool
    dist_backend: str
    # keys added since runs were first written carry their cfg/config.yaml default here too: a config.yaml from
    # before them resumes (config.resume_mismatch)
    capture_video_interval_iterations: int = 50
    capture_video_len: int = 200
    # IsaacGymEnvs' keys (config/isaacgymenvs.py)
    torch_deterministic: bool = False
    rl_device: Optional[str] = None
    sim_device: Optional[str] = None
    pipeline: Optional[str] = None
    graphics_device_id: Optional[int] = None
    force_render: bool = False
    # Weights & Biases, IsaacGymEnvs' keys (io/wandb_sink.py)
    wandb_activate: bool = False
    wandb_project: str = "isaac-ppo"
    wandb_entity: Optional[str] = ""
    wandb_group: str = ""
    wandb_name: str = ""
    wandb_tags: List[str] = dataclasses.field(default_factory=list)
    wandb_logcode_dir: str = ""
    wandb_logcode: bool = False
    # a machine profile (cfg/profile/): its values were composed in; the name records which
    profile: str = "none"
    # the critic also sees the task's critic observations (IsaacGymEnvs' env.asymmetric_observations and states)
    asymmetric: bool = False


_TEMPLATE: List[DictConfig] = []  # the schemas as one structured config, built once (merge copies it, never changes it)


def _missing_keys(tree: Any, prefix: str = "") -> List[str]:
    """OmegaConf.missing_keys' dotted keys ("a.b", "a.b[0]"), found in the plain copy of the config (to_container
    keeps a missing value as "???"): a third of the time of OmegaConf's own walk over the nodes, a tenth of a load."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    found = []
    for key, value in items:
        path = f"{prefix}[{key}]" if isinstance(tree, list) else f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, str) and value == MISSING:
            found.append(path)
        else:
            found.extend(_missing_keys(value, path))
    return found


def typed(resolved: Any) -> DictConfig:
    """The schemas' merge of a resolved config (types converted, every required key present), unchecked."""
    if not _TEMPLATE:  # (building it is a third of a merge's cost: the config fuzzer merges ~1,700 times)
        _TEMPLATE.append(OmegaConf.structured(Config))
    try:
        # unsafe_merge: the resolved tree's nodes are moved into the copy, not copied again (merge's second deep
        # copy; the fuzzer's loads take a fifth less). Safe here: the first input is our own fresh copy, and the
        # second is a plain container that unsafe_merge wraps first, so neither the template nor the caller's
        # tree is touched
        cfg = OmegaConf.unsafe_merge(copy.deepcopy(_TEMPLATE[0]), resolved)
    except ConfigKeyError as error:  # a key the schemas do not have (typed as +KEY=..., or in a YAML of one's own)
        key = str(getattr(error, "full_key", "") or "")
        known = schema_keys(Config)
        raise UserError(f"unknown config key {key!r}{did_you_mean(key, known)}: nothing reads it; "
                        "`isaac-ppo-train --cfg job` lists the keys") from None
    except OmegaConfBaseException as error:
        key = str(getattr(error, "full_key", "") or "")
        raise UserError(f"config key {key}: {str(error).splitlines()[0]}") from None
    missing = sorted(_missing_keys(OmegaConf.to_container(cfg)))
    if missing:
        raise UserError(f"config key {missing[0]} is missing: set it in your YAML or on the command line "
                        f"({missing[0]}=...)")
    OmegaConf.set_readonly(cfg, True)  # read everywhere, changed nowhere: a run's config.yaml is what ran
    return cfg
