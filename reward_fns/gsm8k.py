"""GSM8K rule reward: 1.0 when the policy's final number equals the reference, else 0.0.

``mode="strict"`` (default) reads the number right after the last ``#### ``; ``mode="flexible"`` the last number
anywhere. The response is read after ``parse.normalize_text``, as the LLM judge and its guard read it; numbers compare
numerically (``18.00`` == ``18``, ``1,234`` == ``1234``). The ground truth may be a number or a full GSM8K solution
ending in ``#### N``. Keys, always these in this order: ``score``, ``acc``, ``format_ok`` (a number was found).
"""

from __future__ import annotations

from reward_fns.parse import hash_answer, last_number, normalize_number, normalize_text

MODES = ("strict", "flexible")


def reference_number(ground_truth: object):
    """The reference as a Decimal from a number or a ``... #### N`` solution; ValueError if neither."""
    value = normalize_number(ground_truth)
    if value is None and isinstance(ground_truth, str):
        value = normalize_number(hash_answer(ground_truth))
    if value is None:
        raise ValueError(f"GSM8K ground truth is not a number or a '#### N' solution: {ground_truth!r}")
    return value


#: the label check of a data set's ``reward_model.ground_truth`` (the dry run's: scripts/launch/config_paths.py)
check_label = reference_number


def extract_answer(solution_str: object, mode: str = "strict"):
    """The policy's answer as a Decimal, or None when the chosen mode finds no number. Read in
    ``parse.normalize_text``'s reading, as the judge and the guard read it (``#### 1\u200b8`` and ``#### １８`` are
    18)."""
    if mode == "strict":
        return normalize_number(hash_answer(normalize_text(solution_str)))
    if mode == "flexible":
        return normalize_number(last_number(normalize_text(solution_str)))
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def check_options(**kwargs) -> list[str]:
    """What ``compute_score`` would raise for these ``reward_kwargs`` at its first call ([] or one message: an unknown
    ``mode``), asked before a run (``scripts/launch/verl_config.py``). Other names are ignored, as ``compute_score``
    does."""
    try:
        extract_answer("", kwargs.get("mode", "strict"))
    except ValueError as e:
        return [str(e)]
    return []


def compute_score(
    data_source=None, solution_str="", ground_truth=None, extra_info=None, mode: str = "strict", **kwargs
) -> dict:
    """1.0 when the answer's final number is the reference's (see the module docstring).

    >>> compute_score("openai/gsm8k", "48 + 24 = 72\\n#### 72", "72")
    {'score': 1.0, 'acc': 1.0, 'format_ok': 1.0}
    >>> compute_score("openai/gsm8k", "So she sold 72 clips.", "#### 72")  # strict: no '#### N' line
    {'score': 0.0, 'acc': 0.0, 'format_ok': 0.0}
    >>> compute_score("openai/gsm8k", "So she sold 72 clips.", "72", mode="flexible")
    {'score': 1.0, 'acc': 1.0, 'format_ok': 1.0}
    >>> compute_score("openai/gsm8k", "#### 1,000", "1000"), compute_score(
    ...     "openai/gsm8k", "#### 1,0,0,0", "1000"
    ... )["score"]
    ({'score': 1.0, 'acc': 1.0, 'format_ok': 1.0}, 0.0)
    """
    ref = reference_number(ground_truth)
    pred = extract_answer(solution_str, mode)
    if pred is None:
        return {"score": 0.0, "acc": 0.0, "format_ok": 0.0}
    correct = 1.0 if pred == ref else 0.0
    return {"score": correct, "acc": correct, "format_ok": 1.0}


def grade(solution_str: object, ground_truth: object, mode: str = "strict") -> float:
    """The rule's grade as the judge rewards use it: ``compute_score``'s ``score``, and 0.0 where the reference is no
    number (non-GSM8K data: the rule cannot say "correct").

    >>> grade("#### 72", "72"), grade("#### 72", "seventy-two")
    (1.0, 0.0)
    """
    try:
        return float(compute_score(solution_str=solution_str, ground_truth=ground_truth, mode=mode)["score"])
    except ValueError:
        return 0.0
