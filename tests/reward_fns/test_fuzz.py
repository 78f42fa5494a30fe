"""Property-based fuzz of the shared parser and the three rule rewards (hypothesis).

Each parser sees >= 10,000 generated strings: random unicode, token soups of real and near-miss
tags (nested, unclosed, repeated, mixed case), short soups of think and verdict tags only (nesting
around real verdicts), and 1 MB inputs. Properties:

* nothing raises;
* the parse agrees with an independent, deliberately naive oracle written from the rules (think
  blocks nest; a ``</think>`` with no open block is text; an unclosed ``<think>`` means no answer);
* malformed output earns exactly the format penalty (< 0) and well-formed output earns >= 0,
  so no unparseable output ever gets a positive reward (GSM8K: no number -> 0.0);
* GSM8K: 2,000 answers assembled from known parts (words, numbers written as ``$1,234.50.``, ``-18``,
  ``18.00``, ``####`` lines with a number, a word or nothing after them) score what the generator knows it wrote:
  the strict rule the number after the last ``####`` on its line, the flexible rule the last number written. The
  expected values never come from ``reward_fns.parse``.

``test_fuzz_case_counts`` checks what the generated cases decided, not only how many there were: every verdict,
every choice, malformed output, and for GSM8K right, wrong and missing answers in both modes, each number format as
the deciding answer and a last ``####`` that differs from the first.
"""

from __future__ import annotations

import collections
import unicodedata
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_fns import gsm8k, pairwise, pointwise
from reward_fns.parse import hash_answer, last_number, normalize_number, parse_choice, parse_score

N = 10_000
N_BUILT = 2_000  # GSM8K answers built from known parts (each draws some 40 choices)
MIN_OUTCOME = 25  # each outcome of test_fuzz_case_counts, at least (the rarest, verdict 4, has 57)
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
SCORES = [f"<score>{v}</score>" for v in range(5)]
VERDICTS = [*SCORES, "<better>A</better>", "<better>B</better>", "<score>", "</score>", "</think>", "x"]
nest = st.recursive(
    st.sampled_from(VERDICTS),
    lambda inner: st.tuples(
        st.sampled_from(["<think>", "<think>", ""]),
        st.lists(inner, max_size=3).map("".join),
        st.sampled_from(["</think>", "</think>", ""]),
    ).map("".join),
    max_leaves=8,
) | st.lists(
    st.sampled_from(["<think>", "</think>", *SCORES, "<better>A</better>", "<better>B</better>"]), max_size=8
).map("".join)
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
    COUNTS[f"pointwise verdict {expect}"] += 1
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
    COUNTS[f"pairwise choice {expect}"] += 1
    assert (p.value if p.ok else None) == expect
    out = pairwise.compute_score("j", s, label)
    assert list(out) == ["score", "acc", "pred_a", "label_a", "format_ok"]
    if expect is None:
        assert out["score"] == -1.0
    else:
        assert out["score"] == (1.0 if expect == label else 0.0)


# GSM8K answers from known parts. Words hold no digit, and every part is set off by whitespace, so no number runs
# into another part; the generator knows each number's value and where each "####" is.
WORDS = "so the answer is Answer: apples total = + - $ , . ### é 日本 🙂".split()
AFTER_HASH = ["so", "answer", "apples", "none", "-", "$", ",", ".", "=", "é", "日本", "🙂"]  # no number, no "#"
SEPARATORS = [" ", " ", "\n", "  ", "\t", " \n "]
FEATURES = ("negative", "dollar", "commas", "decimals", "trailing period")


@st.composite
def written_number(draw):
    """``(value, text, features)``: a number as answers write it, e.g. ``-$1,234.50.`` for -1234.50."""
    digits = draw(st.integers(0, 10_000_000))
    negative, dollar, period = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    commas = digits >= 1000 and draw(st.booleans())
    frac = draw(st.sampled_from(["", "", "0", "00", "5", "25"]))
    sign, fraction = "-" if negative else "", f".{frac}" if frac else ""
    text = sign + ("$" if dollar else "") + (f"{digits:,}" if commas else str(digits)) + fraction + "." * period
    features = {f for f, on in zip(FEATURES, (negative, dollar, commas, bool(frac), period), strict=True) if on}
    return Decimal(sign + str(digits) + fraction), text, features


@st.composite
def gsm8k_answer(draw):
    """``(text, strict, flexible, info)``: an answer, the value the strict rule must read (the number right after
    the last ``####`` on its line; None when there is none), the value the flexible rule must read (the last number
    written; None when there is none), and what decided them (``info``)."""
    parts, strict, flexible, hashes, info = [], None, None, [], {"features": set()}
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["word", "word", "number", "hash"]))
        sep = draw(st.sampled_from(SEPARATORS))
        if kind == "word":
            parts += [draw(st.sampled_from(WORDS)), sep]
        elif kind == "number":
            flexible, text, _ = draw(written_number())
            parts += [text, sep]
        else:
            after = draw(st.sampled_from(["number", "number", "word", "nothing"]))
            gap = draw(st.sampled_from(["", " ", "  ", "\t", "\n", " \n"]))  # a line break: nothing on its line
            if after == "number":
                value, text, features = draw(written_number())
                flexible, strict = value, (None if "\n" in gap else value)
                info["features"] = features if strict is not None else set()
                parts += ["####" + gap + text, sep]
            elif after == "word":
                strict = None
                parts += ["####" + gap + draw(st.sampled_from(AFTER_HASH)), sep]
            else:  # "####" ends its line
                strict = None
                parts += ["####", "\n"]
            hashes.append(strict)
    info["first_hash_differs"] = len(hashes) > 1 and hashes[0] != hashes[-1]
    return "".join(parts), strict, flexible, info


@settings(FUZZ, max_examples=N_BUILT)
@given(answer=gsm8k_answer(), pick=st.sampled_from(["strict", "flexible", "other"]), other=st.integers(-99, 99))
def test_fuzz_gsm8k(answer, pick, other):
    """Both modes score what the generator wrote: 1.0 for the reference's value, 0.0 for another, and no number
    (format_ok 0.0) where the generator wrote none in the mode's place."""
    COUNTS["gsm8k"] += 1
    s, strict, flexible, info = answer
    gt = {"strict": strict, "flexible": flexible}.get(pick)
    gt = Decimal(other) if gt is None else gt
    for mode, expect in (("strict", strict), ("flexible", flexible)):
        out = gsm8k.compute_score("g", s, str(gt), mode=mode)
        if expect is None:
            assert out == {"score": 0.0, "acc": 0.0, "format_ok": 0.0}, (mode, s)
            COUNTS[f"gsm8k {mode} no number"] += 1
        else:
            right = 1.0 if expect == gt else 0.0
            assert out == {"score": right, "acc": right, "format_ok": 1.0}, (mode, s, str(gt))
            COUNTS[f"gsm8k {mode} {'right' if right else 'wrong'}"] += 1
    # a GSM8K solution as the reference reads the same as its number
    assert gsm8k.compute_score("g", s, f"So it is that.\n#### {gt}", mode="strict") == gsm8k.compute_score(
        "g", s, str(gt), mode="strict"
    )
    if strict is not None:
        COUNTS.update(f"gsm8k strict answer: {f}" for f in info["features"])
        COUNTS["gsm8k strict answer: plain"] += not info["features"]
        COUNTS["gsm8k strict answer: the last #### differs from the first"] += info["first_hash_differs"]


def numeric(s: str) -> bool:
    """Whether ``s`` holds a numeric character of any script, also after NFKC (``１``, ``٣``, ``⁸``, ``½``)."""
    return any(c.isnumeric() for c in s + unicodedata.normalize("NFKC", s))


@FUZZ
@given(s=text, gt=st.integers(-10_000, 10_000))
def test_fuzz_gsm8k_any_text(s, gt):
    """Any text: nothing raises, the keys and values are the reward's own, and text without a numeral (or, strict,
    without a ``#``, also after NFKC) has no answer. Independent of the parser: what the answer is, is
    test_fuzz_gsm8k's."""
    COUNTS["gsm8k any text"] += 1
    for mode in ("strict", "flexible"):
        out = gsm8k.compute_score("g", s, str(gt), mode=mode)
        assert list(out) == ["score", "acc", "format_ok"]
        assert out["score"] == out["acc"] in (0.0, 1.0) and out["format_ok"] in (0.0, 1.0)
        assert out["score"] <= out["format_ok"]
        no_answer = not numeric(s) or (mode == "strict" and "#" not in unicodedata.normalize("NFKC", s))
        if no_answer:
            assert out == {"score": 0.0, "acc": 0.0, "format_ok": 0.0}
        COUNTS[f"gsm8k any text {mode} {'no answer' if no_answer else 'maybe'}"] += 1


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
    """Runs last in this file: each parser saw >= 10k generated inputs, and they decided every outcome (a fuzz that
    generates only malformed output, or never a right GSM8K answer after a trailing period, proves little)."""
    print(sorted(COUNTS.items(), key=str))
    for name, n in (("pointwise", N), ("pairwise", N), ("gsm8k any text", N), ("gsm8k", N_BUILT)):
        assert COUNTS[name] >= n, (name, COUNTS[name])
    outcomes = (
        [f"pointwise verdict {v}" for v in (None, 0, 1, 2, 3, 4)]
        + [f"pairwise choice {v}" for v in (None, "A", "B")]
        + [f"gsm8k {m} {o}" for m in ("strict", "flexible") for o in ("right", "wrong", "no number")]
        + [f"gsm8k strict answer: {f}" for f in (*FEATURES, "plain", "the last #### differs from the first")]
        + [f"gsm8k any text {m} {o}" for m in ("strict", "flexible") for o in ("no answer", "maybe")]
    )
    rare = {k: COUNTS[k] for k in outcomes if COUNTS[k] < MIN_OUTCOME}
    assert not rare, rare
