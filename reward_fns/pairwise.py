"""Pairwise judge reward: the judge writes ``<think>...</think><better>A|B</better>``.

1.0 for the right letter, 0.0 for the wrong one; malformed output (``tie``, ``A or B``, ``Assistant B``, two
verdicts, no verdict, unclosed think, no ``<think>`` unless ``require_think=False``: see ``reward_fns.pointwise``)
earns ``format_penalty`` (default -1.0, must be < 0). The letter is case-insensitive and whitespace-trimmed.

Returned keys, always the same and in this order: ``score``, ``acc``, ``pred_a`` (1.0 when the
verdict is A, so its mean is the A-share), ``label_a`` (1.0 when the label is A), ``format_ok``.
"""

from __future__ import annotations

from reward_fns._labels import choice_label
from reward_fns.parse import parse_choice
from reward_fns.pointwise import DEFAULT_FORMAT_PENALTY, check_options, check_penalty, thought  # noqa: F401 - check_options: the same

#: the label check of a data set's ``reward_model.ground_truth`` (the dry run's: scripts/launch/config_paths.py)
check_label = choice_label


def compute_score(
    data_source=None,
    solution_str="",
    ground_truth=None,
    extra_info=None,
    format_penalty: float = DEFAULT_FORMAT_PENALTY,
    require_think: bool = True,
    **kwargs,
) -> dict:
    """1 for the better answer named, 0 for the other, ``format_penalty`` for a reply without ``<better>A|B</better>``.

    >>> compute_score("judge", "<think>A checks its sum</think><better>A</better>", "A")
    {'score': 1.0, 'acc': 1.0, 'pred_a': 1.0, 'label_a': 1.0, 'format_ok': 1.0}
    >>> compute_score("judge", "<think>B reads better</think><better>B</better>", "A")
    {'score': 0.0, 'acc': 0.0, 'pred_a': 0.0, 'label_a': 1.0, 'format_ok': 1.0}
    >>> compute_score("judge", "A is better", "A")
    {'score': -1.0, 'acc': 0.0, 'pred_a': 0.0, 'label_a': 1.0, 'format_ok': 0.0}
    """
    penalty = check_penalty(format_penalty)
    label = choice_label(ground_truth)
    label_a = 1.0 if label == "A" else 0.0
    parsed = parse_choice(solution_str)
    if not parsed.ok or not thought(solution_str, require_think):
        return {"score": penalty, "acc": 0.0, "pred_a": 0.0, "label_a": label_a, "format_ok": 0.0}
    correct, pred_a = float(parsed.value == label), float(parsed.value == "A")
    return {"score": correct, "acc": correct, "pred_a": pred_a, "label_a": label_a, "format_ok": 1.0}
