r"""The grounded-verdict guard of ``reward_fns.llm_judge``: what is wrong with a judge's paying verdict (any score
above 0), checked against the candidate's text in the one reading the rule and the judge share
(``parse.normalize_text``) and the reference answer the judge was shown (see README_llm_judge.md, "Grounded
verdicts"). It fails closed: every problem it names earns what a verdict of 0 earns. No command of its own:

    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "The answer is 5 or 18.", "18")
    'judge_ungrounded'
    >>> guard("<think>Reference: 18. Candidate: 17. Same.</think><score>4</score>", "#### 17", "18")
    'judge_contradiction'
    >>> guard("<think>Reference: 18, Candidate: seventeen, Same.</think><score>4</score>", "#### 17", "18")
    'judge_unverified'
    >>> guard("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", "3 x 6 = 18\n#### 18", "18") is None
    True
"""

from __future__ import annotations

from reward_fns.parse import FINAL_OK, final_answer, normalize_number, normalize_text, quoted_candidate

UNGROUNDED, CONTRADICTION, UNVERIFIED = "judge_ungrounded", "judge_contradiction", "judge_unverified"
PROBLEMS = (UNGROUNDED, CONTRADICTION, UNVERIFIED)  # each earns what a verdict of 0 earns


def guard(reply: str, candidate: str, reference: str | None) -> str | None:
    """What is wrong with a paying verdict, checked against the candidate's whole answer (``candidate``, read here
    with ``parse.normalize_text``) and the reference answer the judge was shown: ``judge_unverified`` when the reply
    quotes no candidate answer that reads as one number (``Candidate: seventeen``, ``Candidate: none``, no quote at
    all); ``judge_contradiction`` when the quoted candidate answer is not the reference's (a pay for an answer it
    calls different); ``judge_ungrounded`` when the candidate does not state exactly that one final answer
    (``parse.final_answer``: hedges, several answers, noise lines); None when it holds. Each problem earns a 0's
    reward (``llm_judge``)."""
    quoted = quoted_candidate(reply)
    if quoted is None:
        return UNVERIFIED
    ref = normalize_number(reference)
    if ref is not None and quoted != ref:
        return CONTRADICTION
    value, status = final_answer(normalize_text(candidate))
    return None if status == FINAL_OK and value == quoted else UNGROUNDED
