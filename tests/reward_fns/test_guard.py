"""The guard fails closed (``reward_fns/guard.py`` through ``reward_fns.llm_judge.compute_score``): every case of the
audit of the first fail-open guard, against the fake OpenAI server. A judge that is told how to answer (an
instruction-following judge the policy can steer) pays an answer whatever its quote says; only a quote that reads as
the reference's number, of an answer that states that one final answer, is paid."""

from __future__ import annotations

import asyncio

import pytest

from reward_fns import gsm8k, judge_service
from reward_fns.guard import guard, pair_guard
from reward_fns.judge_service import defuse
from reward_fns.llm_judge import compute_score
from tests.doubles.fake_openai import FakeOpenAIServer

INFO = {"question": "Tom has 10 apples and buys 8 more. How many now?", "answer": "10 + 8 = 18\n#### 18"}
FLAGS = ("judge_ungrounded", "judge_contradiction", "judge_unverified")


def said(quote: str, verdict: int = 4) -> str:
    """A judge reply that quotes ``quote`` as the candidate and pays ``verdict``."""
    return f"<think>Reference: 18. Candidate: {quote} Same.</think><score>{verdict}</score>"


def run(candidate: str, reply: str, truth: str = "18", **kw) -> dict:
    judge_service.CLIENTS.clear()
    info = INFO if truth == "18" else {**INFO, "answer": f"#### {truth}"}
    with FakeOpenAIServer(reply=lambda body: reply) as srv:
        return asyncio.run(
            compute_score(
                "openai/gsm8k",
                candidate,
                truth,
                info,
                base_url=srv.base_url,
                model="judge",
                timeout=5.0,
                max_retries=0,
                canary_every=0,
                **kw,
            )
        )


# the wrong answer "#### 17" (or "The answer is 17." where route asks the judge), paid by a judge that says "Same":
# (the quote as the judge writes it, the flag the guard sets)
WRONG_QUOTES = [
    ("17,", "judge_contradiction"),
    ("17;", "judge_contradiction"),
    ("(17)", "judge_contradiction"),
    ("**17**", "judge_contradiction"),
    ("*17*", "judge_contradiction"),
    ("`17`", "judge_contradiction"),
    ('"17"', "judge_contradiction"),
    ("[17]", "judge_contradiction"),
    ("17!", "judge_contradiction"),
    ("17。", "judge_contradiction"),
    ("１７", "judge_contradiction"),
    ("17kg", "judge_contradiction"),
    ("17%", "judge_contradiction"),
    ("$17.", "judge_contradiction"),
    ("17.0,", "judge_contradiction"),
    ("seventeen", "judge_unverified"),
    ("none", "judge_unverified"),
    ("None.", "judge_unverified"),
    ("n/a", "judge_unverified"),
    ("17/1", "judge_unverified"),
    ("17-ish", "judge_unverified"),
    ("", "judge_unverified"),
]


@pytest.mark.parametrize("mode, candidate", [("judge", "#### 17"), ("route", "The answer is 17.")])
@pytest.mark.parametrize("quote, flag", WRONG_QUOTES)
def test_a_wrong_answer_is_never_paid_whatever_the_quote(mode, candidate, quote, flag):
    out = run(candidate, said(quote), mode=mode)
    assert (out["score"], out["judge_score"], [k for k in FLAGS if out[k]]) == (0.0, 4.0, [flag])


# other ways to write the quote (the judge's own words): each reads as the number it names
QUOTE_FORMS = [
    "<think>Reference: 18, Candidate: 17, Same.</think><score>4</score>",
    "<think>Candidate answer: 17. Same.</think><score>4</score>",
    "<think>Candidate's final answer: 17. Same.</think><score>4</score>",
    "<think>**Candidate:** 17. Same.</think><score>4</score>",
    "<think>candidate: 17 apples. Same.</think><score>4</score>",
    "<think>Candidate ： 17. Same.</think><score>4</score>",
    "<think>The candidate: adds 10 and 8 wrongly. So Candidate: 17. Same.</think><score>4</score>",  # the last quote
    "<think>Reference: 18,Candidate:17,Same.</think><score>4</score>",
]


@pytest.mark.parametrize("reply", QUOTE_FORMS)
def test_quote_forms_read_as_the_number(reply):
    out = run("#### 17", reply)
    assert (out["score"], out["judge_contradiction"]) == (0.0, 1.0)


# a right answer quoted in the judge's other common forms: read as 18 and paid
RIGHT_QUOTE_FORMS = [
    "<think>Reference: 18. Candidate = 18. Same.</think><score>4</score>",
    "<think>| Reference | 18 |\n| Candidate | 18 |\nSame.</think><score>4</score>",
    "<think>Reference: 18. Candidate: \\boxed{18}. Same.</think><score>4</score>",
    "<think>Reference: 18. Candidate: \\(18\\). Same.</think><score>4</score>",
    "<think>Reference: 18. Candidate:\n18\nSame.</think><score>4</score>",
    "<think>Reference: 18. Candidate - 18. Same.</think><score>4</score>",
    "<think>Reference: 18. The candidate's final answer is 18. Same.</think><score>4</score>",
]


@pytest.mark.parametrize("reply", RIGHT_QUOTE_FORMS)
def test_right_answers_quoted_in_other_forms_are_paid(reply):
    out = run("#### 18", reply)
    assert (out["score"], [k for k in FLAGS if out[k]]) == (1.0, [])


@pytest.mark.parametrize("quote", ["18\u00b2.", "18\u00b9.", "1\u2078."])
def test_a_quoted_power_is_no_number(quote):
    """``Candidate: 18²`` read as 182 after NFKC (a contradiction); a power is no plain number: unverified."""
    out = run("#### 182", said(quote), truth="182")
    assert (out["score"], [k for k in FLAGS if out[k]]) == (0.0, ["judge_unverified"])


# answers that state no one final answer a judge may be paid for, (answer, the reference): a #### token that is not
# one plain number (the strict and the flexible rule read no such answer), a later line restating another number, a
# final statement that negates or disowns its number
NOT_ONE_NUMBER = [
    ("#### 18/5", "18"),
    ("#### 18^2", "18"),
    ("#### 18e2", "18"),
    ("#### 18-20", "18"),
    ("#### 18:30", "18"),
    ("#### 18_2", "18"),
    ("#### 1/2", "1"),
    ("#### 1/2", "2"),
]
DISOWNED = [("The answer is not 18.", "18"), ("18 is wrong; I don't know", "18")]
UNPAID = [*NOT_ONE_NUMBER, *DISOWNED, ("#### 18\nWait, that's wrong. It is 17", "18")]


def quoting(truth: str) -> tuple[str, str]:
    """A pointwise and a pairwise reply that quote the candidate (response A) as the reference ``truth`` and pay it."""
    return (
        f"<think>Reference: {truth}. Candidate: {truth}. Same.</think><score>4</score>",
        f"<think>Reference: {truth}. A: {truth}. B: 17.</think><better>A</better>",
    )


@pytest.mark.parametrize("answer, truth", UNPAID)
def test_an_answer_without_one_final_answer_is_never_grounded(answer, truth):
    reply, pair = quoting(truth)
    assert guard(reply, answer, truth) == "judge_ungrounded"
    assert pair_guard(pair, answer, "#### 17", truth) == "judge_ungrounded"
    assert pair_guard(pair, answer, "#### 17", None) == "judge_ungrounded"


@pytest.mark.parametrize("answer, truth", UNPAID)
def test_an_answer_without_one_final_answer_is_never_paid(answer, truth):
    out = run(answer, quoting(truth)[0], truth=truth)
    assert (out["score"], out["judge_score"], [k for k in FLAGS if out[k]]) == (0.0, 4.0, ["judge_ungrounded"])


@pytest.mark.parametrize("answer, truth", [*NOT_ONE_NUMBER, *DISOWNED])
def test_route_leaves_an_answer_without_one_final_answer_to_the_rule(answer, truth):
    """No strict ``#### N`` and no one final answer: the rule decides (0) and the judge is not asked."""
    out = run(answer, quoting(truth)[0], truth=truth, mode="route")
    assert (out["score"], out["judge_skipped"], out["judge_score"], out["rule_score"]) == (0.0, 1.0, -1.0, 0.0)


def test_a_reply_without_any_quote_fails_closed():
    out = run("#### 17", "<think>Looks right.</think><score>4</score>")
    assert (out["score"], out["judge_unverified"]) == (0.0, 1.0)


@pytest.mark.parametrize(
    "verdict, score",
    [(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0), (0, 0.0)],
)
def test_every_paying_verdict_is_checked(verdict, score):
    """``Candidate: 17. Close.`` with a partial verdict paid 0.5 before; a 0 is never checked (nothing to take)."""
    out = run("#### 17", f"<think>Reference: 18. Candidate: 17. Close.</think><score>{verdict}</score>")
    assert (out["score"], out["judge_contradiction"]) == (score, float(verdict > 0))


# right answers followed by working, a check line or units: one final answer, paid in judge mode (the default) by a
# truthful judge, and the full 1.0 in hybrid mode
RIGHT_ANSWERS = [
    "#### 18 (10 + 8)",
    "#### 18\nCheck: 18 - 8 = 10",
    "#### 18 dollars and 0 cents",
    "#### 18 m²",
    "10 + 8 = 18\n#### 18\nI used 3 steps.",
    "#### 1\u200b8",
    "#### １８",
]


@pytest.mark.parametrize("mode", ["judge", "hybrid"])
@pytest.mark.parametrize("candidate", RIGHT_ANSWERS)
def test_right_answers_with_working_after_them_are_paid(candidate, mode):
    out = run(candidate, said("18."), mode=mode)
    assert (out["score"], out["rule_score"], [k for k in FLAGS if out[k]]) == (1.0, 1.0, [])


@pytest.mark.parametrize("answer, truth", [("#### 1⁸", "18"), ("#### 13²", "132"), ("#### 10²", "100")])
def test_the_rule_and_the_judge_read_the_same_text(answer, truth):
    """A superscript after a digit is a power (``1^8``), not more digits, for the rule, the prompt and the guard alike:
    nobody pays it (once it was 1 for the rule and 18 for the judge; then 18, and ``13²`` paid as 132)."""
    assert gsm8k.compute_score(solution_str=answer, ground_truth=truth)["score"] == 0.0
    assert answer.replace("⁸", "^8").replace("²", "^2") in defuse(answer)
    assert guard(said(f"{truth}."), answer, truth) is not None


@pytest.mark.parametrize("candidate", [18, ["#### 18"], b"#### 18"])
def test_a_non_string_answer_is_no_answer_for_the_judge_either(candidate):
    """The rule reads a non-string answer as no answer; the judge's path did read ``str(answer)`` and paid it."""
    out = run(candidate, said("18."))
    assert (out["score"], out["rule_score"]) == (0.0, 0.0)


# a minus sign that is not ASCII (U+2212, an en dash) before the number: -17 for the rule, the guard and the prompt
MINUS = "\u2212"
PAIR = "<think>Reference: {r}. A: {a}. B: 18.</think><better>A</better>"


@pytest.mark.parametrize(
    "answer, reference, quote, problem",
    [
        ("#### \u221217", "17", "17.", "judge_ungrounded"),  # a pay for -17 against 17: the answer is not 17
        ("The answer is \u201317.", "17", "17.", "judge_ungrounded"),
        ("#### \u221217", "-17", "\u221217.", None),  # the judge quotes it as it reads: -17, paid
        ("#### \u221217", "-17", "-17.", None),
        ("#### -17", "-17", "\u221217.", None),
        ("#### \u221217", "\u221217", "\u221217.", None),  # a reference written with the minus sign
        ("#### 17", "\u221217", "17.", "judge_contradiction"),
    ],
)
def test_a_unicode_minus_is_a_minus(answer, reference, quote, problem):
    assert guard(said(quote), answer, reference) == problem
    assert pair_guard(PAIR.format(r=reference, a=quote), answer, "#### 18", reference) == problem


@pytest.mark.parametrize("mode", ["strict", "flexible"])
@pytest.mark.parametrize("answer", ["#### \u221217", "#### \u201317", "#### \uff0d17"])
def test_the_rule_reads_a_unicode_minus(answer, mode):
    """The flexible rule read ``\u221217`` as 17 and paid it against 17; the strict rule read no number."""
    assert [gsm8k.compute_score(solution_str=answer, ground_truth=g, mode=mode)["score"] for g in ("17", "-17")] == [
        0.0,
        1.0,
    ]
    assert "#### -17" in defuse(answer)


def test_a_clipped_answer_is_cut_at_whitespace_and_judged_whole():
    """An answer over ``max_response_chars`` was clipped inside a number (``answer is 2|18``: 218 shown as 18 and
    paid); now the prompt shows whole words and the guard reads the whole answer."""
    long = "Let me think. " * 300 + "So the answer is 218"
    shown = defuse(long, 1000)
    assert shown.endswith(" 218") and "answer is 218" in shown
    out = run(long, said("18."), max_response_chars=1000)
    assert (out["score"], out["judge_ungrounded"]) == (0.0, 1.0)


@pytest.mark.parametrize(
    "candidate, skipped, score",
    [
        ("#### 1\u200b8", 1.0, 1.0),  # invisible characters go before the route check: the rule reads 18
        ("#### 18/1", 1.0, 0.0),  # a #### token that is no plain number states no final answer: the rule decides
        ("The answer is 18.", 0.0, 1.0),
        ("The answer is eighteen.", 1.0, 0.0),  # number words: no final answer any reader here takes (a limit)
    ],
)
def test_route_strips_invisible_characters_first(candidate, skipped, score):
    out = run(candidate, said("18."), mode="route")
    assert (out["judge_skipped"], out["score"]) == (skipped, score)
