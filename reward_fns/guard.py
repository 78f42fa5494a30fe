r"""The grounded-verdict guards: what is wrong with a judge's accepting verdict, checked against the answers' text in
the one reading the rule and the judge share (``parse.normalize_text``) and the reference answer the judge was shown.
``guard`` checks a pointwise paying verdict (any score above 0, ``reward_fns.llm_judge``; README_llm_judge.md,
"Grounded verdicts"); ``pair_guard`` a pairwise ``<better>X</better>`` (``reward_fns.pairwise_judge``). Both fail
closed: every problem they name makes the verdict earn what no verdict earns. No command of its own:

    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "The answer is 5 or 18.", "18")
    'judge_ungrounded'
    >>> guard("<think>Reference: 18. Candidate: 17. Same.</think><score>4</score>", "#### 17", "18")
    'judge_contradiction'
    >>> guard("<think>Reference: 18, Candidate: seventeen, Same.</think><score>4</score>", "#### 17", "18")
    'judge_unverified'
    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "3 x 6 = 18\n#### 18", "18") is None
    True
    >>> pair_guard("<think>Reference: 18. A: 17. B: 18.</think><better>B</better>", "#### 17", "#### 18", "18") is None
    True
    >>> pair_guard("<think>Reference: 18. A: 18. B: 17.</think><better>A</better>", "#### 17", "#### 18", "18")
    'judge_ungrounded'
    >>> pair_guard("<think>Reference: 18. A: 18. B: none.</think><better>A</better>", "#### 18", "Hmm.", "18") is None
    True
"""

from __future__ import annotations

import re
from decimal import Decimal

from reward_fns.parse import (
    FINAL_OK,
    QUOTE_SEP,
    QUOTE_VALUE,
    final_answer,
    last_quote,
    normalize_number,
    normalize_text,
    parse_choice,
    quoted_candidate,
)

# each problem earns what a verdict of 0 earns
UNGROUNDED, CONTRADICTION, UNVERIFIED = "judge_ungrounded", "judge_contradiction", "judge_unverified"


def _reference(reference: object) -> Decimal | None:
    """The reference answer's value, a string read as the answers are (``parse.normalize_text``: ``\u221217`` is
    -17); None: no reference (or none that reads as a number)."""
    return normalize_number(normalize_text(reference) if isinstance(reference, str) else reference)


def guard(reply: str, candidate: str, reference: str | None) -> str | None:
    """What is wrong with a paying verdict (None: nothing): ``judge_unverified`` when the reply quotes no candidate
    answer that reads as one number; ``judge_contradiction`` when the quote is not the reference's;
    ``judge_ungrounded`` when ``candidate`` does not state exactly that one final answer (``parse.final_answer``)."""
    quoted = quoted_candidate(reply)
    if quoted is None:
        return UNVERIFIED
    ref = _reference(reference)
    if ref is not None and quoted != ref:
        return CONTRADICTION
    value, status = final_answer(normalize_text(candidate))
    return None if status == FINAL_OK and value == quoted else UNGROUNDED


# "A: 17", "**A:** 17", "Response A: 17", "A = 17", "| A | 17 |": a capital letter standing alone before the
# separator of a quote (``parse.QUOTE_SEP``; not "DATA:", "Q&A:")
_QUOTED_SIDE = {side: re.compile(rf"(?<![\w&]){side}" + QUOTE_SEP + QUOTE_VALUE) for side in "AB"}


def quoted_side(reply: object, side: str) -> Decimal | None:
    """The final answer a pairwise reply quotes for response ``side`` (``A: 17``): the number after the last ``A:``
    of the think part, else of the rest of the reply, read as ``parse.quoted_candidate`` reads ``Candidate:``; None
    when there is none or it is no plain number.

    >>> quoted_side("<think>Reference: 18. A: (17), B: **18**.</think>", "A"), quoted_side("A: none. B: 1", "A")
    (Decimal('17'), None)
    >>> quoted_side("<think>A: adds 3 and 6. So A: 9. B: 8.</think><better>A</better>", "A")
    Decimal('9')
    """
    return last_quote(_QUOTED_SIDE[side], reply)


def pair_guard(
    reply: str, response_a: object, response_b: object, reference: str | None, choice: str | None = None
) -> str | None:
    """What is wrong with a pairwise verdict ``<better>X</better>`` (None: no verdict, or nothing wrong), with the
    problems of ``guard``. With a reference only the winner is checked (a right answer wins against one that states
    none); without one nothing says which answer is right, so both quotes and answers are checked. ``choice``: the
    verdict as the caller read it, for a kind whose tag is not ``<better>``; None: read from the reply."""
    if choice is None:
        parsed = parse_choice(reply)
        if not parsed.ok:
            return None
        choice = parsed.value
    ref = _reference(reference)
    responses = {"A": response_a, "B": response_b}
    sides = (choice,) if ref is not None else ("A", "B")
    quotes = {side: quoted_side(reply, side) for side in sides}
    if None in quotes.values():
        return UNVERIFIED
    if ref is not None and quotes[choice] != ref:
        return CONTRADICTION
    for side in sides:
        value, status = final_answer(normalize_text(responses[side]))
        if status != FINAL_OK or value != quotes[side]:
            return UNGROUNDED
    return None
