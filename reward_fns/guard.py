r"""The grounded-verdict guard of ``reward_fns.llm_judge``: what is wrong with a judge's accepting verdict, checked
against the candidate text the judge was shown and the reference answer it was shown (see README_llm_judge.md,
"Grounded verdicts"). No command of its own:

    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "The answer is 5 or 18.", "18")
    'judge_ungrounded'
    >>> guard("<think>Reference: 18. Candidate: 17. Same.</think><score>4</score>", "#### 17", "18")
    'judge_contradiction'
    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "3 x 6 = 18\n#### 18", "18") is None
    True
"""

from __future__ import annotations

from reward_fns.parse import FINAL_OK, final_answer, normalize_number, quoted_candidate

UNGROUNDED, CONTRADICTION, UNVERIFIED = "judge_ungrounded", "judge_contradiction", "judge_unverified"


def guard(reply: str, shown: str, reference: str | None) -> str | None:
    """What is wrong with an accepting verdict, checked against the candidate text the judge was shown (``shown``)
    and the reference answer it was shown: ``judge_unverified`` when the reply quotes no candidate answer (the
    verdict stands, counted); ``judge_contradiction`` when the quoted candidate answer is not the reference's (an
    accept of an answer it calls different); ``judge_ungrounded`` when the candidate does not state exactly that one
    final answer (``parse.final_answer``: hedges, several answers, noise lines); None when it holds."""
    quoted = quoted_candidate(reply)
    if quoted is None:
        return UNVERIFIED
    ref = normalize_number(reference)
    if ref is not None and quoted != ref:
        return CONTRADICTION
    value, status = final_answer(shown)
    return None if status == FINAL_OK and value == quoted else UNGROUNDED
