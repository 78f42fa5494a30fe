"""The judge's verdict kinds, one object each: everything that differs between a pointwise and a pairwise judge (its
tag, parser, label rule, training reward, warm-start rationale, metrics, report and grounding: the ``Verdict``
fields). Data prep, the evaluator and the pipeline ask these objects instead of testing for a kind's name.

* ``POINTWISE``: ``<think>...</think><score>N</score>``, N in 0-4; verification rows (label 4: right, 0: wrong) have
  the rationale ``Reference: 72. Candidate: 62. Different.``, which ``reward_fns.guard`` reads back.
* ``PAIRWISE``: ``<think>...</think><better>A|B</better>``; its rows come in both orders (``extra_info.pair_id``), so
  an evaluation draws pairs, not rows; the rationale is ``Reference: 72. A: 72. B: 62.``.

Adding a kind: docs/verdict_kinds.md.

    python -c "from reward_fns.verdicts import KINDS; print(sorted(KINDS))"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reward_fns import judge_metrics, pairwise, pointwise
from reward_fns._labels import choice_label, score_label
from reward_fns.guard import guard, pair_guard
from reward_fns.parse import Parsed, last_number, numbers_equal, parse_choice, parse_score, reference_answer, shown
from reward_fns.prompts import load


class NoTarget(ValueError):
    """A labelled row that cannot get a warm-start answer; ``args[0]`` is the reason counted in data prep's summary."""


def _shows_reference(prompt_id: str) -> bool:
    name, _, version = str(prompt_id).rpartition(".")
    try:
        return "reference" in load(name, version).fields()
    except (FileNotFoundError, ValueError):
        raise NoTarget("unknown_prompt") from None


def _verification_note(ov: Mapping) -> str | None:
    """The accept/reject counts under a report's overall table, when the labels are 0 and 4 only."""
    if ov.get("n_label4") is None:
        return None
    return (
        f"Verification (labels 0 and 4; accept = score >= {judge_metrics.ACCEPT_AT}): tp {ov['tp']}, fp {ov['fp']}, "
        f"tn {ov['tn']}, fn {ov['fn']}, none {ov['none']} (label 4: {ov['n_label4']}, label 0: {ov['n_label0']})."
    )


def _both_orders_note(ov: Mapping) -> str | None:
    """Why flip rate and pair accuracy are n/a: no pair of the data was asked in both orders."""
    if ov["pairs_both_orders"]:
        return None
    return "No pair appears in both orders (extra_info.pair_id), so flip rate and pair accuracy are n/a."


def _pointwise_target(extra: Mapping, label: object) -> str:
    if str(label) not in ("0", "4"):
        raise NoTarget("label_not_0_or_4")
    reference = reference_answer(extra.get("answer"))
    # a reply cut off before its final answer states none, whatever numbers its reasoning holds
    cand = None if extra.get("candidate") == "truncated" else last_number(extra["response"])
    same = cand is not None and reference is not None and numbers_equal(cand, reference)
    if same != (str(label) == "4"):
        raise NoTarget("rationale_mismatch")
    verdict = "Same" if same else "Different"
    return f"<think>Reference: {shown(reference)}. Candidate: {shown(cand)}. {verdict}.</think><score>{label}</score>"


def _pairwise_target(extra: Mapping, label: object) -> str:
    if label not in ("A", "B"):
        raise NoTarget("label_not_A_or_B")
    reference = reference_answer(extra.get("answer"))
    a, b = last_number(extra["response_a"]), last_number(extra["response_b"])
    if reference is None:
        raise NoTarget("no_reference_answer")
    right, wrong = (a, b) if label == "A" else (b, a)
    if not (right is not None and numbers_equal(right, reference)) or (
        wrong is not None and numbers_equal(wrong, reference)
    ):
        raise NoTarget("rationale_mismatch")
    ref_part = f"Reference: {shown(reference)}. " if _shows_reference(extra.get("prompt_version", "")) else ""
    return f"<think>{ref_part}A: {shown(a)}. B: {shown(b)}.</think><better>{label}</better>"


@dataclass(frozen=True)
class Verdict:
    name: str  # also the prefix of its verification parquets (data_prep.gsm8k_verify) and the evaluator's --task
    tag: str
    marker: str  # the extra_info key only this kind's rows carry
    paired: bool  # rows come in both orders (extra_info.pair_id): evaluate pairs, not rows
    label: Callable[[object], Any]  # a ground truth read as this kind's label (ValueError: not one)
    labels_are: str  # what its labels look like, for error messages
    parse: Callable[[object], Parsed]
    reward: Callable[..., dict]
    target: Callable[[Mapping, object], str]  # (extra_info, label) -> the warm start's answer (NoTarget: none)
    metrics: Callable[[Sequence[Mapping]], dict]
    compare_keys: tuple[str, ...]  # what a before/after comparison of evaluations shows
    report_keys: tuple[str, ...]  # the evaluator's report.md table
    # the evaluator's report.md around its tables (each None / () where the kind has nothing to add):
    # a sentence under the overall table, from its metrics
    summary: Callable[[Mapping], str | None] = lambda _overall: None
    # a sentence after the failures, from the overall metrics
    caveat: Callable[[Mapping], str | None] = lambda _overall: None
    values: tuple = ()  # the verdicts in order: the columns of the confusion matrix (metrics' "confusion")
    # (reply, its verdict as parse read it, the responses judged, the reference answer or None) -> what is wrong with
    # an accepting verdict (reward_fns.guard: a problem voids the verdict), None when it holds; None: no guard
    grounding: Callable[[str, object, Sequence[object], str | None], str | None] | None = None
    # how a reward asks it (reward_fns.judge_service): the prompt fields its responses fill, in order; the verdicts
    # the grounding checks (those that pay something); whether the grounding checks against the reference answer
    # even where the prompt shows none; whether the question and reference solution are defused of look-alike tags
    # like the responses (pointwise: shown as they are, as its judges were trained)
    responses: tuple[str, ...] = ("response",)
    pays: Callable[[object], bool] = lambda value: True
    reference_always: bool = False
    defuse_context: bool = True


POINTWISE = Verdict(
    name="pointwise",
    tag="score",
    marker="response",
    paired=False,
    label=score_label,
    labels_are="an integer 0-4",
    parse=parse_score,
    reward=pointwise.compute_score,
    target=_pointwise_target,
    metrics=judge_metrics.pointwise_metrics,
    compare_keys=("balanced_accuracy", "precision", "recall", "specificity", "parse_fail_rate", "exact", "n"),
    report_keys=("n", "exact", "within1", "mae", "exact_parsed", "within1_parsed", "mean_pred", "mean_label"),
    summary=_verification_note,
    values=judge_metrics.SCORES,
    grounding=lambda reply, value, responses, reference: guard(reply, responses[0], reference),
    pays=lambda value: value > 0,
    reference_always=True,
    defuse_context=False,
)
PAIRWISE = Verdict(
    name="pairwise",
    tag="better",
    marker="response_a",
    paired=True,
    label=choice_label,
    labels_are="'A'/'B'",
    parse=parse_choice,
    reward=pairwise.compute_score,
    target=_pairwise_target,
    metrics=judge_metrics.pairwise_metrics,
    compare_keys=("accuracy", "pair_accuracy", "flip_rate", "a_share", "parse_fail_rate", "n"),
    report_keys=(
        *("n", "accuracy", "accuracy_parsed", "pair_accuracy", "flip_rate", "a_share", "label_a_share"),
        *("pairs_both_orders", "pairs_compared"),
    ),
    caveat=_both_orders_note,
    values=("A", "B"),
    grounding=lambda reply, value, responses, reference: pair_guard(
        reply, responses[0], responses[1], reference, choice=value
    ),
    responses=("response_a", "response_b"),
)
#: every kind by name; ``detect`` tries them in this order (an A/B label is no 0-4 score, and no score is A/B)
KINDS = {v.name: v for v in (PAIRWISE, POINTWISE)}


def of_row(extra: Mapping) -> Verdict | None:
    """The kind of a labelled row, by the ``extra_info`` key only its kind carries; None for any other row.

    >>> of_row({"response_a": "...", "response_b": "..."}).name, of_row({"question": "..."})
    ('pairwise', None)
    """
    return next((v for v in KINDS.values() if v.marker in extra), None)


def detect(labels: Sequence[object]) -> Verdict:
    """The kind whose label rule reads every label; a ValueError names the first label no kind reads, or says
    that the labels mix kinds.

    >>> detect(["A", "b"]).name, detect([4, "0", 3.0]).name
    ('pairwise', 'pointwise')
    """
    for v in KINDS.values():
        if all(_reads(v, gt) for gt in labels):
            return v
    kinds = [f"{v.labels_are} ({v.name})" for v in KINDS.values()]
    for i, gt in enumerate(labels):
        if not any(_reads(v, gt) for v in KINDS.values()):
            raise ValueError(f"row {i + 1}: reward_model.ground_truth {gt!r} is neither {' nor '.join(kinds)}")
    mixed = " and ".join(f"{v.name} ({v.labels_are})" for v in KINDS.values())
    raise ValueError(f"reward_model.ground_truth mixes {mixed} labels")


def _reads(v: Verdict, gt: object) -> bool:
    try:
        v.label(gt)
        return True
    except ValueError:
        return False
