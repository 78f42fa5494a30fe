"""The scorecard's statistics (no command of its own; ``scripts.lab.scorecard`` reads the runs and writes the
report): each arm's gain in held-out accuracy, pooled over judge instances, and its ratio to the rule's gain, with
95% bootstrap intervals that resample instances, then seeds within an instance, then questions within an instance
(paired across arms and with "before"); and the verdict on each target, given only when the rule itself learned:
a judge-rewarded arm (``judge``, ``route``, ``pairwise_ref``, ``tournament``) meets its target when its ratio's mean
is >= 0.9 and its lower bound >= 0.8; a control (``random``, ``format``) when its ratio's upper bound is <= 0.3, and
misses it when its lower bound is above 0.3 (between the two: no verdict, the interval spans the target).

    inst = Instance(before=np.array([0, 1, 0]), after={"rule": np.array([[1, 1, 0]]), "judge": ...})
    stats = bootstrap([inst, ...], ["rule", "judge"])     # {"gain": {arm: ...}, "ratio": {arm: ...}}
    verdict(stats, "judge")                               # ("met" | "NOT met" | "no verdict", why)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scripts.lab.arms import MODE_ARMS

BOOTSTRAP = 2000
#: judge-rewarded arms: (pooled mean >=, lower bound >=); controls: upper bound <= (lower bound above: not met)
TARGETS = {
    **dict.fromkeys(MODE_ARMS, (0.9, 0.8)),
    **dict.fromkeys(("random", "format"), 0.3),
}


@dataclass
class Instance:
    """One judge instance: ``before[q]`` (the start policy's grade of question q, 0/1) and ``after[arm][s, q]``
    (seed s's run of ``arm``)."""

    before: np.ndarray
    after: dict[str, np.ndarray]

    def gain(self, arm: str, seeds: np.ndarray | None = None, questions: np.ndarray | None = None) -> float:
        a, b = self.after[arm], self.before
        seeds = np.arange(a.shape[0]) if seeds is None else seeds
        questions = np.arange(a.shape[1]) if questions is None else questions
        return float((a[np.ix_(seeds, questions)] - b[questions]).mean())


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def bootstrap(instances: list[Instance], arms: list[str], n: int = BOOTSTRAP, seed: int = 0) -> dict:
    """``{"gain": {arm: {"mean", "lo", "hi"}}, "ratio": {arm: {"mean", "lo", "hi", "dropped"}}}``: the pooled gain
    (the mean of the instances' gains) and, for each arm but the rule, its pooled gain over the rule's. Each of the
    ``n`` resamples draws instances with replacement, then within each drawn instance its seeds and its questions.
    A resample whose pooled rule gain is not above 0 has no ratio: it is counted in ``dropped``, never hidden (a
    ratio interval whose ``dropped`` is over 2.5% of ``n`` is no interval: see ``verdict``)."""
    rng = np.random.default_rng(seed)
    point = {arm: float(np.mean([inst.gain(arm) for inst in instances])) for arm in arms}
    draws: dict[str, list[float]] = {arm: [] for arm in arms}
    ratios: dict[str, list[float]] = {arm: [] for arm in arms if arm != "rule"}
    dropped = 0
    for _ in range(n):
        picked = rng.integers(0, len(instances), len(instances)) if len(instances) > 1 else [0]
        sums = dict.fromkeys(arms, 0.0)
        for i in picked:
            inst = instances[i]
            n_seeds, n_q = inst.after[arms[0]].shape
            s_idx, q_idx = rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_q, n_q)
            for arm in arms:
                sums[arm] += inst.gain(arm, s_idx, q_idx)
        g = {arm: v / len(picked) for arm, v in sums.items()}
        for arm in arms:
            draws[arm].append(g[arm])
        if "rule" in g and g["rule"] > 0:
            for arm in ratios:
                ratios[arm].append(g[arm] / g["rule"])
        elif "rule" in g:
            dropped += 1
    out = {"gain": {}, "ratio": {}, "bootstrap": n}
    for arm in arms:
        lo, hi = _interval(draws[arm])
        out["gain"][arm] = {"mean": point[arm], "lo": lo, "hi": hi}
    if "rule" in arms:
        for arm, values in ratios.items():
            lo, hi = _interval(values)
            mean = point[arm] / point["rule"] if point["rule"] > 0 else None
            out["ratio"][arm] = {"mean": mean, "lo": lo, "hi": hi, "dropped": dropped}
    return out


def rule_learned(stats: dict) -> tuple[bool, str]:
    """Whether the rule's own gain is above 0 with its whole 95% interval, and a line saying so."""
    r = stats["gain"].get("rule")
    if r is None:
        return False, "no rule arm: no ratio"
    text = f"rule gain {fmt(r['mean'])} (95% interval {fmt(r['lo'])} to {fmt(r['hi'])})"
    if r["lo"] is None or r["lo"] <= 0:
        return False, text + ": its interval is not above 0, so no ratio to it means anything (no verdict)"
    return True, text


def verdict(stats: dict, arm: str) -> tuple[str, str]:
    """``arm``'s target: ``("met" | "NOT met" | "no verdict" | "no target", line)``. No verdict when the rule's gain
    interval reaches 0, when more than 2.5% of the resamples had no positive rule gain (an interval above 0 implies
    at most 2.5% at the default 2,000 resamples, not at every count: 1,999 may drop 50), or when a control's
    interval spans its target."""
    r = stats["ratio"].get(arm)
    target = TARGETS.get(arm)
    if r is None or target is None:
        return "no target", f"{arm}: no target"
    line = f"{arm} gain / rule gain {fmt(r['mean'])} (95% interval {fmt(r['lo'])} to {fmt(r['hi'])})"
    learned, why = rule_learned(stats)
    if learned and r["dropped"] > 0.025 * stats["bootstrap"]:
        learned, why = False, f"{r['dropped']} of {stats['bootstrap']} resamples had no rule gain above 0, over 2.5%"
    if not learned or r["mean"] is None or r["lo"] is None:
        return "no verdict", f"{line}: no verdict ({why})"
    if isinstance(target, tuple):
        mean, low = target
        ok = r["mean"] >= mean and r["lo"] >= low
        return ("met" if ok else "NOT met"), f"{line}: target mean >= {mean} and lower bound >= {low}"
    line = f"{line}: target upper bound <= {target}"
    if r["hi"] <= target:
        return "met", line
    if r["lo"] > target:
        return "NOT met", line
    return "no verdict", f"{line}: no verdict (its interval spans {target})"


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
