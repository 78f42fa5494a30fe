"""Ground-truth coercion shared by the judge rewards and evaluators (data errors raise ValueError)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from reward_fns.parse import normalize_number


def score_label(ground_truth: object, lo: int = 0, hi: int = 4) -> int:
    """Integer label in [lo, hi] from an int, a numeric string, or a dict with ``score``/``helpfulness``."""
    gt = ground_truth
    if isinstance(gt, Mapping):
        for key in ("score", "helpfulness"):
            if key in gt and gt[key] is not None:
                gt = gt[key]
                break
        else:
            raise ValueError(f"pointwise ground truth dict needs 'score' or 'helpfulness': {ground_truth!r}")
    if isinstance(gt, bool):
        raise ValueError(f"pointwise ground truth must be an integer {lo}-{hi}, got bool {gt!r}")
    if isinstance(gt, numbers.Number):
        value = normalize_number(float(gt)) if not isinstance(gt, numbers.Integral) else normalize_number(int(gt))
    else:
        value = normalize_number(gt)
    if value is None or value != value.to_integral_value() or not lo <= value <= hi:
        raise ValueError(f"pointwise ground truth must be an integer {lo}-{hi}, got {ground_truth!r}")
    return int(value)


def choice_label(ground_truth: object, choices: tuple[str, ...] = ("A", "B")) -> str:
    """``"A"``/``"B"`` from a string or a dict with ``preference`` (case-insensitive)."""
    gt = ground_truth
    if isinstance(gt, Mapping):
        if "preference" not in gt:
            raise ValueError(f"pairwise ground truth dict needs 'preference': {ground_truth!r}")
        gt = gt["preference"]
    if not isinstance(gt, str) or gt.strip().upper() not in choices:
        raise ValueError(f"pairwise ground truth must be one of {choices}, got {ground_truth!r}")
    return gt.strip().upper()
