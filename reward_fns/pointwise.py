"""Pointwise judge reward: the judge writes ``<think>...</think><score>N</score>`` with N in 0-4.

Against ``label``: 0 or 1 (a bad response) pays 1.0 on an exact match, else 0.0 (no partial credit for calling
garbage "fine"); 2-4 pays ``1 - |pred - label| / 4``. Malformed output earns ``format_penalty`` (default -1.0, below
any well-formed answer's); a verdict without a ``<think>`` block is malformed unless ``require_think=False`` (a judge
that learns to drop its reasoning, as a pairwise judge once did, leaves the guard nothing to check). Keys, always
these in this order: ``score``, ``acc``, ``pred`` (-1 when malformed), ``label``, ``format_ok``.
"""

from __future__ import annotations

from reward_fns._labels import score_label
from reward_fns.parse import parse_score, split_think

DEFAULT_FORMAT_PENALTY = -1.0
#: the label check of a data set's ``reward_model.ground_truth`` (the dry run's: scripts/launch/config_paths.py)
check_label = score_label


def score_reward(pred: int, label: int) -> float:
    """Reward of a well-formed prediction (see module docstring)."""
    if label <= 1:
        return 1.0 if pred == label else 0.0
    return 1.0 - abs(pred - label) / 4.0


def check_penalty(format_penalty: float) -> float:
    penalty = float(format_penalty)
    if not penalty < 0.0:
        raise ValueError(f"format_penalty must be < 0 (below every well-formed reward), got {format_penalty!r}")
    return penalty


def thought(text: object, require_think: bool) -> bool:
    """Whether a well-formed reply meets ``require_think``: a ``<think>`` block with something in it, when required."""
    return not require_think or (isinstance(text, str) and bool(split_think(text)[0].strip()))


def check_options(**kwargs) -> list[str]:
    """What ``compute_score`` (pairwise's too) would raise for these ``reward_kwargs`` at its first call ([] or one
    message: a ``format_penalty`` not below 0, a ``require_think`` that is no bool), asked before a run
    (``scripts/launch/verl_config.py``). Other names are ignored, as ``compute_score`` does."""
    if not isinstance(kwargs.get("require_think", True), bool):
        return [f"require_think must be true or false, got {kwargs['require_think']!r}"]
    try:
        check_penalty(kwargs.get("format_penalty", DEFAULT_FORMAT_PENALTY))
    except (TypeError, ValueError) as e:
        return [str(e)]
    return []


def compute_score(
    data_source=None,
    solution_str="",
    ground_truth=None,
    extra_info=None,
    format_penalty: float = DEFAULT_FORMAT_PENALTY,
    require_think: bool = True,
    **kwargs,
) -> dict:
    """The judge's ``<score>`` against the label (see the module docstring).

    >>> compute_score("judge", "<think>both steps hold</think><score>4</score>", "4")
    {'score': 1.0, 'acc': 1.0, 'pred': 4, 'label': 4, 'format_ok': 1.0}
    >>> compute_score("judge", "<think>one slip</think><score>2</score>", "3")  # 1 - |2 - 3| / 4
    {'score': 0.75, 'acc': 0.0, 'pred': 2, 'label': 3, 'format_ok': 1.0}
    >>> compute_score("judge", "<think>looks fine</think><score>1</score>", "0")  # a bad response: exact or nothing
    {'score': 0.0, 'acc': 0.0, 'pred': 1, 'label': 0, 'format_ok': 1.0}
    >>> compute_score("judge", "4", "4")  # no tags: malformed, below every well-formed answer
    {'score': -1.0, 'acc': 0.0, 'pred': -1, 'label': 4, 'format_ok': 0.0}
    >>> bare = "<score>4</score>"  # no reasoning: malformed, unless thinking is not required
    >>> compute_score("judge", bare, "4")["score"], compute_score("judge", bare, "4", require_think=False)["score"]
    (-1.0, 1.0)
    """
    penalty = check_penalty(format_penalty)
    label = score_label(ground_truth)
    parsed = parse_score(solution_str)
    if not parsed.ok or not thought(solution_str, require_think):
        return {"score": penalty, "acc": 0.0, "pred": -1, "label": label, "format_ok": 0.0}
    pred = parsed.value
    return {
        "score": score_reward(pred, label),
        "acc": 1.0 if pred == label else 0.0,
        "pred": pred,
        "label": label,
        "format_ok": 1.0,
    }
