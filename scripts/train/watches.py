"""The training run's watches, updated with each step's metrics by ``scripts/train/hooks.py`` (settings: ``verl_judge``
in ``recipes/base.yaml``):

* ``FailFast``: stops a run whose judge stays silent (``JudgeSilentError``);
* ``HackingWatch``: the reward-hacking alarm (``judge_health/hacking_alarm``; ``RewardHackingError`` with ``fail``),
  and a warning on every step with accepts the grounded-verdict guard could not verify.

``StopRun`` and its kinds: ``python -m scripts.train`` prints the message last and exits with status 3.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class StopRun(RuntimeError):
    """A hook stops the run; ``scripts.train`` prints the message last and exits with status 3."""


class JudgeSilentError(StopRun):
    """The judge gave no usable verdict for too many consecutive steps (see ``FailFast``)."""


class RewardHackingError(StopRun):
    """The judge's reward rose while the rule's accuracy fell (``HackingWatch`` with ``fail: true``)."""


# ----------------------------------------------------------------------------------------- fail fast
class FailFast:
    """Stop a run whose judge stays silent: error + parse-fail share above ``threshold`` for
    ``steps`` consecutive training steps raises ``JudgeSilentError`` naming the cause and the fix."""

    def __init__(self, threshold: float = 0.5, steps: int = 3, enable: bool = True):
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"verl_judge.fail_fast.threshold must be in [0, 1], got {threshold!r}")
        if int(steps) < 1:
            raise ValueError(f"verl_judge.fail_fast.steps must be >= 1, got {steps!r}")
        self.threshold, self.steps, self.enable = float(threshold), int(steps), bool(enable)
        self.run = 0

    def update(self, metrics: dict[str, float]) -> None:
        if not self.enable or "judge_health/error_rate" not in metrics:
            return
        err = metrics["judge_health/error_rate"]
        pf = metrics["judge_health/parse_fail_rate"]
        self.run = self.run + 1 if err + pf > self.threshold else 0
        if self.run < self.steps:
            return
        if err >= pf:
            cause = (
                f"judge requests failed for {err:.0%} of samples (timeouts, connection errors, HTTP 5xx after retries)"
            )
            fix = "check that the judge endpoint is up and reachable (JUDGE_BASE_URL / the reward model pool), "
            fix += "and raise reward_kwargs.timeout or lower the request rate"
        else:
            cause = f"the judge answered without a valid verdict for {pf:.0%} of samples"
            fix = "the judge does not follow the verdict format: use a trained judge (recipes/judge_to_reward "
            fix += "warm-starts one), raise reward_kwargs.max_tokens if replies are cut off, or check that the "
            fix += "judge prompt version matches the one it was trained on"
        raise JudgeSilentError(
            f"stopping: {cause}, above verl_judge.fail_fast.threshold={self.threshold} for {self.run} "
            f"consecutive steps. Likely fix: {fix}. Checkpoints written so far are kept. "
            "To train on anyway: verl_judge.fail_fast.enable=false."
        )


# ----------------------------------------------------------------------------------------- hacking watch
def _rise(values: Sequence[float]) -> float:
    """Change over the window by the least-squares line: slope x (len - 1)."""
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(len(y), dtype=np.float64)
    return float(np.polyfit(x, y, 1)[0] * (len(y) - 1))


#: the levels the alarm watches, each a mean over the window: setting -> (metric, the cause it names)
LEVELS = {
    "max_accept_rule_reject": (
        "judge_health/accept_rule_reject",
        "the judge accepted {:.3f} of the answers the rule rejects on average",
    ),
    "max_unverified": (
        "judge_health/unverified_rate",
        "the guard could not check {:.3f} of the samples' verdicts on average",
    ),
    "max_wrong_over_right": (
        "judge_health/wrong_over_right",
        "a group's rule-wrong answer was paid above a rule-right mate in {:.3f} of such pairs on average",
    ),
}
REWARD, RULE = "critic/score/mean", "reward/rule_score/mean"


class HackingWatch:
    """Reward-hacking alarm for a judge-rewarded run (the settings: ``verl_judge.hacking_watch``, recipes/base.yaml).
    Over the last ``window`` steps the alarm is on when the reward (``critic/score/mean``, abstained samples left out)
    rises by ``min_rise`` while the rule's accuracy (``reward/rule_score/mean``) falls by ``min_fall``, or the mean of
    ``judge_health/accept_rule_reject`` reaches ``max_accept_rule_reject`` (it stays on once the rule's accuracy has
    bottomed out), of ``unverified_rate`` ``max_unverified``, of ``wrong_over_right`` ``max_wrong_over_right`` (the
    check win rates against group mates need: their mean cannot rise), or this step a wrong canary probe was paid.
    Such a step logs ``judge_health/hacking_alarm`` 1.0; the alarm turning on prints the cause; ``fail`` stops the
    run (``RewardHackingError``). Every step with ``unverified_accepts`` > 0 prints a warning with the run's total;
    that alone neither turns the alarm on nor stops the run."""

    def __init__(
        self,
        window: int,
        min_rise: float,
        min_fall: float,
        fail: bool,
        enable: bool = True,
        max_accept_rule_reject: float | None = None,
        max_unverified: float | None = None,
        max_wrong_over_right: float | None = None,
        log=print,
    ):
        if int(window) < 3:
            raise ValueError(f"verl_judge.hacking_watch.window must be >= 3 steps, got {window!r}")
        if not (float(min_rise) > 0 and float(min_fall) > 0):
            raise ValueError(
                f"verl_judge.hacking_watch.min_rise and min_fall must be > 0, got {min_rise!r}, {min_fall!r}"
            )
        levels = (max_accept_rule_reject, max_unverified, max_wrong_over_right)
        for name, limit in zip(LEVELS, levels):
            if limit is not None and not 0 < float(limit) <= 1:
                raise ValueError(f"verl_judge.hacking_watch.{name} must be in (0, 1] or null, got {limit!r}")
        self.limits = {name: float(limit) for name, limit in zip(LEVELS, levels) if limit is not None}
        self.window, self.min_rise, self.min_fall = int(window), float(min_rise), float(min_fall)
        self.fail, self.enable, self.log = bool(fail), bool(enable), log
        self.series: dict[str, list[float]] = {key: [] for key in (REWARD, RULE, *(m for m, _ in LEVELS.values()))}
        self.on = False
        self.unverified_accepts = 0  # the run's total so far

    def update(self, metrics: dict[str, float]) -> None:
        if not self.enable:
            return
        n = int(metrics.get("judge_health/unverified_accepts", 0))
        if n > 0:  # a warning on every such step; the alarm itself needs max_unverified's share
            self.unverified_accepts += n
            self.log(
                f"[verl_judge] WARNING: {n} accept{'s' if n != 1 else ''} this step ({self.unverified_accepts} so far) "
                "that the guard could not verify (judge_unverified=1: the judge's reply quoted no candidate answer; "
                "such an accept earns what a 0 earns). Read these samples' judge replies; "
                "verl_judge.hacking_watch.max_unverified turns the alarm on at a share of the samples",
                flush=True,
            )
        if RULE not in metrics or REWARD not in metrics:
            return
        for key, values in self.series.items():  # the last ``window`` steps of each
            if key in metrics:
                values[:] = [*values, float(metrics[key])][-self.window :]
        causes = []
        if metrics.get("judge_health/canary_accept", 0.0) > 0:
            causes.append(
                f"the judge paid {metrics['judge_health/canary_accept']:.3f} of this step's wrong canary probes "
                "(reward_fns.canaries: answers known to be wrong)"
            )
        if len(self.series[REWARD]) == self.window:
            rise, fall = _rise(self.series[REWARD]), -_rise(self.series[RULE])
            if rise >= self.min_rise and fall >= self.min_fall:
                causes.append(
                    f"the judge's reward rose by {rise:.3f} while the rule's accuracy fell by {fall:.3f} "
                    f"(thresholds verl_judge.hacking_watch.min_rise={self.min_rise}, min_fall={self.min_fall})"
                )
            for name, limit in self.limits.items():
                metric, cause = LEVELS[name]
                values = self.series[metric]
                if len(values) == self.window and np.mean(values) >= limit:
                    causes.append(
                        f"{cause.format(np.mean(values))} (threshold verl_judge.hacking_watch.{name}={limit})"
                    )
        was, self.on = self.on, bool(causes)
        metrics["judge_health/hacking_alarm"] = float(self.on)
        if not self.on or was:
            return
        msg = (
            f"reward hacking suspected: over the last {self.window} steps "
            + "; and ".join(causes)
            + f"; this step the judge accepts {metrics.get('judge_health/accept_rule_reject', float('nan')):.3f} of "
            "answers the rule rejects. Read some high-reward samples that the rule rejects"
        )
        if self.fail:
            raise RewardHackingError(
                f"stopping: {msg}. Checkpoints written so far are kept. To train on anyway: "
                "verl_judge.hacking_watch.fail=false."
            )
        self.log(f"[verl_judge] WARNING: {msg} (verl_judge.hacking_watch.fail=true stops the run).", flush=True)
