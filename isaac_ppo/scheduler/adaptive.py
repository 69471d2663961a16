"""The adaptive plan: a closed loop on diagnostics that moves the batch split along a ladder of num_envs.

Why: at a fixed batch size B, more envs with shorter rollouts keep the network's feature rank higher and its
dormant-neuron fraction lower (arXiv 2506.03404, "more envs, shorter rollouts"); the paper leaves a schedule as
an open question. This is a simple, deterministic one to study it.

The rule (defaults in brackets):
  * Ladder: num_envs = min_num_envs, x factor, ..., max_num_envs [base//4, x2, base num_envs]; with
    keep_batch_size [true] rollout_length = B // num_envs (B = batch_size, else the base plan's), so a rung
    up means more envs and shorter rollouts at the same B. Start at start_num_envs [min_num_envs].
  * Signals, from each iteration's stats and diagnostics when present and finite: feature_rank,
    dormant_fraction, ess, kl; each smoothed by an EMA [0.3 weight of the new value]. A signal counts after
    `warmup` [3] observations; the ref of rank and dormancy is their EMA then, re-taken at every move.
  * Stress, one rung UP, when any: rank < (1 - rank_drop) x ref [0.10]; dormant > ref + dormant_rise [0.05];
    ess < ess_low [0.5]; kl > kl_high [0.05].
  * Relief, one rung DOWN, when every signal with data is clearly healthy: rank > (1 + rank_drop) x ref,
    dormant < ref - dormant_rise, ess > ess_high [0.8], kl < kl_low [0.01]; and rank or dormancy has data
    (KL and ESS alone never move down). Between the thresholds nothing moves (hysteresis).
  * At most one rung per move, never past the ladder's ends, and no move within min_dwell [20] iterations
    of the previous move (or of the first observed iteration). Every move is logged with its reason.

observe(k) decides after iteration k's update, so the new split is plan(k + 1)'s (plan(k + 2)'s with
concurrent collection, where plan(k + 1) is asked before observe(k)).

What issue 21's study found on Ant (docs/schedulers.md, "Adaptive"; benchmarks/history/studies.md): the premise did not
hold there (4096 x 16 ended below 256 x 256), and this rule's signal told the runs apart by nothing (it is under
stress in every run alike, a fixed schedule in disguise). scheduler=fixed, the default, is what the study supports;
the rule stays to study schedules with: credit one only against its placebo (isaac-ppo-study placebo).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Mapping, Optional

from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan, Scheduler

SIGNALS = ("feature_rank", "dormant_fraction", "ess", "kl")
STATE_VERSION = 1


class AdaptiveScheduler(Scheduler):
    """Moves num_envs (and, at a kept batch size, rollout_length) one rung at a time on diagnostics."""

    def __init__(
        self,
        base: Plan,
        mode: str = "sync",
        min_num_envs: Optional[int] = None,
        max_num_envs: Optional[int] = None,
        factor: int = 2,
        start_num_envs: Optional[int] = None,
        keep_batch_size: bool = True,
        batch_size: Optional[int] = None,
        minibatches: Optional[int] = None,
        ema: float = 0.3,
        warmup: int = 3,
        min_dwell: int = 20,
        rank_drop: float = 0.10,
        dormant_rise: float = 0.05,
        ess_low: float = 0.5,
        ess_high: float = 0.8,
        kl_low: float = 0.01,
        kl_high: float = 0.05,
    ):
        super().__init__(base, mode)
        self.factor = _integer("factor", factor, 2)
        if min_num_envs is None:
            if base.num_envs // 4 < 1:
                raise UserError(
                    f"scheduler.min_num_envs=null takes num_envs // 4 = {base.num_envs} // 4 = 0: set "
                    f"scheduler.min_num_envs"
                )
            min_num_envs = base.num_envs // 4
        self.min_num_envs = _integer("min_num_envs", min_num_envs, 1)
        self.max_num_envs = _integer("max_num_envs", base.num_envs if max_num_envs is None else max_num_envs, 1)
        if self.min_num_envs > self.max_num_envs:
            raise UserError(
                f"scheduler.min_num_envs={self.min_num_envs} is above scheduler.max_num_envs={self.max_num_envs}"
                f" (null: num_envs // 4 and num_envs)"
            )
        ladder = [self.min_num_envs]
        while ladder[-1] < self.max_num_envs:
            ladder.append(ladder[-1] * self.factor)
        if ladder[-1] != self.max_num_envs:
            raise UserError(
                f"scheduler.max_num_envs={self.max_num_envs} is not scheduler.min_num_envs={self.min_num_envs} "
                f"times a power of scheduler.factor={self.factor} (the ladder would run "
                f"{', '.join(str(n) for n in ladder)}): set them so that it is"
            )
        self.ladder: List[int] = ladder

        self.keep_batch_size = _boolean("keep_batch_size", keep_batch_size)
        if self.keep_batch_size:
            self.batch_size = _integer("batch_size", base.batch_size if batch_size is None else batch_size, 1)
            for n in ladder:
                if self.batch_size % n or self.batch_size // n < 1:
                    raise UserError(
                        f"scheduler.min_num_envs={self.min_num_envs}, scheduler.max_num_envs={self.max_num_envs}, "
                        f"scheduler.factor={self.factor}: the rung num_envs={n} does not divide the batch size "
                        f"{self.batch_size} (scheduler.batch_size, else num_envs x agent.horizon): every rung "
                        f"must, so that rollout_length = batch_size // num_envs is whole and at least 1"
                    )
        elif batch_size is not None:
            raise UserError(
                f"scheduler.batch_size={batch_size} applies only with scheduler.keep_batch_size=true: with false "
                f"the batch is num_envs x agent.horizon and grows with num_envs; set batch_size to null"
            )
        else:
            self.batch_size = None
        self.minibatches = None if minibatches is None else _integer("minibatches", minibatches, 1)

        start = self.min_num_envs if start_num_envs is None else _integer("start_num_envs", start_num_envs, 1)
        if start not in ladder:
            raise UserError(
                f"scheduler.start_num_envs={start} is not on the ladder {', '.join(str(n) for n in ladder)} "
                f"(scheduler.min_num_envs x scheduler.factor^k up to scheduler.max_num_envs)"
            )

        self.ema = _real("ema", ema, 0.0, 1.0, low_open=True)
        self.warmup = _integer("warmup", warmup, 1)
        self.min_dwell = _integer("min_dwell", min_dwell, 0)
        self.rank_drop = _real("rank_drop", rank_drop, 0.0, 1.0, high_open=True)
        self.dormant_rise = _real("dormant_rise", dormant_rise, 0.0, 1.0)
        self.ess_low = _real("ess_low", ess_low, 0.0, 1.0)
        self.ess_high = _real("ess_high", ess_high, 0.0, 1.0)
        self.kl_low = _real("kl_low", kl_low, 0.0, math.inf)
        self.kl_high = _real("kl_high", kl_high, 0.0, math.inf)
        if self.ess_low > self.ess_high:
            raise UserError(f"scheduler.ess_low={self.ess_low} is above scheduler.ess_high={self.ess_high}")
        if self.kl_low > self.kl_high:
            raise UserError(f"scheduler.kl_low={self.kl_low} is above scheduler.kl_high={self.kl_high}")

        # Every rung's plan, built once (resized refuses a minibatch count that does not divide a batch).
        self._plans: List[Plan] = [self._rung_plan(n) for n in ladder]

        # The state: everything below is in state_dict().
        self._rung = ladder.index(start)
        self._last_move: Optional[int] = None  # iteration of the last move, else the first observed one
        self._at_top_logged = False  # "stress at the top rung" logged once per stay there
        self._ema: Dict[str, Optional[float]] = {name: None for name in SIGNALS}
        self._ref: Dict[str, Optional[float]] = {name: None for name in SIGNALS}
        self._count: Dict[str, int] = {name: 0 for name in SIGNALS}

    # ------------------------------------------------------------------------------------------ plans

    def _rung_plan(self, num_envs: int) -> Plan:
        rollout_length = self.batch_size // num_envs if self.keep_batch_size else self.base.rollout_length
        return self.base.resized(num_envs, rollout_length, epochs=None, minibatches=self.minibatches)

    @property
    def num_envs(self) -> int:
        """The current rung's num_envs."""
        return self.ladder[self._rung]

    def plan(self, k: int, history: List[Mapping[str, Any]]) -> Plan:
        return self._plans[self._rung]

    def reachable_plans(self, max_iterations: int, max_env_steps: Optional[int]) -> Iterator[Plan]:
        for plan in self._plans:
            yield plan

    # ------------------------------------------------------------------------------------------ the loop

    def observe(self, k: int, stats: Mapping[str, Any], diag: Mapping[str, Any]) -> None:
        k = int(k)
        if self._last_move is None:
            self._last_move = k  # the start counts as a move for the dwell
        values = {**stats, **diag}
        for name in SIGNALS:
            x = _finite(values.get(name))
            if x is None:
                continue
            previous = self._ema[name]
            self._ema[name] = x if previous is None else self.ema * x + (1.0 - self.ema) * previous
            self._count[name] += 1
            if self._count[name] == self.warmup:
                self._ref[name] = self._ema[name]
        if k - self._last_move < self.min_dwell:
            return
        stress = self.stress()
        if stress:
            if self._rung + 1 < len(self.ladder):
                self._move(k, +1, stress)
            elif not self._at_top_logged:
                self._at_top_logged = True
                self.log(
                    f"iteration {k}: staying at the top rung num_envs {self.num_envs} "
                    f"(scheduler.max_num_envs) under stress: {'; '.join(stress)}"
                )
            return
        relief = self._relief()
        if relief and self._rung > 0:
            self._move(k, -1, relief)

    def _ready(self, name: str) -> bool:
        return self._count[name] >= self.warmup

    def stress(self) -> List[str]:
        """The reasons to move up, one per stressed signal; empty when none is. Public for the audit that replays
        this rule on a fixed run's rows (isaac_ppo.lab.report.audit)."""
        reasons = []
        ema, ref = self._ema, self._ref
        if self._ready("feature_rank") and ema["feature_rank"] < (1.0 - self.rank_drop) * ref["feature_rank"]:
            reasons.append(
                f"feature_rank {_num(ema['feature_rank'])} fell below {_num(1.0 - self.rank_drop)} x "
                f"{_num(ref['feature_rank'])}"
            )
        if self._ready("dormant_fraction") and ema["dormant_fraction"] > ref["dormant_fraction"] + self.dormant_rise:
            reasons.append(
                f"dormant_fraction {_num(ema['dormant_fraction'])} rose above {_num(ref['dormant_fraction'])} + "
                f"{_num(self.dormant_rise)}"
            )
        if self._ready("ess") and ema["ess"] < self.ess_low:
            reasons.append(f"ess {_num(ema['ess'])} fell below {_num(self.ess_low)}")
        if self._ready("kl") and ema["kl"] > self.kl_high:
            reasons.append(f"kl {_num(ema['kl'])} rose above {_num(self.kl_high)}")
        return reasons

    def _relief(self) -> List[str]:
        """The reasons to move down when every signal with data is clearly healthy (and rank or dormancy has
        data); empty otherwise."""
        if not (self._ready("feature_rank") or self._ready("dormant_fraction")):
            return []
        reasons = []
        ema, ref = self._ema, self._ref
        if self._ready("feature_rank"):
            if not ema["feature_rank"] > (1.0 + self.rank_drop) * ref["feature_rank"]:
                return []
            reasons.append(
                f"feature_rank {_num(ema['feature_rank'])} rose above {_num(1.0 + self.rank_drop)} x "
                f"{_num(ref['feature_rank'])}"
            )
        if self._ready("dormant_fraction"):
            if not ema["dormant_fraction"] < ref["dormant_fraction"] - self.dormant_rise:
                return []
            reasons.append(
                f"dormant_fraction {_num(ema['dormant_fraction'])} fell below {_num(ref['dormant_fraction'])} - "
                f"{_num(self.dormant_rise)}"
            )
        if self._ready("ess"):
            if not ema["ess"] > self.ess_high:
                return []
            reasons.append(f"ess {_num(ema['ess'])} above {_num(self.ess_high)}")
        if self._ready("kl"):
            if not ema["kl"] < self.kl_low:
                return []
            reasons.append(f"kl {_num(ema['kl'])} below {_num(self.kl_low)}")
        return reasons

    def _move(self, k: int, step: int, reasons: List[str]) -> None:
        old = self._plans[self._rung]
        self._rung += step
        new = self._plans[self._rung]
        self._last_move = k
        self._at_top_logged = False
        for name in SIGNALS:
            if self._ready(name):
                self._ref[name] = self._ema[name]
        self.log(
            f"iteration {k}: num_envs {old.num_envs} -> {new.num_envs}, rollout_length {old.rollout_length} -> "
            f"{new.rollout_length}: {'; '.join(reasons)}"
        )

    # ------------------------------------------------------------------------------------------ state

    def state_dict(self) -> Dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "num_envs": int(self.num_envs),
            "last_move": None if self._last_move is None else int(self._last_move),
            "at_top_logged": bool(self._at_top_logged),
            "signals": {
                name: {
                    "ema": _plain_float(self._ema[name]),
                    "ref": _plain_float(self._ref[name]),
                    "count": int(self._count[name]),
                }
                for name in SIGNALS
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not state:  # a checkpoint of a scheduler that keeps no state: start afresh
            return
        num_envs = int(state["num_envs"])
        if num_envs not in self.ladder:
            raise UserError(
                f"the checkpoint's adaptive scheduler was at num_envs={num_envs}, not on this run's ladder "
                f"{', '.join(str(n) for n in self.ladder)}: resume with the same scheduler.min_num_envs, "
                f"scheduler.max_num_envs and scheduler.factor"
            )
        self._rung = self.ladder.index(num_envs)
        last_move = state.get("last_move")
        self._last_move = None if last_move is None else int(last_move)
        self._at_top_logged = bool(state.get("at_top_logged", False))
        signals = state.get("signals", {})
        for name in SIGNALS:
            saved = signals.get(name, {})
            self._ema[name] = _plain_float(saved.get("ema"))
            self._ref[name] = _plain_float(saved.get("ref"))
            self._count[name] = int(saved.get("count", 0))


# ---------------------------------------------------------------------------------------------- helpers


def _finite(value: Any) -> Optional[float]:
    """value as a float when it is a finite number (a 0-d tensor or numpy scalar too), else None."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        return None
    return x if math.isfinite(x) else None


def _plain_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def _num(x: float) -> str:
    return f"{x:.4g}"


def _integer(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise UserError(f"scheduler.{key}={value!r} must be an integer (at least {minimum})")
    if int(value) < minimum:
        raise UserError(f"scheduler.{key}={value!r} must be at least {minimum}")
    return int(value)


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"scheduler.{key}={value!r} must be true or false")
    return value


def _real(key: str, value: Any, low: float, high: float, low_open: bool = False, high_open: bool = False) -> float:
    x = _finite(value)
    if x is None:
        raise UserError(f"scheduler.{key}={value!r} must be a finite number")
    if (x <= low if low_open else x < low) or (x >= high if high_open else x > high):
        raise UserError(
            f"scheduler.{key}={value!r} must be within {'(' if low_open else '['}{low:g}, {high:g}"
            f"{')' if high_open else ']'}"
        )
    return x
