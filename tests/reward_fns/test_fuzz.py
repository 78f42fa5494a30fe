"""Property-based fuzz of the shared parser and the three rule rewards (hypothesis), and GSM8K case families.

Each parser sees >= 10,000 generated strings: random unicode, token soups of real and near-miss
tags (nested, unclosed, repeated, mixed case), short soups of think and verdict tags only (nesting
around real verdicts), and 1 MB inputs. Properties:

* nothing raises;
* the parse agrees with an independent, deliberately naive oracle written from the rules (think
  blocks nest; a ``</think>`` with no open block is text; an unclosed ``<think>`` means no answer);
* malformed output earns exactly the format penalty (< 0) and well-formed output earns >= 0,
  so no unparseable output ever gets a positive reward (GSM8K: no number -> 0.0);
* GSM8K: 2,000 answers assembled from known parts (words, numbers written as ``$1,234.50.``, ``-18``,
  ``18.00``, ``####`` lines with a number, a word or nothing after them): ``gsm8k.extract_answer`` reads exactly the
  value the generator wrote (strict: the number after the last ``####`` on its line; flexible: the last number
  written), and ``compute_score`` scores it against references written as an int, a string or a ``#### N``
  solution. The expected values never come from ``reward_fns.parse``.

Each fuzz test asserts afterwards that its own cases decided every outcome (every verdict, every choice, GSM8K
right, wrong and missing answers in both modes, each number format deciding the strict answer): a fuzz that only
generates malformed output proves little. ``test_fuzz_case_counts`` builds seeded GSM8K case families (one number
form or one ``####`` layout each, 60 answers per family) whose builder states the value each mode must read and a
near-miss reference (the value a broken parser would read: ``18`` for ``-18``, ``1`` for ``1,234``, the first
``####``'s number), and asserts the exact count of each outcome per family.
"""

from __future__ import annotations

import collections
import random
import re
import unicodedata
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_fns import gsm8k, pairwise, pointwise
from reward_fns.parse import hash_answer, last_number, normalize_number, parse_choice, parse_score

N = 10_000
N_BUILT = 2_000  # GSM8K answers built from known parts (each draws some 40 choices)
MIN_OUTCOME = 25  # each outcome a fuzz test must decide, at least this often
COUNTS: collections.Counter = collections.Counter()  # what the running fuzz test's cases decided
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


def run_fuzz(prop, name: str, n: int, outcomes: list[str]) -> None:
    """Run the hypothesis property ``prop``, then assert that it saw >= ``n`` cases and that its cases decided each of
    ``outcomes`` at least ``MIN_OUTCOME`` times (each test counts its own cases, so it holds alone and in any order)."""
    COUNTS.clear()
    prop()
    counts = dict(COUNTS)
    print(name, sorted(counts.items(), key=str))
    assert counts.get(name, 0) >= n, (name, counts.get(name, 0))
    rare = {k: counts.get(k, 0) for k in outcomes if counts.get(k, 0) < MIN_OUTCOME}
    assert not rare, rare


@FUZZ
@given(s=text, label=st.integers(0, 4))
def pointwise_property(s, label):
    COUNTS["pointwise"] += 1
    p = parse_score(s)
    expect = oracle_score(s)
    COUNTS[f"pointwise verdict {expect}"] += 1
    assert (p.value if p.ok else None) == expect
    out = pointwise.compute_score("j", s, label, require_think=False)
    assert list(out) == ["score", "acc", "pred", "label", "format_ok"]
    if not pointwise.thought(s, True):  # by default a verdict without reasoning is malformed
        assert pointwise.compute_score("j", s, label)["score"] == -1.0
    if expect is None:
        assert out["score"] == -1.0 and out["format_ok"] == 0.0
    else:
        assert 0.0 <= out["score"] <= 1.0 and out["format_ok"] == 1.0


def test_fuzz_pointwise():
    run_fuzz(pointwise_property, "pointwise", N, [f"pointwise verdict {v}" for v in (None, 0, 1, 2, 3, 4)])


@FUZZ
@given(s=text, label=st.sampled_from(["A", "B"]))
def pairwise_property(s, label):
    COUNTS["pairwise"] += 1
    p = parse_choice(s)
    expect = oracle_choice(s)
    COUNTS[f"pairwise choice {expect}"] += 1
    assert (p.value if p.ok else None) == expect
    out = pairwise.compute_score("j", s, label, require_think=False)
    assert list(out) == ["score", "acc", "pred_a", "label_a", "format_ok"]
    if not pointwise.thought(s, True):
        assert pairwise.compute_score("j", s, label)["score"] == -1.0
    if expect is None:
        assert out["score"] == -1.0
    else:
        assert out["score"] == (1.0 if expect == label else 0.0)


def test_fuzz_pairwise():
    run_fuzz(pairwise_property, "pairwise", N, [f"pairwise choice {v}" for v in (None, "A", "B")])


# GSM8K answers from known parts. Words hold no digit, and every part is set off by whitespace, so no number runs
# into another part; the generator knows each number's value and where each "####" is.
WORDS = "so the answer is Answer: apples total = + - $ , . ### é 日本 🙂".split()
AFTER_HASH = ["so", "answer", "apples", "none", "-", "$", ",", ".", "=", "é", "日本", "🙂"]  # no number, no "#"
SEPARATORS = [" ", " ", "\n", "  ", "\t", " \n "]
FEATURES = ("negative", "dollar", "commas", "decimals", "trailing period")
MODES = ("strict", "flexible")
NO_NUMBER = {"score": 0.0, "acc": 0.0, "format_ok": 0.0}
RIGHT = {"score": 1.0, "acc": 1.0, "format_ok": 1.0}
WRONG = {"score": 0.0, "acc": 0.0, "format_ok": 1.0}


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
    text = "".join(parts)
    if strict is not None and extended(text[text.rfind("####") :]):
        strict = None
    return text, strict, flexible, info


EXTENDERS = {"+", "*", "/", "-", "x", "×", "÷", "^", "or", "to", "and"}


def extended(hash_line: str) -> bool:
    """The test's own reading: a ``#### N`` line that goes on with an operator or ``or``/``to``/``and`` and then a
    number (``#### 0 + 5``, ``#### 7 or -2``) states no strict answer."""
    words = hash_line.split("\n")[0].replace("####", " ", 1).split()
    return len(words) >= 3 and words[1].lower() in EXTENDERS and re.match(r"-?\$?\.?\d", words[2]) is not None


def written_reference(value: Decimal, form: int):
    """The reference ``value`` written one of five ways a dataset writes it (the test's own writing, not the
    product's): plain, ``-$18.5``, ``1,234.5``, a GSM8K solution ending ``#### 18``, or an int when whole."""
    sign = "-" if value < 0 else ""
    forms = [str(value), f"{sign}${abs(value)}", format(value, ","), f"Adding it up.\n#### {value}"]
    if value == value.to_integral_value():
        forms.append(int(value))
    return forms[form % len(forms)]


def outcome(out: dict) -> str:
    return {repr(NO_NUMBER): "no number", repr(RIGHT): "right", repr(WRONG): "wrong"}.get(repr(out), repr(out))


@settings(FUZZ, max_examples=N_BUILT)
@given(
    answer=gsm8k_answer(),
    pick=st.sampled_from(["strict", "flexible", "other"]),
    other=st.integers(-99, 99),
    form=st.integers(0, 4),
)
def gsm8k_property(answer, pick, other, form):
    """Each mode reads exactly the value the generator wrote (or none where it wrote none in the mode's place) and
    scores it 1.0 against a reference of that value, 0.0 against another."""
    COUNTS["gsm8k"] += 1
    s, strict, flexible, info = answer
    value = {"strict": strict, "flexible": flexible}.get(pick)
    value = Decimal(other) if value is None else value
    ref = written_reference(value, form)
    for mode, expect in (("strict", strict), ("flexible", flexible)):
        got = gsm8k.extract_answer(s, mode)
        assert (got is None, got) == (expect is None, expect), (mode, s)
        out = gsm8k.compute_score("g", s, ref, mode=mode)
        want = "no number" if expect is None else ("right" if expect == value else "wrong")
        assert outcome(out) == want, (mode, s, ref)
        COUNTS[f"gsm8k {mode} {want}"] += 1
    if strict is not None:
        COUNTS.update(f"gsm8k strict answer: {f}" for f in info["features"])
        COUNTS["gsm8k strict answer: plain"] += not info["features"]
        COUNTS["gsm8k strict answer: the last #### differs from the first"] += info["first_hash_differs"]


def test_fuzz_gsm8k():
    outcomes = [f"gsm8k {m} {o}" for m in MODES for o in ("right", "wrong", "no number")]
    outcomes += [f"gsm8k strict answer: {f}" for f in (*FEATURES, "plain", "the last #### differs from the first")]
    run_fuzz(gsm8k_property, "gsm8k", N_BUILT, outcomes)


def numeric(s: str) -> bool:
    """Whether ``s`` holds a numeric character of any script, also after NFKC (``１``, ``٣``, ``⁸``, ``½``)."""
    return any(c.isnumeric() for c in s + unicodedata.normalize("NFKC", s))


@FUZZ
@given(s=text, gt=st.integers(-10_000, 10_000))
def gsm8k_any_text_property(s, gt):
    """Any text: nothing raises, the keys and values are the reward's own, and text without a numeral (or, strict,
    without a ``#``, also after NFKC) has no answer. Independent of the parser: what the answer is, is
    test_fuzz_gsm8k's and test_fuzz_case_counts'."""
    COUNTS["gsm8k any text"] += 1
    for mode in MODES:
        out = gsm8k.compute_score("g", s, str(gt), mode=mode)
        assert list(out) == ["score", "acc", "format_ok"]
        assert out["score"] == out["acc"] in (0.0, 1.0) and out["format_ok"] in (0.0, 1.0)
        assert out["score"] <= out["format_ok"]
        no_answer = not numeric(s) or (mode == "strict" and "#" not in unicodedata.normalize("NFKC", s))
        if no_answer:
            assert out == NO_NUMBER
        COUNTS[f"gsm8k any text {mode} {'no answer' if no_answer else 'maybe'}"] += 1


def test_fuzz_gsm8k_any_text():
    outcomes = [f"gsm8k any text {m} {o}" for m in MODES for o in ("no answer", "maybe")]
    run_fuzz(gsm8k_any_text_property, "gsm8k any text", N, outcomes)


# GSM8K case families: each builder writes one answer from a seeded random.Random and states what each mode must read,
# as ``(text, (strict, strict near miss), (flexible, flexible near miss))``. A near miss is the value a broken parser
# would read (the sign dropped, the first comma group, the first "####"), given as a second, wrong reference; None
# for a mode that must find no number. Filler words hold no digit and no "#", "$", ",", ".", "-".
K = 60  # answers per family
FILL = "so the answer is apples total = + she has é 日本 🙂".split()
NOT_A_NUMBER = ["apples", "none", "é", "so", "-", "$", ".", "=", "🙂"]


def fill(rng: random.Random) -> str:
    return " ".join(rng.choice(FILL) for _ in range(rng.randint(0, 3)))


def whole(rng: random.Random, lo: int = 0) -> int:
    """A whole number of one to eight digits (at least ``lo``)."""
    return rng.choice([rng.randint(lo, 9), rng.randint(max(lo, 10), 999), rng.randint(max(lo, 1000), 10_000_000)])


def two_whole(rng: random.Random) -> tuple[int, int]:
    a, b = whole(rng), whole(rng)
    return (a, b) if a != b else (a, b + 1)


def fraction(rng: random.Random) -> str:
    return rng.choice(["5", "25", "75", "05", "125"])  # never zero: truncating it changes the value


def both(value, near):
    return (Decimal(value), Decimal(near)), (Decimal(value), Decimal(near))


def plain(rng):
    d = whole(rng)
    return f"{fill(rng)} #### {d} {fill(rng)}", *both(d, d + 1)


def negative(rng):
    d = whole(rng, 1)
    return f"{fill(rng)} #### -{d} {fill(rng)}", *both(-d, d)


def dollar(rng):
    d = whole(rng)
    return f"{fill(rng)} #### ${d} {fill(rng)}", *both(d, d + 1)


def commas(rng):
    d = rng.randint(1000, 10**9)
    groups = f"{d:,}".split(",")
    return f"{fill(rng)} #### {d:,} {fill(rng)}", (Decimal(d), Decimal(groups[0])), (Decimal(d), Decimal(groups[-1]))


def decimals(rng):
    d, f = whole(rng), fraction(rng)
    return f"{fill(rng)} #### {d}.{f} {fill(rng)}", *both(f"{d}.{f}", d)


def trailing_zeros(rng):
    d = whole(rng)
    return f"{fill(rng)} #### {d}.{rng.choice(['0', '00', '000'])} {fill(rng)}", *both(d, d + 1)


def trailing_period(rng):
    d = whole(rng)
    number = rng.choice([str(d), f"{d}.{fraction(rng)}"])
    return f"{fill(rng)} #### {number}. {fill(rng)}", *both(number, Decimal(number) + 1)


def all_forms(rng):
    d, f = rng.randint(1000, 10**7), fraction(rng)
    return f"{fill(rng)} #### -${d:,}.{f}. {fill(rng)}", *both(f"-{d}.{f}", f"{d}.{f}")


def last_hash_differs(rng):
    a, b = two_whole(rng)
    return f"{fill(rng)} #### {a} {fill(rng)} #### {b} {fill(rng)}", *both(b, a)


def number_after_hash_answer(rng):
    a, b = two_whole(rng)
    words = " ".join(rng.choice(["so", "the", "apples", "she", "has"]) for _ in range(rng.randint(0, 3)))
    return f"{fill(rng)} #### {a} {words} {b} apples", (Decimal(a), Decimal(b)), (Decimal(b), Decimal(a))


def hash_then_expression(rng):
    """``#### a + b``, ``#### a or b``: the token is part of an expression or a hedge, no strict answer."""
    a, b = two_whole(rng)
    op = rng.choice(["+", "*", "/", " - ", "or", "to", "x", "÷"])
    return f"{fill(rng)} #### {a} {op} {b} apples", (None, None), (Decimal(b), Decimal(a))


def hash_then_line_break(rng):
    a, b = two_whole(rng)
    gap = rng.choice(["\n", " \n", "\t\n", "\n\n"])
    return f"{fill(rng)} {a} {fill(rng)} ####{gap}{b} {fill(rng)}", (None, None), (Decimal(b), Decimal(a))


def hash_then_word(rng):
    a = whole(rng)
    text = f"{fill(rng)} {a} {fill(rng)} #### {rng.choice(NOT_A_NUMBER)} {fill(rng)}"
    return text, (None, None), (Decimal(a), Decimal(a + 1))


def no_hash(rng):
    a = whole(rng)
    return f"{fill(rng)} {a} {fill(rng)}", (None, None), (Decimal(a), Decimal(a + 1))


def no_number(rng):
    return f"{fill(rng)} #### {rng.choice(NOT_A_NUMBER)} {fill(rng)}", (None, None), (None, None)


def bad_commas(rng):
    """A comma not between groups of three digits: no number in either mode (``1,8``, ``12,5``, ``1234,567``)."""
    written = rng.choice(
        [
            f"{rng.randint(1, 999)},{rng.randint(0, 99)}",
            f"{rng.randint(1000, 99_999)},{rng.randint(100, 999)}",
            ",".join(str(rng.randint(0, 9)) for _ in range(4)),
        ]
    )
    return f"{fill(rng)} #### {written} {fill(rng)}", (None, None), (None, None)


def other_script_digits(rng):
    d = whole(rng)
    zero = rng.choice([0xFF10, 0x0660, 0x0966])  # fullwidth, Arabic-Indic, Devanagari
    written = "".join(chr(zero + int(c)) for c in str(d))
    return f"{fill(rng)} #### {written} {fill(rng)}", *both(d, d + 1)


def invisible_characters(rng):
    d = rng.randint(10, 10_000_000)
    cut = rng.randint(1, len(str(d)) - 1)
    mark = rng.choice(["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad"])
    return f"{fill(rng)} #### {str(d)[:cut]}{mark}{str(d)[cut:]} {fill(rng)}", *both(d, str(d)[cut:])


def unicode_minus(rng):
    d = whole(rng, 1)
    minus = rng.choice(["\u2212", "\u2013", "\u2010"])  # minus sign, en dash, hyphen
    return f"{fill(rng)} #### {minus}{d} {fill(rng)}", *both(-d, d)


FAMILIES = [
    (plain, "answer", "answer"),
    (negative, "answer", "answer"),
    (dollar, "answer", "answer"),
    (commas, "answer", "answer"),
    (decimals, "answer", "answer"),
    (trailing_zeros, "answer", "answer"),
    (trailing_period, "answer", "answer"),
    (all_forms, "answer", "answer"),
    (last_hash_differs, "answer", "answer"),
    (number_after_hash_answer, "answer", "answer"),
    (hash_then_expression, "none", "answer"),
    (hash_then_line_break, "none", "answer"),
    (hash_then_word, "none", "answer"),
    (no_hash, "none", "answer"),
    (no_number, "none", "none"),
    (bad_commas, "none", "none"),
    (other_script_digits, "answer", "answer"),
    (invisible_characters, "answer", "answer"),
    (unicode_minus, "answer", "answer"),
]


@pytest.mark.parametrize("build, strict, flexible", FAMILIES, ids=[f[0].__name__ for f in FAMILIES])
def test_fuzz_case_counts(build, strict, flexible):
    """Per family, K seeded answers: every one read as its builder says in both modes, and the exact count of each
    outcome: for a mode with an answer, K right against the reference and K wrong against the near miss; for a mode
    without one, K with no number (format_ok 0.0)."""
    rng = random.Random(f"gsm8k {build.__name__}")
    counts, misread = collections.Counter(), []
    for _ in range(K):
        text, *expected = build(rng)
        for mode, (value, near) in zip(MODES, expected, strict=True):
            got = gsm8k.extract_answer(text, mode)
            if (got is None, got) != (value is None, value):
                misread.append((mode, text, str(value), str(got)))
            if value is None:
                refs = [("any reference", written_reference(Decimal(rng.randint(-99, 99)), rng.randrange(5)))]
            else:
                assert near != value, (build.__name__, text)
                refs = [("reference", written_reference(value, rng.randrange(5)))]
                refs += [("near miss", written_reference(near, rng.randrange(5)))]
            for kind, ref in refs:
                counts[(mode, kind, outcome(gsm8k.compute_score("g", text, ref, mode=mode)))] += 1
    expect = {}
    for mode, kind in zip(MODES, (strict, flexible), strict=True):
        if kind == "answer":
            expect |= {(mode, "reference", "right"): K, (mode, "near miss", "wrong"): K}
        else:
            expect[(mode, "any reference", "no number")] = K
    assert misread[:3] == [], (len(misread), misread[:3])
    assert dict(counts) == expect


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
