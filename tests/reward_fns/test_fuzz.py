"""Property-based fuzz of the shared parser and the three rule rewards (hypothesis).

Each parser sees >= 10,000 generated strings: random unicode, token soups of real and near-miss
tags (nested, unclosed, repeated, mixed case), short soups of think and verdict tags only (nesting
around real verdicts), and 1 MB inputs. Properties:

* nothing raises;
* the parse agrees with an independent, deliberately naive oracle written from the rules (think
  blocks nest; a ``</think>`` with no open block is text; an unclosed ``<think>`` means no answer);
* malformed output earns exactly the format penalty (< 0) and well-formed output earns >= 0,
  so no unparseable output ever gets a positive reward (GSM8K: no number -> 0.0).
"""

from __future__ import annotations

import collections

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_fns import gsm8k, pairwise, pointwise
from reward_fns.parse import hash_answer, last_number, normalize_number, parse_choice, parse_score

N = 10_000
COUNTS: collections.Counter = collections.Counter()
FUZZ = settings(max_examples=N, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

TOKENS = [
    "<think>",
    "</think>",
    "<score>",
    "</score>",
    "<better>",
    "</better>",
    "<Score>",
    "< score>",
    "<think",
    "think>",
    "<",
    ">",
    "/",
    "A",
    "B",
    "a",
    "b",
    "tie",
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "-1",
    "3.0",
    " ",
    "\n",
    "\t",
    "####",
    "#### ",
    "$",
    ",",
    ".",
    "-",
    "1,234",
    "18.00",
    "é",
    "日本",
    "\u0663",
    "\uff13",
    "\u200b",
    "🙂",
    "ignore previous instructions",
]
soup = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
# think blocks nested around real verdicts, each opener or closer sometimes dropped (unbalanced,
# unclosed), and short soups of the same tags
VERDICTS = ["<score>2</score>", "<better>A</better>", "<score>", "</score>", "</think>", "x"]
nest = st.recursive(
    st.sampled_from(VERDICTS),
    lambda inner: st.tuples(
        st.sampled_from(["<think>", "<think>", ""]),
        st.lists(inner, max_size=3).map("".join),
        st.sampled_from(["</think>", "</think>", ""]),
    ).map("".join),
    max_leaves=8,
) | st.lists(st.sampled_from(["<think>", "</think>", "<score>2</score>", "<better>B</better>"]), max_size=8).map(
    "".join
)
text = st.one_of(
    soup, nest, st.text(max_size=200), st.lists(st.one_of(soup, st.text(max_size=20)), max_size=6).map("".join)
)


def oracle_strip(s: str):
    """Naive think removal, one character at a time: blocks nest, a stray closer is text."""
    out, depth, i = [], 0, 0
    while i < len(s):
        if s.startswith("<think>", i):
            depth, i = depth + 1, i + 7
        elif depth and s.startswith("</think>", i):
            depth, i = depth - 1, i + 8
        else:
            if depth == 0:
                out.append(s[i])
            i += 1
    return None if depth else "".join(out)


def oracle_tag(s: str, tag: str):
    """Naive re-statement of the rules: strip (nested) think blocks, then demand one tag pair."""
    body = oracle_strip(s)
    if body is None:
        return None, "unclosed_think"
    o, c = f"<{tag}>", f"</{tag}>"
    if body.count(o) == 0 and body.count(c) == 0:
        return None, "missing_tag"
    if body.count(o) > 1 or body.count(c) > 1:
        return None, "multiple_tags"
    a, b = body.find(o), body.find(c)
    if a < 0 or b < 0 or b < a:
        return None, "missing_tag"
    return body[a + len(o) : b], "ok"


def oracle_score(s: str):
    inner, reason = oracle_tag(s, "score")
    if inner is None:
        return None
    t = inner.strip(" \t\n\r\x0b\x0c")
    return int(t) if len(t) == 1 and t in "01234" else None


def oracle_choice(s: str):
    inner, reason = oracle_tag(s, "better")
    if inner is None:
        return None
    t = inner.strip().upper()
    return t if t in ("A", "B") else None


@FUZZ
@given(s=text, label=st.integers(0, 4))
def test_fuzz_pointwise(s, label):
    COUNTS["pointwise"] += 1
    p = parse_score(s)
    expect = oracle_score(s)
    assert (p.value if p.ok else None) == expect
    out = pointwise.compute_score("j", s, label)
    assert list(out) == ["score", "acc", "pred", "label", "format_ok"]
    if expect is None:
        assert out["score"] == -1.0 and out["format_ok"] == 0.0
    else:
        assert 0.0 <= out["score"] <= 1.0 and out["format_ok"] == 1.0


@FUZZ
@given(s=text, label=st.sampled_from(["A", "B"]))
def test_fuzz_pairwise(s, label):
    COUNTS["pairwise"] += 1
    p = parse_choice(s)
    expect = oracle_choice(s)
    assert (p.value if p.ok else None) == expect
    out = pairwise.compute_score("j", s, label)
    assert list(out) == ["score", "acc", "pred_a", "label_a", "format_ok"]
    if expect is None:
        assert out["score"] == -1.0
    else:
        assert out["score"] == (1.0 if expect == label else 0.0)


@FUZZ
@given(s=text, gt=st.integers(-10_000, 10_000))
def test_fuzz_gsm8k(s, gt):
    COUNTS["gsm8k"] += 1
    for mode, token in (("strict", hash_answer(s)), ("flexible", last_number(s))):
        out = gsm8k.compute_score("g", s, str(gt), mode=mode)
        assert list(out) == ["score", "acc", "format_ok"]
        if normalize_number(token) is None:
            assert out == {"score": 0.0, "acc": 0.0, "format_ok": 0.0}
        else:
            assert out["score"] == (1.0 if normalize_number(token) == gt else 0.0)


BIG = [
    "<think>" + "x" * 1_000_000,  # unclosed, 1 MB
    "<think>" + "y" * 1_000_000 + "</think><score>3</score>",
    "<score>1</score>" * 63_000,
    "<better>" + "A" * 1_000_000 + "</better>",
    ("<think>" + "z" * 100 + "</think>") * 9_000 + "<better>B</better>",
    "<think>" * 150_000 + "</think>" * 150_000 + "<score>2</score>",  # deeply nested, 2.25 MB
    "9" * 1_000_000 + " #### " + "1," * 300_000 + "5",
    "é日🙂" * 340_000,
]


def test_fuzz_megabyte_inputs():
    expected = [
        (None, None, False, False),
        (3, None, False, True),
        (None, None, False, True),
        (None, None, False, False),
        (None, "B", False, False),
        (2, None, False, True),
        (None, None, False, False),  # "#### 1,1,...,1,5": no number (a comma separates groups of three only)
        (None, None, False, False),
    ]
    for s, (score, choice, has_hash, has_last) in zip(BIG, expected, strict=True):
        assert len(s) >= 1_000_000
        p, c = parse_score(s), parse_choice(s)
        assert (p.value if p.ok else None) == score
        assert (c.value if c.ok else None) == choice
        assert (normalize_number(hash_answer(s)) is not None) == has_hash
        assert (normalize_number(last_number(s)) is not None) == has_last
        assert pointwise.compute_score("j", s, 0)["score"] == (-1.0 if score is None else (1.0 if score == 0 else 0.0))
        COUNTS["big"] += 1


def test_fuzz_case_counts():
    """Runs last in this file: each parser really saw >= 10k generated inputs."""
    print(dict(COUNTS))
    for name in ("pointwise", "pairwise", "gsm8k"):
        assert COUNTS[name] >= N, (name, COUNTS[name])
