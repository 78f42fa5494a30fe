"""Judge-health step metrics, one home for every verdict kind: from the reward's per-sample extra keys (one list per
key, one value per sample) to the ``judge_health/*`` metrics ``scripts/train/hooks.py`` logs with each training step.

    >>> cols = columns({"judge_wins": [1, 0.5, 0, 0], "judge_flip": [0, 0, 0, 1], "judge_tie": [0, 1, 0, 0],
    ...                 "judge_calls": [2, 2, 0, 2], "judge_seconds": [0.5, 0.25, 0, 0.25], "rule_score": [1, 0, 0, 0]})
    >>> m = metrics(cols, uids=["q1", "q1", "q2", "q2"])
    >>> m["judge_health/flip_rate"], m["judge_health/calls_per_group"], m["judge_health/accept_rule_reject"]
    (0.3333333333333333, 3.0, 0.3333333333333333)

    python -c "from reward_fns.judge_health import metrics; print(metrics({}))"

The kind is read from the columns: ``judge_wins`` is pairwise, else ``judge_error`` with ``judge_parse_fail`` is
pointwise, else no judge. A key a reward does not return is not reported.

Pointwise: ``error_rate``, ``parse_fail_rate``, ``skipped_rate``, ``fallback_rate``, ``answered_rate``, ``score_mean``
(over answered samples), ``agree_rule`` (share of answered samples where "verdict >= 3" equals "rule reward = 1")
and the two disagreements that sum with it to 1, ``accept_rule_reject`` (what a policy that games the judge grows)
and ``reject_rule_accept``; ``reading`` replaces ``rule_score`` as the rule's grade (NaN leaves a sample out). The
guard's ``ungrounded_rate``, ``contradiction_rate``, ``unverified_rate``, ``abstained_rate`` and the count
``unverified_accepts``.

Pairwise: ``flip_rate``, ``tie_rate``, ``parse_fail_rate``, ``guarded_rate`` over the answers the judge was asked
about; ``error_rate``, ``fallback_rate``, ``abstained_rate`` over all; ``cycle_rate`` (mean over groups of the
intransitive-triple share, ``judge_cycle`` or ``MATES``); ``calls_per_group``; ``judge_seconds`` (summed). Unless the
win shares are against group mates (``MATES``: no verdict on the answer), the agreement keys as in pointwise, with
"accept" = ``judge_wins`` >= 0.5.

Both: ``wrong_over_right`` (``_wrong_over_right``; ``scripts/train/watches.HackingWatch`` reads it); canary probes
(``reward_fns.canaries``): ``canary_accept``, ``canary_reject`` and the counts ``canary_accept_n`` /
``canary_reject_n``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from reward_fns.judge_metrics import ACCEPT_AT

POINTWISE_KEYS = ("judge_error", "judge_parse_fail")
MATES = "judge_group_cycle_rate"  # on a pairwise judge's rows: its win shares are against group mates
PAIRWISE_ACCEPT = 0.5  # a pairwise win share (pairwise_ref: against the reference) of at least this accepts it
PREFIX = "judge_health/"


def floats(values) -> np.ndarray | None:
    """``values`` as a 1-d float array, or None (not numeric, or not one value per sample)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return arr if arr.ndim == 1 else None


def columns(extras: Mapping[str, Sequence]) -> dict[str, np.ndarray]:
    """The numeric, non-empty columns of the reward's extra keys."""
    return {k: a for k, a in ((k, floats(v)) for k, v in extras.items()) if a is not None and a.size}


def mean(arr: np.ndarray, mask: np.ndarray | None = None) -> float:
    if mask is not None:
        arr = arr[mask]
    return float(arr.mean()) if arr.size else 0.0


def metrics(
    cols: Mapping[str, np.ndarray],
    reading: Sequence[float] | None = None,
    uids: Sequence | None = None,
) -> dict[str, float]:
    """``judge_health/*`` from ``columns`` (see the module docstring); {} for a reward without a judge."""
    if "judge_wins" in cols:
        out = _pairwise(cols, uids)
    elif all(k in cols for k in POINTWISE_KEYS):
        out = _pointwise(cols, reading)
    else:
        return {}
    out.update(_wrong_over_right(cols, uids, reading))
    out.update(_canaries(cols))
    return {PREFIX + k: v for k, v in out.items()}


def _agreement(accept: np.ndarray, rule: np.ndarray, graded: np.ndarray) -> dict[str, float]:
    right = np.nan_to_num(rule) >= 1
    return {
        "agree_rule": mean((accept == right).astype(np.float64), graded),
        "accept_rule_reject": mean((accept & ~right).astype(np.float64), graded),
        "reject_rule_accept": mean((~accept & right).astype(np.float64), graded),
    }


def _pointwise(cols: Mapping[str, np.ndarray], reading: Sequence[float] | None) -> dict[str, float]:
    err, pf = cols["judge_error"], cols["judge_parse_fail"]
    skipped = cols.get("judge_skipped", np.zeros(len(err)))
    fallback = cols["judge_fallback"] if "judge_fallback" in cols else np.maximum(err, skipped)
    answered = (err == 0) & (pf == 0) & (skipped == 0)
    out = {
        "error_rate": mean(err),
        "parse_fail_rate": mean(pf),
        "skipped_rate": mean(skipped),
        "fallback_rate": mean(fallback),
        "answered_rate": mean(answered.astype(np.float64)),
    }
    verdict = cols.get("judge_score")
    out["score_mean"] = mean(verdict, answered) if verdict is not None else 0.0
    if verdict is not None and "rule_score" in cols:
        rule = cols["rule_score"] if reading is None else np.asarray(reading, dtype=np.float64)
        out.update(_agreement(verdict >= ACCEPT_AT, rule, answered & ~np.isnan(rule)))
    else:
        out.update(agree_rule=0.0, accept_rule_reject=0.0, reject_rule_accept=0.0)
    for key in ("ungrounded", "contradiction", "unverified", "abstained"):  # the guard; judge_failure=abstain
        if f"judge_{key}" in cols:
            out[f"{key}_rate"] = mean(cols[f"judge_{key}"])
    if "judge_unverified" in cols:
        accepted = verdict >= ACCEPT_AT if verdict is not None else True
        out["unverified_accepts"] = float(((cols["judge_unverified"] > 0) & accepted).sum())
    return out


def _groups(uids: Sequence | None, n: int) -> list[np.ndarray] | None:
    """The sample indices of each group (``uids``), or None without one uid per sample."""
    if uids is None or len(uids) != n:
        return None
    by: dict = defaultdict(list)
    for i, u in enumerate(uids):
        by[u].append(i)
    return [np.asarray(v) for v in by.values()]


def _pairwise(cols: Mapping[str, np.ndarray], uids: Sequence | None) -> dict[str, float]:
    wins = cols["judge_wins"]
    n = len(wins)
    judged = cols["judge_calls"] > 0 if "judge_calls" in cols else np.ones(n, bool)
    out: dict[str, float] = {}
    for key in ("flip", "tie", "parse_fail", "guarded"):  # the judge's behaviour: over the answers it was asked about
        if f"judge_{key}" in cols:
            out[f"{key}_rate"] = mean(cols[f"judge_{key}"], judged)
    for key in ("error", "fallback", "abstained"):
        if f"judge_{key}" in cols:
            out[f"{key}_rate"] = mean(cols[f"judge_{key}"])
    groups = _groups(uids, n)
    cycle = cols.get("judge_cycle", cols.get(MATES))
    if cycle is not None:
        out["cycle_rate"] = mean(np.array([cycle[g[0]] for g in groups])) if groups else mean(cycle)
    if "judge_calls" in cols and groups:
        out["calls_per_group"] = float(cols["judge_calls"].sum()) / len(groups)
    if "judge_seconds" in cols:
        out["judge_seconds"] = float(cols["judge_seconds"].sum())
    if "rule_score" in cols and MATES not in cols:
        rule = cols["rule_score"]
        out.update(_agreement(wins >= PAIRWISE_ACCEPT, rule, judged & (wins >= 0) & ~np.isnan(rule)))
    return out


def _wrong_over_right(
    cols: Mapping[str, np.ndarray], uids: Sequence | None, reading: Sequence[float] | None
) -> dict[str, float]:
    """Over each group's (rule-wrong, rule-right) answer pairs, the share where the wrong answer was paid more. The
    rule's grade is ``reading`` where given (route mode: the flexible reading; NaN leaves a sample out), else
    ``rule_score``; abstained samples (``judge_abstained``: out of their group and the loss) are left out. {} without
    ``score``, a rule's grade or one uid per sample, and on a step with no such pair (so that a watch's window
    averages the steps that had one)."""
    groups = _groups(uids, len(cols["score"])) if "score" in cols and "rule_score" in cols else None
    if not groups:
        return {}
    score = cols["score"]
    rule = cols["rule_score"] if reading is None else np.asarray(reading, dtype=np.float64)
    keep = ~np.isnan(rule) & ~(cols.get("judge_abstained", np.zeros(len(score))) > 0)
    above = pairs = 0
    for g in groups:
        g = g[keep[g]]
        right, wrong = g[rule[g] >= 1], g[rule[g] < 1]
        pairs += len(right) * len(wrong)
        above += int((score[wrong][:, None] > score[right][None, :]).sum())
    return {"wrong_over_right": above / pairs} if pairs else {}


def _canaries(cols: Mapping[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for kind, bad in (("wrong", "accepted"), ("right", "rejected")):  # canary probes (reward_fns.canaries)
        if f"canary_{kind}" in cols and f"canary_{kind}_{bad}" in cols:
            n = float(cols[f"canary_{kind}"].sum())
            key = "canary_accept" if kind == "wrong" else "canary_reject"
            out[key] = float(cols[f"canary_{kind}_{bad}"].sum()) / n if n else 0.0
            out[f"{key}_n"] = n
    return out
