"""The pairwise guard fails closed (``reward_fns.guard.pair_guard`` through ``reward_fns.pairwise_judge``): where the
reference is shown, a verdict ``<better>X</better>`` counts only when its reply quotes the winner's answer as a number
(``A: 72.``), that quote is the reference's and the winner's one final answer (the loser's quote and answer may be
anything); without a reference both answers are quoted, each that response's one final answer. Exact rewards against
the fake OpenAI server for scripted judges (honest, misquoting, quoting words, punctuation around the numbers, paying
a wrong or hedging answer with the reference's number), in ``pairwise_ref`` and in a tournament; the guard's own cases.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from reward_fns.guard import CONTRADICTION, UNGROUNDED, UNVERIFIED, pair_guard, quoted_side
from reward_fns.pairwise_judge import compute_score, score_group
from reward_fns.parse import FINAL_OK, final_answer
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.reward_fns.test_pairwise_judge import INFO, REFERENCE, RIGHT, WRONG, row, shown, timeless

FAST = dict(timeout=2.0, max_retries=0, canary_every=0)
HEDGE = "The answer is 96 or 72."  # two final answers: the last number is the reference's


def judge(pick: str, cand: str = "{n}", ref: str = "72", when: str = "AB"):
    """A judge that names the candidate (``pick="cand"``) or the reference solution (``"ref"``), quoting the
    candidate as ``cand`` (``{n}``: its last number) and the reference solution as ``ref`` when the candidate is
    shown in a position of ``when``, its true numbers otherwise."""

    def reply(body: dict) -> str:
        a, b, _ = shown(body)
        cand_side = "B" if a == REFERENCE else "A"
        n = re.findall(r"\d+", a if cand_side == "A" else b)[-1]
        q_cand, q_ref = (cand.format(n=n), ref) if cand_side in when else (n, "72")
        qa, qb = (q_cand, q_ref) if cand_side == "A" else (q_ref, q_cand)
        letter = cand_side if pick == "cand" else "AB"[cand_side == "A"]
        return f"<think>Reference: 72. A: {qa} B: {qb}</think><better>{letter}</better>"

    return reply


def pairwise_ref(reply, candidate, **kw) -> dict:
    with FakeOpenAIServer(reply) as srv:
        out = asyncio.run(
            compute_score("openai/gsm8k", candidate, "72", INFO, base_url=srv.base_url, model="judge", **FAST, **kw)
        )
    return timeless(out)


# (judge, candidate, expected): row(score, wins, ...) in pairwise_ref; flip 0 (each judge names one answer both orders)
CASES = {
    "honest: names the right candidate": (judge("cand"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "honest: names the reference over a wrong one": (judge("ref"), WRONG, row(0.0, 0.0)),
    # a right candidate ties with the reference: any verdict pays it, whatever the reply quotes
    "misquotes the winner as A": (judge("cand", "27", when="A"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "misquotes the loser as A: only the winner's quote is checked": (
        judge("cand", ref="27", when="B"),
        RIGHT,
        row(1.0, 1.0, rule=1.0),
    ),
    "quotes a word": (judge("cand", "seventy-two"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "quotes none": (judge("cand", "none."), RIGHT, row(1.0, 1.0, rule=1.0)),
    "quotes 72/1": (judge("cand", "72/1"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "quotes a word, wrong candidate": (judge("cand", "seventy-two"), WRONG, row(0.0, 0.0, guarded=1.0)),
    "punctuation: 72,": (judge("cand", "{n},"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "punctuation: (72)": (judge("cand", "({n})"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "punctuation: **72**": (judge("cand", "**{n}**."), RIGHT, row(1.0, 1.0, rule=1.0)),
    "punctuation: $72.00;": (judge("cand", "${n}.00;"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "names a wrong answer quoted as the reference's": (judge("cand", "72"), WRONG, row(0.0, 0.0, guarded=1.0)),
    "names a wrong answer quoted right": (judge("cand"), WRONG, row(0.0, 0.0, guarded=1.0)),
    "names a hedge quoted as the reference's": (judge("cand", "72"), HEDGE, row(0.0, 0.0, guarded=1.0)),
    "names two #### answers": (judge("cand", "72"), "#### 96\n#### 72", row(0.0, 0.0, guarded=1.0, rule=1.0)),
    "names two boxed answers": (judge("cand", "72"), "\\boxed{96} \\boxed{72}", row(0.0, 0.0, guarded=1.0)),
    "names an answer without a number": (judge("cand", "72"), "seventy-two 1", row(0.0, 0.0, guarded=1.0)),
    # a #### token that is not one plain number, a restated answer, a disowned one: no final answer to win with
    "names #### 72/5 quoted as 72": (judge("cand", "72"), "#### 72/5", row(0.0, 0.0, guarded=1.0)),
    "names #### 72^2 quoted as 72": (judge("cand", "72"), "#### 72^2", row(0.0, 0.0, guarded=1.0)),
    "names #### 72-80 quoted as 72": (judge("cand", "72"), "#### 72-80", row(0.0, 0.0, guarded=1.0)),
    "names #### 72:30 quoted as 72": (judge("cand", "72"), "#### 72:30", row(0.0, 0.0, guarded=1.0)),
    "names a #### 72 taken back": (
        judge("cand", "72"),
        "#### 72\nWait, that's wrong. It is 71",
        row(0.0, 0.0, guarded=1.0, rule=1.0),
    ),
    "names 'The answer is not 72.'": (judge("cand", "72"), "The answer is not 72.", row(0.0, 0.0, guarded=1.0)),
    "names '72 is wrong; I don't know'": (judge("cand", "72"), "72 is wrong; I don't know", row(0.0, 0.0, guarded=1.0)),
}
GUARD_OFF = {  # the same judges, unchecked: what the guard takes away
    "misquotes the winner as A": (judge("cand", "27", when="A"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "quotes a word": (judge("cand", "seventy-two"), RIGHT, row(1.0, 1.0, rule=1.0)),
    "names a wrong answer quoted as the reference's": (judge("cand", "72"), WRONG, row(1.0, 1.0)),
    "names a hedge quoted as the reference's": (judge("cand", "72"), HEDGE, row(1.0, 1.0)),
}


@pytest.mark.parametrize("reply, candidate, expected", CASES.values(), ids=CASES.keys())
def test_pairwise_ref_guarded(reply, candidate, expected):
    assert pairwise_ref(reply, candidate) == expected


@pytest.mark.parametrize("reply, candidate, expected", GUARD_OFF.values(), ids=GUARD_OFF.keys())
def test_pairwise_ref_unguarded(reply, candidate, expected):
    assert pairwise_ref(reply, candidate, grounded=False) == expected


def last_72(body: dict) -> str:
    """A careless judge: names the response whose last number is 72 (A when both or neither), quoting last numbers."""
    a, b, _ = shown(body)
    na, nb = (re.findall(r"\d+", t)[-1] for t in (a, b))
    return f"<think>Reference: 72. A: {na}. B: {nb}.</think><better>{'B' if nb == '72' != na else 'A'}</better>"


def t_row(score, **kw):
    return row(score, score, calls=kw.pop("calls", 1.0), **kw)


# circular over two answers: both orders of the one pair; a voided verdict is a loss for the answer it picked alone
TOURNAMENT = {
    # the judge names the hedge in both orders, both voided: a loss for the hedge; no comparison counts for the
    # wrong answer it never picked, so that one gets the fallback (the rule's 0)
    "hedge vs wrong: both orders voided": (
        [HEDGE, WRONG],
        {},
        [t_row(0.0, guarded=1.0), row(0.0, -1.0, fallback=1.0, guarded=1.0, calls=1.0)],
    ),
    "hedge vs wrong, guard off": ([HEDGE, WRONG], {"grounded": False}, [t_row(1.0), t_row(0.0)]),
    "right vs hedge: the right answer's win stands, the hedge's is voided": (
        [RIGHT, HEDGE],
        {},
        [t_row(1.0, flip=1.0, tie=1.0, guarded=0.5, rule=1.0), t_row(0.0, flip=1.0, guarded=0.5)],
    ),
    "right vs wrong": ([RIGHT, WRONG], {}, [t_row(1.0, rule=1.0), t_row(0.0)]),
}


@pytest.mark.parametrize("texts, kw, expected", TOURNAMENT.values(), ids=TOURNAMENT.keys())
def test_tournament_guarded(texts, kw, expected):
    with FakeOpenAIServer(last_72) as srv:
        out = asyncio.run(score_group(texts, "72", INFO, base_url=srv.base_url, model="judge", **FAST, **kw))
    assert [timeless(o) for o in out] == expected


def final_72(body: dict) -> str:
    """A truthful judge: quotes each response's one final answer (``parse.final_answer``; ``none`` where it states
    none or several) and names the one that is 72 (A when both or neither)."""
    a, b, _ = shown(body)
    qa, qb = (str(v) if status == FINAL_OK else "none" for v, status in map(final_answer, (a, b)))
    return f"<think>Reference: 72. A: {qa}. B: {qb}.</think><better>{'B' if qb == '72' != qa else 'A'}</better>"


def test_a_right_answer_wins_against_answers_without_one():
    """Circular over four: one right answer, two without a final answer, a hedge. A truthful judge names the right
    answer in each of its four comparisons and those wins stand (only the winner's quote is checked where the
    reference is shown); every comparison between two answers without one is voided: a loss for the answer picked.
    Flips count only between answers whose final answers differ (none of the three without one differs)."""
    texts = ["She has 72 apples.\n#### 72", "Let me think step by step", "I am not sure.", HEDGE]
    with FakeOpenAIServer(final_72) as srv:
        out = asyncio.run(score_group(texts, "72", INFO, base_url=srv.base_url, model="judge", **FAST))
    assert [timeless(o) for o in out] == [
        t_row(1.0, rule=1.0, calls=2.0),
        t_row(0.0, guarded=0.5, calls=2.0),
        t_row(0.0, guarded=1.0, calls=2.0),
        t_row(0.0, guarded=0.5, calls=2.0),
    ]


REPLY = "<think>Reference: 72. A: {a} B: {b}</think><better>{x}</better>"
# (reply fields, response A, response B, reference shown, problem)
GUARD = [
    (dict(a="72.", b="96.", x="A"), RIGHT, WRONG, "72", None),
    (dict(a="72.", b="96.", x="B"), RIGHT, WRONG, "72", CONTRADICTION),  # names 96: not the reference's
    (dict(a="72.", b="96.", x="B"), RIGHT, WRONG, None, None),  # no reference shown: no contradiction to find
    (dict(a="72.", b="72.", x="B"), RIGHT, WRONG, "72", UNGROUNDED),  # B's answer is 96
    (dict(a="72.", b="72.", x="B"), RIGHT, WRONG, None, UNGROUNDED),
    # where the reference is shown, only the winner is checked: the loser's quote and answer may be anything
    (dict(a="72.", b="none.", x="A"), RIGHT, WRONG, "72", None),
    (dict(a="72.", b="", x="A"), RIGHT, WRONG, "72", None),  # no quote for the loser
    (dict(a="72.", b="72.", x="A"), RIGHT, WRONG, "72", None),  # the loser misquoted
    (dict(a="72.", b="96.", x="A"), RIGHT, HEDGE, "72", None),  # the loser states two answers
    (dict(a="72.", b="none.", x="A"), RIGHT, "Let me think step by step", "72", None),  # the loser states none
    (dict(a="none.", b="96.", x="B"), "Let me think", WRONG, "72", CONTRADICTION),  # the winner is checked
    (dict(a="none.", b="96.", x="A"), RIGHT, WRONG, "72", UNVERIFIED),
    (dict(a="", b="96.", x="A"), RIGHT, WRONG, "72", UNVERIFIED),
    (dict(a="seventy-two.", b="96.", x="A"), RIGHT, WRONG, "72", UNVERIFIED),
    (dict(a="72.", b="96.", x="A"), HEDGE, WRONG, "72", UNGROUNDED),  # the winner states two answers
    (dict(a="72.", b="none.", x="A"), "Let me think", WRONG, "72", UNGROUNDED),  # the winner states none
    # no reference shown: nothing says which answer is right, so both quotes and both answers are checked
    (dict(a="72.", b="none.", x="A"), RIGHT, WRONG, None, UNVERIFIED),
    (dict(a="72.", b="", x="A"), RIGHT, WRONG, None, UNVERIFIED),
    (dict(a="72.", b="72.", x="A"), RIGHT, WRONG, None, UNGROUNDED),
    (dict(a="72.", b="96.", x="A"), RIGHT, HEDGE, None, UNGROUNDED),  # B states two answers, whoever wins
    (dict(a="(72),", b="**96**", x="A"), RIGHT, WRONG, "72", None),
    (dict(a="72.", b="96.", x="tie"), RIGHT, WRONG, "72", None),  # no verdict: nothing to check
]


# whole replies (reply, response A, response B, reference shown, problem)
GUARD_REPLIES = [
    (
        "<think>Reference: 72. A: computes 6*12 = 72. B: adds. So A: 72. B: 96.</think><better>A</better>",
        RIGHT,
        WRONG,
        "72",
        None,
    ),
    ("<think>Reference: 72. A:96,B:72</think><better>B</better>", WRONG, RIGHT, "72", None),
    ("<think>Q&A: 96. Reference: 72. A: 72. B: 96.</think><better>A</better>", RIGHT, WRONG, "72", None),
    ("<think>Reference: 72. A: 72. B: 96.</think>\nA: 96. <better>A</better>", RIGHT, WRONG, "72", None),
    ("<think>Reference: 72. A: 72. Wait, A: 96.</think><better>A</better>", RIGHT, WRONG, "72", CONTRADICTION),
]


@pytest.mark.parametrize("reply, a, b, reference, problem", GUARD_REPLIES)
def test_pair_guard_reads_the_last_quote_of_the_think_part(reply, a, b, reference, problem):
    assert pair_guard(reply, a, b, reference) == problem


@pytest.mark.parametrize("fields, a, b, reference, problem", GUARD)
def test_pair_guard(fields, a, b, reference, problem):
    assert pair_guard(REPLY.format(**fields), a, b, reference) == problem


@pytest.mark.parametrize(
    "reply, side, expected",
    [
        ("<think>Reference: 72. A: 72. B: 62.</think>", "A", "72"),
        ("<think>Reference: 72. A: 72. B: 62.</think>", "B", "62"),
        ("**A:** 1,234. **B:** (5)", "A", "1234"),
        ("Response A: 17kg, Response B: 18", "A", "17"),
        ("DATA: 5. B: 6", "A", None),  # the A of a word is no quote
        ("A: ７２. B: 1", "A", "72"),  # read after normalize_text
        ("B: 1", "A", None),
        # the last quote of the think part: the judge's summary after its working
        ("<think>Reference: 18. A: computes 3*6 = 18. B: adds. So A: 18. B: 17.</think><better>A</better>", "A", "18"),
        ("<think>Reference: 18. A: computes 3*6 = 18. B: adds. So A: 18. B: 17.</think><better>A</better>", "B", "17"),
        ("<think>Reference: 18. A: 18 B: 19</think>\nA: 19. <better>A</better>", "A", "18"),  # not the text after it
        ("<think>Looks fine.</think>\nA: 19. B: 18. <better>A</better>", "A", "19"),  # none inside: the rest's last
        ("<think>A: 18.</think> A: 19.", "B", None),
        # a comma ends the number unless it separates groups of three digits
        ("A:17,B:18", "A", "17"),
        ("A:17,B:18", "B", "18"),
        ("A: 1,000,B: 18", "A", "1000"),
        # the A of a word, or of Q&A, is no quote
        ("Q&A: 19. Reference: 18. A: 18. B: 19.", "A", "18"),
        ("Q&A: 19.", "A", None),
        # the separators and wrappers parse.quoted_candidate reads
        ("<think>A = 72. B = 96.</think>", "A", "72"),
        ("<think>A = 72. B = 96.</think>", "B", "96"),
        ("<think>| A | 72 |\n| B | 96 |</think>", "B", "96"),
        ("<think>A: \\boxed{72}. B: \\(96\\).</think>", "B", "96"),
        ("<think>A:\n72\nB:\n96</think>", "A", "72"),
        ("<think>A - 72. B - 96.</think>", "A", "72"),
        ("<think>A: 72\u00b2. B: 96.</think>", "A", None),  # a power, not 722
        ("<think>| A | B |\n| 72 | 96 |</think>", "A", None),  # a table with the sides as its header: unread
        ("<think>A: 72. B: 96. A - B = 24.</think>", "A", "72"),  # "A - B" names no number for A
    ],
)
def test_quoted_side(reply, side, expected):
    got = quoted_side(reply, side)
    assert (str(got) if got is not None else None) == expected
