"""How good a judge is, from its verdicts on labelled rows: the metrics of each verdict kind (``reward_fns.verdicts``).
A record is one row's outcome, ``{label, pred, status ("ok" | "parse_fail" | "error"), pair_id}``, as
``python -m scripts.eval.judge`` writes them to ``predictions.jsonl``; a failed or unparseable row counts as wrong.

    python -c "from reward_fns.judge_metrics import pointwise_metrics; print(pointwise_metrics([]))"
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

SCORES = (0, 1, 2, 3, 4)
VERIFY_LABELS = {0, 4}  # pointwise verification data: 4 = correct solution, 0 = wrong
ACCEPT_AT = 3  # verification: score >= 3 accepts, <= 2 rejects


def ratio(num: float, den: float) -> float | None:
    """``num / den`` or ``None`` when ``den`` is 0 (JSON ``null``, Markdown ``n/a``).

    >>> ratio(1, 4), ratio(3, 0)
    (0.25, None)
    """
    return None if not den else num / den


def _status_metrics(recs: Sequence[Mapping]) -> dict:
    """The counts and failure rates every kind reports first."""
    n = len(recs)
    n_err = sum(r["status"] == "error" for r in recs)
    n_pf = sum(r["status"] == "parse_fail" for r in recs)
    return {
        "n": n,
        "n_error": n_err,
        "n_parse_fail": n_pf,
        "n_parsed": n - n_err - n_pf,
        "error_rate": ratio(n_err, n),
        "parse_fail_rate": ratio(n_pf, n - n_err),
    }


def pairwise_metrics(recs: Sequence[Mapping]) -> dict:
    """Metrics of pairwise records ``{label, pred (A/B/None), status, pair_id}``: accuracy, the share of A and, over
    pairs asked in both orders, pair accuracy (right in both) and flip rate (another response picked after the swap).

    >>> m = pairwise_metrics([{"label": "A", "pred": "A", "status": "ok", "pair_id": 1},
    ...                       {"label": "B", "pred": "A", "status": "ok", "pair_id": 1}])
    >>> m["accuracy"], m["pair_accuracy"], m["flip_rate"], m["a_share"]
    (0.5, 0.0, 1.0, 1.0)
    """
    status = _status_metrics(recs)
    n, n_parsed, parsed = status["n"], status["n_parsed"], [r for r in recs if r["status"] == "ok"]
    correct = sum(r["pred"] == r["label"] for r in parsed)
    groups: dict[object, list[Mapping]] = defaultdict(list)
    for r in recs:
        if r.get("pair_id") is not None:
            groups[r["pair_id"]].append(r)
    both = compared = flips = both_right = 0
    for members in groups.values():
        if len(members) != 2 or {m["label"] for m in members} != {"A", "B"}:
            continue
        both += 1
        picked_chosen = [m["status"] == "ok" and m["pred"] == m["label"] for m in members]
        both_right += all(picked_chosen)
        if all(m["status"] == "ok" for m in members):
            compared += 1
            flips += picked_chosen[0] != picked_chosen[1]
    return {
        **status,
        "accuracy": ratio(correct, n),
        "accuracy_parsed": ratio(correct, n_parsed),
        "a_share": ratio(sum(r["pred"] == "A" for r in parsed), n_parsed),
        "label_a_share": ratio(sum(r["label"] == "A" for r in recs), n),
        "pairs_both_orders": both,
        "pairs_compared": compared,
        "flip_rate": ratio(flips, compared),
        "pair_accuracy": ratio(both_right, both),
    }


def verification_metrics(recs: Sequence[Mapping]) -> dict:
    """Accept (score >= 3) / reject metrics when every label is 0 or 4; every value ``None`` otherwise."""
    tp = fp = tn = fn = none = 0
    for r in recs:
        if r["status"] != "ok":
            none += 1
        elif r["pred"] >= ACCEPT_AT:
            tp += r["label"] == 4
            fp += r["label"] == 0
        else:
            fn += r["label"] == 4
            tn += r["label"] == 0
    pos = sum(r["label"] == 4 for r in recs)
    neg = len(recs) - pos
    recall, specificity = ratio(tp, pos), ratio(tn, neg)
    out = {
        "balanced_accuracy": None if recall is None or specificity is None else (recall + specificity) / 2,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": recall,
        "specificity": specificity,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "none": none,
        "n_label4": pos,
        "n_label0": neg,
    }
    return out if recs and {r["label"] for r in recs} <= VERIFY_LABELS else dict.fromkeys(out)


def pointwise_metrics(recs: Sequence[Mapping]) -> dict:
    """Metrics of pointwise records ``{label, pred (0-4/None), status}``: exact and within-1 accuracy, MAE, a confusion
    matrix and, when every label is 0 or 4 (verification data), accept (score >= 3) / reject metrics.

    >>> m = pointwise_metrics([{"label": 4, "pred": 4, "status": "ok"}, {"label": 0, "pred": 3, "status": "ok"},
    ...                        {"label": 0, "pred": None, "status": "parse_fail"}])
    >>> m["exact"], m["recall"], m["specificity"], m["balanced_accuracy"], m["parse_fail_rate"]
    (0.3333333333333333, 1.0, 0.0, 0.5, 0.3333333333333333)
    """
    status = _status_metrics(recs)
    n, n_parsed, parsed = status["n"], status["n_parsed"], [r for r in recs if r["status"] == "ok"]
    exact = sum(r["pred"] == r["label"] for r in parsed)
    within1 = sum(abs(r["pred"] - r["label"]) <= 1 for r in parsed)
    abs_err = sum(abs(r["pred"] - r["label"]) for r in parsed)
    confusion = [[0] * (len(SCORES) + 1) for _ in SCORES]  # rows: label; cols: pred 0-4, no verdict
    for r in recs:
        col = r["pred"] if r["status"] == "ok" else len(SCORES)
        confusion[r["label"]][col] += 1
    return {
        **status,
        "exact": ratio(exact, n),
        "within1": ratio(within1, n),
        "exact_parsed": ratio(exact, n_parsed),
        "within1_parsed": ratio(within1, n_parsed),
        "mae": ratio(abs_err, n_parsed),
        "mean_pred": ratio(sum(r["pred"] for r in parsed), n_parsed),
        "mean_label": ratio(sum(r["label"] for r in recs), n),
        **verification_metrics(recs),
        "confusion": confusion,
    }
