"""Table-driven tests of the shared parser (reward_fns.parse): every rule, exact values."""

import re
import re._constants as _sre
import re._parser as _sre_parse
import sys
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reward_fns import pairwise, parse, pointwise
from reward_fns.parse import (
    FINAL_CONFLICT,
    FINAL_NONE,
    FINAL_OK,
    Parsed,
    extract_tag,
    final_answer,
    hash_answer,
    last_number,
    normalize_number,
    normalize_text,
    numbers_equal,
    parse_choice,
    parse_score,
    quoted_candidate,
    reference_answer,
    split_think,
    strip_think,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("no think here", "no think here"),
        ("<think>a</think>B", "B"),
        ("<think>a</think>B<think>c</think>D", "BD"),
        ("<think>multi\nline</think>\nX", "\nX"),
        ("<think>a", None),  # never closed
        ("<think>a</think><think>b", None),  # second one never closed
        ("</think>X", "</think>X"),  # stray close is not an opening
        ("", ""),
        # think blocks nest: everything up to the matching outer </think> is thinking
        ("<think><think>a</think></think>X", "X"),
        ("<think><think>a</think>b</think>X", "X"),
        ("<think><think>a</think><score>4</score></think>X", "X"),
        ("<think>1<think>2<think>3</think>2</think>1</think>X", "X"),  # doubly nested
        ("<think><think><think>a</think></think></think>X<think>b</think>Y", "XY"),
        ("<think>a<think>b</think>c</think>X<think>d</think>", "X"),
        # unbalanced closers: a </think> with no open block is plain text
        ("<think>a</think></think>X", "</think>X"),
        ("</think></think><think>a</think>X", "</think></think>X"),
        ("A</think>B<think>c</think>D</think>", "A</think>BD</think>"),
        # an opener never closed, at any depth: no answer
        ("<think><think>a</think>", None),
        ("<think><think>a</think><score>4</score>", None),
        ("<think>1<think>2<think>3</think></think>X", None),
        ("X<think>a</think><think><think>b</think></think><think>", None),
    ],
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("no blocks", ("", "no blocks")),
        ("a<think>b</think>c", ("b", "a\nc")),
        ("<think>b</think><think>d</think>", ("b\nd", "\n\n")),
        ("<think>a<think>b</think>c</think>X", ("a<think>b</think>c", "\nX")),  # nested: the outer block's contents
        ("x<think>a", ("a", "x")),  # never closed: thinking to the end
        ("</think>X<think>a</think>", ("a", "</think>X\n")),  # a stray closer is text
    ],
)
def test_split_think(text, expected):
    """The think part and the rest, as a judge's quotes are read (``parse.last_quote``)."""
    assert split_think(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<score>3</score>", Parsed(True, "3", "ok")),
        ("<think>t</think><score> 3 </score>", Parsed(True, " 3 ", "ok")),
        ("<think><score>1</score></think><score>2</score>", Parsed(True, "2", "ok")),  # tag inside think ignored
        ("<think><score>1</score></think>", Parsed(False, None, "missing_tag")),
        ("<think><score>1</score>", Parsed(False, None, "unclosed_think")),
        # a verdict inside an outer think block is thinking, however deep
        ("<think><think>a</think><score>4</score></think>", Parsed(False, None, "missing_tag")),
        ("<think><think>a</think><score>4</score></think><score>2</score>", Parsed(True, "2", "ok")),
        ("<think>1<think>2<think>3</think><score>4</score></think></think>", Parsed(False, None, "missing_tag")),
        ("<think><think></think></think><score>3</score>", Parsed(True, "3", "ok")),
        ("<think><think>a</think><score>4</score>", Parsed(False, None, "unclosed_think")),
        ("<think>a</think></think><score>3</score>", Parsed(True, "3", "ok")),  # stray closer is text
        ("no tags", Parsed(False, None, "missing_tag")),
        ("<score>1</score><score>2</score>", Parsed(False, None, "multiple_tags")),
        ("<score>1</score><score>1</score>", Parsed(False, None, "multiple_tags")),  # even agreeing repeats
        ("<score>1</score></score>", Parsed(False, None, "multiple_tags")),
        ("<score><score>1</score>", Parsed(False, None, "multiple_tags")),
        ("<score>1", Parsed(False, None, "missing_tag")),
        ("1</score>", Parsed(False, None, "missing_tag")),
        ("</score>1<score>", Parsed(False, None, "missing_tag")),  # wrong order
        (None, Parsed(False, None, "not_text")),
        (42, Parsed(False, None, "not_text")),
    ],
)
def test_extract_tag(text, expected):
    assert extract_tag(text, "score") == expected


@pytest.mark.parametrize(
    "text, ok, value, reason",
    [
        ("<think>x</think><score>0</score>", True, 0, "ok"),
        ("<think>x</think><score>4</score>", True, 4, "ok"),
        ("<score>\n 2\t</score>", True, 2, "ok"),
        ("<score>3</score> trailing text is fine", True, 3, "ok"),
        ("<score>5</score>", False, None, "bad_value"),
        ("<score>-1</score>", False, None, "bad_value"),
        ("<score>3.0</score>", False, None, "bad_value"),
        ("<score>3.5</score>", False, None, "bad_value"),
        ("<score>+3</score>", False, None, "bad_value"),
        ("<score>03</score>", False, None, "bad_value"),
        ("<score>three</score>", False, None, "bad_value"),
        ("<score></score>", False, None, "bad_value"),
        ("<score>3 or 4</score>", False, None, "bad_value"),
        ("<score>\u0663</score>", False, None, "bad_value"),  # Arabic-Indic three: ASCII digits only
        ("<score>\uff13</score>", False, None, "bad_value"),  # full-width three
        ("<Score>3</Score>", False, None, "missing_tag"),  # tags are exact
        ("<think>x<score>3</score>", False, None, "unclosed_think"),
        ("<score>3</score><score>4</score>", False, None, "multiple_tags"),
    ],
)
def test_parse_score(text, ok, value, reason):
    assert parse_score(text) == Parsed(ok, value, reason)


@pytest.mark.parametrize(
    "text, ok, value, reason",
    [
        ("<think>x</think><better>A</better>", True, "A", "ok"),
        ("<better>b</better>", True, "B", "ok"),
        ("<better>  a \n</better>", True, "A", "ok"),
        ("<better>A or B</better>", False, None, "bad_value"),
        ("<better>Assistant B</better>", False, None, "bad_value"),
        ("<better>tie</better>", False, None, "bad_value"),
        ("<better>C</better>", False, None, "bad_value"),
        ("<better>AB</better>", False, None, "bad_value"),
        ("<better></better>", False, None, "bad_value"),
        ("<better>A</better><better>B</better>", False, None, "multiple_tags"),
        ("A is better", False, None, "missing_tag"),
        ("<think>A</think>", False, None, "missing_tag"),
        ("<think><better>A</better>", False, None, "unclosed_think"),
    ],
)
def test_parse_choice(text, ok, value, reason):
    assert parse_choice(text) == Parsed(ok, value, reason)


# (reward module, output, label, expected): a verdict inside an outer think block earns the format
# penalty, exactly as if there were no verdict at all.
NESTED_REWARDS = [
    (
        pointwise,
        "<think><think>a</think><score>4</score></think>",
        4,
        {"score": -1.0, "acc": 0.0, "pred": -1, "label": 4, "format_ok": 0.0},
    ),
    (
        pointwise,
        "<think>a<think>b</think>c<score>0</score>d</think>",
        0,
        {"score": -1.0, "acc": 0.0, "pred": -1, "label": 0, "format_ok": 0.0},
    ),
    (
        pointwise,
        "<think><think>a</think><score>4</score></think><score>2</score>",
        4,
        {"score": 0.5, "acc": 0.0, "pred": 2, "label": 4, "format_ok": 1.0},
    ),
    (
        pointwise,
        "<think><think><think>x</think></think></think><score>4</score>",
        4,
        {"score": 1.0, "acc": 1.0, "pred": 4, "label": 4, "format_ok": 1.0},
    ),
    (
        pairwise,
        "<think><think>a</think><better>A</better></think>",
        "A",
        {"score": -1.0, "acc": 0.0, "pred_a": 0.0, "label_a": 1.0, "format_ok": 0.0},
    ),
    (
        pairwise,
        "<think><think>a</think><better>A</better></think><better>B</better>",
        "B",
        {"score": 1.0, "acc": 1.0, "pred_a": 0.0, "label_a": 0.0, "format_ok": 1.0},
    ),
    (
        pairwise,
        "<think><think>a</think><better>B</better>",
        "B",
        {"score": -1.0, "acc": 0.0, "pred_a": 0.0, "label_a": 0.0, "format_ok": 0.0},
    ),
]


@pytest.mark.parametrize("module, text, label, expected", NESTED_REWARDS, ids=range(len(NESTED_REWARDS)))
def test_verdict_inside_outer_think_does_not_count(module, text, label, expected):
    assert module.compute_score("x", text, label) == expected


# Inputs that made the old regex parser quadratic, and other deep or unbalanced shapes; each is
# built at n and 8n repetitions. (builder, expected parse at any n)
LINEAR_SHAPES = [
    (lambda n: "<think>" * n + "<score>4</score>", Parsed(False, None, "unclosed_think")),
    (lambda n: "<think>" * n + "</think>" * n + "<score>4</score>", Parsed(True, 4, "ok")),
    (lambda n: "<think>" * n + "</think>" * (n - 1) + "<score>4</score>", Parsed(False, None, "unclosed_think")),
    (lambda n: "</think>" * n + "<score>4</score>", Parsed(True, 4, "ok")),
    (lambda n: "<think>a</think></think>" * n + "<score>4</score>", Parsed(True, 4, "ok")),
    (lambda n: "<score>" + "<think>" * n, Parsed(False, None, "unclosed_think")),
    (lambda n: "<score>4" + "</think>" * n, Parsed(False, None, "missing_tag")),
]


class _Scanned:
    """A compiled pattern of ``reward_fns.parse`` that adds the length of the text each call is given to ``work``."""

    def __init__(self, pattern: re.Pattern, work: list[int], opener: str | None = None):
        self.pattern, self.work, self.opener = pattern, work, opener

    def __getattr__(self, name):
        method = getattr(self.pattern, name)
        if name not in ("search", "match", "fullmatch", "finditer", "findall", "sub", "split"):
            return method

        def scanned(*args, **kw):
            text = next(a for a in args if isinstance(a, str)) if name in ("sub", "split") else args[0]
            self.work[0] += len(text)
            if self.opener is not None:  # a lazy ``(.*?)`` between tags: searched only where one opener can start it
                assert text.count(self.opener) <= 1, f"{self.pattern.pattern} searched with many openers"
            return method(*args, **kw)

        return scanned


def _operations(fn, text: str, monkeypatch) -> int:
    """A count of the work ``fn(text)`` does, without a clock: every Python call and C call (a call on a string
    counts that string's length: ``text.count(x)`` reads all of it), and the length of the text each of the
    parser's regular expressions is run over. A loop that rescans the text for each token counts n x n."""
    work = [0]
    for name, value in list(vars(parse).items()):
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(parse, name, _Scanned(value, work))
    monkeypatch.setattr(parse, "_TAG_CACHE", {})
    real_patterns = parse._tag_patterns

    def tag_patterns(tag):
        open_, close, pattern = real_patterns(tag)
        return open_, close, _Scanned(pattern, work, opener=open_)

    monkeypatch.setattr(parse, "_tag_patterns", tag_patterns)

    def count(frame, event, arg):
        if event == "call":
            work[0] += 1
        elif event == "c_call":
            owner = getattr(arg, "__self__", None)
            work[0] += len(owner) if isinstance(owner, str) else 1

    sys.setprofile(count)
    try:
        fn(text)
    finally:
        sys.setprofile(None)
    monkeypatch.undo()
    return work[0]


def _unbounded_repeats(tree, inside_repeat=False):
    """(body, nested) for each repeat without an upper bound in a parsed pattern; ``nested``: inside another repeat
    of more than one."""
    for op, av in tree:
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
            lo, hi, body = av
            if hi == _sre.MAXREPEAT:
                yield list(body), inside_repeat
            yield from _unbounded_repeats(body, inside_repeat or hi > 1)
        elif op is _sre.SUBPATTERN:
            yield from _unbounded_repeats(av[3], inside_repeat)
        elif op is _sre.BRANCH:
            for branch in av[1]:
                yield from _unbounded_repeats(branch, inside_repeat)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT, _sre.ATOMIC_GROUP):
            yield from _unbounded_repeats(av[-1], inside_repeat)


def test_parser_patterns_cannot_backtrack_far():
    """What one regular-expression call costs, read from the patterns: every repeat without an upper bound repeats
    one character (a literal, a class or any), never a group, and none sits inside another repeat (``(a+)+``, the
    shape that backtracks exponentially). The lazy ``<tag>(.*?)</tag>`` is searched only when the text holds one
    opener (``_Scanned``), so it scans the text once."""
    parse_score("<score>4</score>")  # makes the tag pattern
    patterns = {n: v for n, v in vars(parse).items() if isinstance(v, re.Pattern)}
    patterns.update({f"<{tag}>": pats[2] for tag, pats in parse._TAG_CACHE.items()})
    single = (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN, _sre.CATEGORY)
    bad = {
        name: [(body, nested) for body, nested in _unbounded_repeats(_sre_parse.parse(p.pattern, p.flags))]
        for name, p in patterns.items()
    }
    bad = {n: [r for r in reps if r[1] or len(r[0]) != 1 or r[0][0][0] not in single] for n, reps in bad.items()}
    assert {n: r for n, r in bad.items() if r} == {}
    assert len(patterns) >= 6


@pytest.mark.parametrize("build, expected", LINEAR_SHAPES, ids=range(len(LINEAR_SHAPES)))
@pytest.mark.parametrize("n", [1, 3, 4000])
def test_deep_and_unbalanced_shapes(build, expected, n):
    assert parse_score(build(n)) == expected


@pytest.mark.parametrize("build", [b for b, _ in LINEAR_SHAPES], ids=range(len(LINEAR_SHAPES)))
def test_parse_work_is_linear(build, monkeypatch):
    """8x the input costs at most 9x the operations (``_operations``; a rescan per token would cost 64x)."""
    small, large = (_operations(parse_score, build(n), monkeypatch) for n in (2000, 16_000))
    assert large <= 9 * small, (small, large)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("18", Decimal("18")),
        ("18.00", Decimal("18")),
        ("$18", Decimal("18")),
        ("1,234", Decimal("1234")),
        ("$1,234.50.", Decimal("1234.5")),
        ("-7", Decimal("-7")),
        ("-0.5", Decimal("-0.5")),
        (".5", Decimal("0.5")),
        ("18.", Decimal("18")),
        (" 42 ", Decimal("42")),
        (7, Decimal("7")),
        (2.5, Decimal("2.5")),
        ("", None),
        ("abc", None),
        ("1e3", None),
        ("1/2", None),
        ("nan", None),
        ("--1", None),
        ("1.2.3", None),
        (float("nan"), None),
        (True, None),
        (None, None),
    ],
)
def test_normalize_number(raw, expected):
    assert normalize_number(raw) == expected


@pytest.mark.parametrize(
    "a, b, equal",
    [("18.00", "18", True), ("1,234", "1234", True), ("$5", "5.0", True), ("-3", "3", False), ("x", "x", False)],
)
def test_numbers_equal(a, b, equal):
    assert numbers_equal(a, b) is equal


@pytest.mark.parametrize(
    "text, expected",
    [
        ("So 3 + 4 = 7. #### 7", "7"),
        ("#### 1 then #### 2", "2"),
        ("####   $1,234.", "$1,234."),
        ("#### 18 dollars", "18"),
        ("#### 18 (10 + 8)", "18"),  # working in brackets
        ("#### 18 = 10 + 8", "18"),  # an equation that restates it
        ("#### 72 / 5", None),  # the line makes the token part of an expression, a range or a hedge
        ("#### 72 - 24", None),
        ("#### 72 x 3", None),
        ("#### 72 or 96", None),
        ("#### 72 to 96", None),
        ("#### 72, 96", None),
        ("#### 72 + .5", None),
        ("#### 72 + -5", None),
        ("#### 72 96 apples", "72"),  # a number in passing, as GSM8K's strict reading takes the token
        ("####\n18", None),  # the number must be on the marker's line
        ("#### ", None),
        ("no marker 18", None),
        (None, None),
    ],
)
def test_hash_answer(text, expected):
    assert hash_answer(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a 1 b 22 c 333", "333"),
        ("total $1,234.50 today.", "$1,234.50"),
        ("it is -18.", "-18"),
        ("it is .5", ".5"),
        ("none", None),
        ("", None),
        (None, None),
    ],
)
def test_last_number(text, expected):
    assert last_number(text) == expected


# (reference solution, ground truth, what a judge prompt shows as the reference final answer)
REFERENCE_ANSWER_CASES = [
    ("48+24 = 72 clips.\n#### 72", None, "72"),
    ("so $1,234.\n#### $1,234.", None, "1,234"),
    ("#### 72", "96", "72"),  # the solution's own answer wins over the ground truth
    ("no hash line", "72", "72"),  # policy data: the ground truth is the number
    (None, "1234", "1234"),
    ("#### seventy", "72", "72"),  # a non-numeric #### token falls back to the ground truth
    ("no hash line", "4", "4"),
    ("no hash line", "A", None),  # pairwise labels are not answers
    ("no hash line", None, None),
    (None, True, None),
]


@pytest.mark.parametrize("reference,ground_truth,expected", REFERENCE_ANSWER_CASES)
def test_reference_answer(reference, ground_truth, expected):
    assert reference_answer(reference, ground_truth) == expected


@pytest.mark.parametrize(
    "reply, quoted",
    [
        ("<think>Reference: 18. Candidate: 18. Same.</think><score>4</score>", Decimal("18")),
        ("<think>Reference: 18. Candidate: $1,234.50. Different.</think>", Decimal("1234.50")),
        ("<think>candidate's final answer: -7</think><score>0</score>", Decimal("-7")),
        ("<think>Candidate: 18</think><score>4</score>", Decimal("18")),  # stops at the tag
        ("<think>Reference: 18. Candidate: none. Different.</think>", None),
        ("<think>They match.</think><score>4</score>", None),
        (None, None),
        # punctuation, markdown, brackets, quotes and a unit around the number are read through
        ("Reference: 18, Candidate: 17, Same.", Decimal("17")),
        ("Candidate: 17;", Decimal("17")),
        ("Candidate: (17)", Decimal("17")),
        ("Candidate: **17**", Decimal("17")),
        ("**Candidate:** 17", Decimal("17")),
        ("Candidate answer: 17", Decimal("17")),
        ("Candidate: 17kg.", Decimal("17")),
        ("Candidate: 17。", Decimal("17")),
        ("Candidate: １７", Decimal("17")),
        # a quote that names no one plain number reads as none: a guard that reads it fails closed
        ("Candidate: seventeen", None),
        ("Candidate: 17/1", None),
        ("Candidate: n/a", None),
        ("Candidate: " + "9" * 80, None),  # longer than any quote read (64 characters)
        # the last quote of the think part (else of the rest): the judge's summary after its working
        ("<think>Reference: 18. The candidate: adds 3 and 6. So Candidate: 18.</think><score>4</score>", Decimal("18")),
        ("<think>Candidate: 17. Rechecking, Candidate: 18.</think><score>4</score>", Decimal("18")),
        ("<think>Candidate: 18.</think>Candidate: 17 <score>4</score>", Decimal("18")),
        ("<think>Looks fine.</think>Candidate: 17 <score>4</score>", Decimal("17")),
        # a comma ends the number unless it separates groups of three digits; a candidate inside a word is none
        ("Candidate:17,Same.", Decimal("17")),
        ("Candidate: 1,234,Same.", Decimal("1234")),
        ("Noncandidate: 17", None),
        # other separators and wrappers a judge writes: "=", a table, LaTeX, the next line, a spaced dash, "answer is"
        ("<think>Candidate = 18. Same.</think>", Decimal("18")),
        ("<think>| Reference | 18 |\n| Candidate | 18 |</think>", Decimal("18")),
        ("<think>| **Candidate** | 18 |</think>", Decimal("18")),
        ("<think>Candidate: \\boxed{18}. Same.</think>", Decimal("18")),
        ("<think>Candidate: \\(18\\). Same.</think>", Decimal("18")),
        ("<think>Candidate: \\[18\\]</think>", Decimal("18")),
        ("<think>Candidate: $18$.</think>", Decimal("18")),
        ("<think>Candidate:\n18\nSame.</think>", Decimal("18")),
        ("<think>Candidate - 18. Same.</think>", Decimal("18")),
        ("<think>Candidate \u2013 18. Same.</think>", Decimal("18")),
        ("<think>The candidate's final answer is 18.</think>", Decimal("18")),
        ("<think>Candidate: 18 m\u00b2.</think>", Decimal("18")),  # a unit's power after a space
        # a power is no plain number (not 18, not NFKC's 182); these stay unread: a guard that reads them fails closed
        ("<think>Candidate: 18\u00b2.</think>", None),
        ("<think>Candidate: 10\u207b\u00b2.</think>", None),
        ("<think>Candidate: 18m\u00b2.</think>", None),
        ("<think>Candidate: \\( 18 \\)</think>", None),  # spaces inside the LaTeX delimiters
        ("<think>Candidate:\nThe same as the reference.</think>", None),
        ("<think>Candidate: 18. The candidate - who adds 10 and 8 - is right.</think>", Decimal("18")),  # no quote
        ("<think>Candidate: 18. The candidate is right.</think>", Decimal("18")),
        ("<think>Candidate says 18.</think>", None),
    ],
)
def test_quoted_candidate(reply, quoted):
    assert quoted_candidate(reply) == quoted


_NOISE = " ".join(["clips 48 de la 24 24 the May", "18", "zz 13 qq 7.5 the the"] * 40)

# (candidate text, final answer): the one value every number after an answer cue and the last number agree on;
# FINAL_NONE: no number; FINAL_CONFLICT: different final answers stated
FINAL_ANSWER_CASES = [
    # one answer, in each cue style
    ("3 + 15 = 18\n#### 18\nHope this helps!", Decimal("18")),
    ("#### 1,234\nDone.", Decimal("1234")),
    ("The answer is $18.\nThanks.", Decimal("18")),
    ("The answer is: 18", Decimal("18")),
    ("**Final answer:** 18", Decimal("18")),
    ("FINAL ANSWER: -7", Decimal("-7")),
    ("Q: how many?\nA: 18", Decimal("18")),
    ("So \\boxed{18} apples.", Decimal("18")),
    ("The answer is 18.00", Decimal("18")),
    # no cue: the last number, on a last line that holds one value or ends on a computation's result
    ("3 + 15 = 18\nTherefore, she has 18 apples.", Decimal("18")),
    ("She has 20\r\n18\r\n", Decimal("18")),
    ("work 20\nShe has $1,234.00 left.\n\n  \n", Decimal("1234")),
    ("So 3 + 15 = 18", Decimal("18")),
    ("Ivan finds 4 more: 4 + 4 = 8 stickers.", Decimal("8")),
    # digits of other scripts
    ("The answer is ١٨.", Decimal("18")),
    ("#### １８", Decimal("18")),
    # after a last #### N (the strict rule's answer): working, a check line or a unit, not a second answer
    ("#### 18\nI used 3 steps.", Decimal("18")),
    ("#### 18 (10 + 8)", Decimal("18")),
    ("#### 18\nCheck: 18 - 8 = 10", Decimal("18")),
    ("#### 18 dollars and 0 cents", Decimal("18")),
    ("#### 18 m²", Decimal("18")),
    ("#### 1\u200b8", Decimal("18")),  # invisible characters go first
    ("1⁸", FINAL_NONE),  # a superscript after a digit is a power, 1^8, as the rule and the judge read it
    # a minus sign written as U+2212, an en dash, a small or fullwidth hyphen-minus (NFKC) or a superscript minus
    ("#### \u221217", Decimal("-17")),
    ("The answer is \u221217.", Decimal("-17")),
    ("#### \u201317", Decimal("-17")),
    ("#### \ufe6317", Decimal("-17")),
    ("#### \uff0d17", Decimal("-17")),
    ("#### \u2212$17", Decimal("-17")),
    ("#### \u2212.5", Decimal("-0.5")),
    ("#### \u2212\u200b17", Decimal("-17")),
    ("So 20 \u2013 3 = 17", Decimal("17")),  # a dash between spaced numbers stays a dash
    ("The answer is 18 (10 + 8)", FINAL_CONFLICT),  # after any other cue the last number must agree
    # a #### token is read whole, as the strict rule reads it, through markdown, punctuation and a unit
    ("#### **18**", Decimal("18")),
    ("#### 18.", Decimal("18")),
    ("#### $18", Decimal("18")),
    ("#### 18kg", Decimal("18")),
    ("####18", Decimal("18")),
    # ... and a token that is not one plain number states no final answer (the strict rule reads none there)
    ("#### 18/5", FINAL_NONE),
    ("#### 18^2", FINAL_NONE),
    ("#### 18e2", FINAL_NONE),
    ("#### 18-20", FINAL_NONE),
    ("#### 18:30", FINAL_NONE),
    ("#### 18_2", FINAL_NONE),
    ("#### 1/2", FINAL_NONE),
    ("#### 18/1", FINAL_NONE),
    ("#### $ 18", FINAL_NONE),
    ("#### 18/5\nCheck: 18 - 8 = 10", FINAL_NONE),
    ("The answer is 18.\n#### 18/5", FINAL_NONE),
    ("#### 18/5 (10 + 8)", FINAL_NONE),
    # ... and so does a token the rest of its line extends into an expression, a range or a hedge
    ("#### 72 / 5", FINAL_NONE),
    ("#### 72 - 24", FINAL_NONE),
    ("#### 72 * 2", FINAL_NONE),
    ("#### 72 x 3", FINAL_NONE),
    ("#### 72 or 96", FINAL_NONE),
    ("#### 72 OR 96", FINAL_NONE),
    ("#### 72 to 96", FINAL_NONE),
    ("#### 72 and 96", FINAL_NONE),
    ("#### 72, 96", FINAL_NONE),
    ("#### 18 ** 2", FINAL_NONE),
    ("#### 18 \u2212 5", FINAL_NONE),
    ("#### 18 \\times 5", FINAL_NONE),
    ("#### 18 multiplied by 5", FINAL_NONE),
    ("#### 18 1/2", FINAL_NONE),
    ("#### 18 thousand", Decimal("18")),  # a unit: GSM8K asks "how many thousand"
    ("She needs 240/12 = 20 dozen eggs", Decimal("20")),
    ("#### 13\u00b2", FINAL_NONE),
    # a number that is part of an expression is no answer after any other cue or as the last number either
    ("The answer is 18/18.", FINAL_NONE),
    ("The answer is 18*18", FINAL_NONE),
    ("\\boxed{\\frac{18}{18}}", FINAL_NONE),
    ("\\boxed{18^{2}}", FINAL_NONE),
    ("The answer is 18 * 10^18", FINAL_NONE),
    ("The answer is 18e18", FINAL_NONE),
    ("So the total is 18e18.", FINAL_NONE),  # the last number, no cue
    ("We get 18E18", FINAL_NONE),
    ("On day 2: 6 + 12 = 18", Decimal("18")),  # a label's colon before a space is no time
    ("The answer is 18:30", FINAL_NONE),
    ("The answer is 18 squared.", FINAL_NONE),
    ("The answer is minus 18.", FINAL_NONE),
    ("The answer is negative 18.", FINAL_NONE),
    ("The answer is -(18).", FINAL_NONE),
    ("So the total is 6 times 3", FINAL_NONE),
    ("#### 18 x2", FINAL_NONE),
    ("#### 18 \\cdot5", FINAL_NONE),
    ("#### 18 \u00b7 5", FINAL_NONE),
    ("#### 18 mod 5", FINAL_NONE),
    ("#### 18 \u2012 5", FINAL_NONE),
    ("#### 18 \u00bd", FINAL_NONE),  # NFKC: 1\u20442, a fraction slash
    ("#### 18 to the power of 2", FINAL_NONE),
    ("#### 18 and a half", FINAL_NONE),
    ("#### 18** 2", FINAL_NONE),
    ("The answer is \u2212(18).", FINAL_NONE),
    ("\\boxed{{18}\\over{18}}", FINAL_NONE),
    # an earlier cue's expression is working, and a number before a comma is read without it
    ("**Check the answer:** 18 \u00d7 2 = 36\n\nThe answer is 18.", Decimal("18")),
    ("So, the total is $18, which is what she paid.", Decimal("18")),
    ("The answer is 18, which is nice.", Decimal("18")),
    ("Dividing both sides by 2, we get x = 65, so she has 65", Decimal("65")),
    ("The answer is 18: done.", Decimal("18")),
    ("$\\boxed{18}$", Decimal("18")),
    ("She earns $18/hour, so the answer is 18", Decimal("18")),
    ("#### 72 -96", Decimal("72")),  # a number in passing (a minus sign, not a spaced operator)
    ("#### 18 = 10 + 8", Decimal("18")),
    ("#### 18 (10 + 8)", Decimal("18")),
    ("#### 18 m²", Decimal("18")),
    ("#### 18 apples for 3 kids", Decimal("18")),
    ("#### 18 - that's it", Decimal("18")),
    # a later line after the last #### N that states another number as an answer is a second answer
    ("#### 18\nWait, that's wrong. It is 17", FINAL_CONFLICT),
    ("#### 18\nIt's 17.", FINAL_CONFLICT),
    ("#### 18\n17", FINAL_CONFLICT),
    ("#### 18\n**17**", FINAL_CONFLICT),
    ("#### 18\nThe total is 17 apples.", FINAL_CONFLICT),
    ("#### 18\nTotal = 17", FINAL_CONFLICT),
    ("#### 18\nSo it should be 17.", FINAL_CONFLICT),
    ("#### 18\nIt is 18.", Decimal("18")),
    ("#### 18\n18", Decimal("18")),
    ("#### 18\nStep 1: 5 + 5 = 10\nStep 2: 10 + 8 = 18", Decimal("18")),
    ("#### 18 (not 17)", Decimal("18")),
    # a final statement that negates or disowns its number states none; an earlier sentence may say anything
    ("The answer is not 18.", FINAL_NONE),
    ("18 is wrong; I don't know", FINAL_NONE),
    ("18 is incorrect.", FINAL_NONE),
    ("It isn't 18.", FINAL_NONE),
    ("The answer can't be 18", FINAL_NONE),
    ("The answer is never 18.", FINAL_NONE),
    ("The answer is 18. I'm not sure.", FINAL_NONE),
    ("The answer is 18, but that isn't right.", FINAL_NONE),
    ("So 18? No idea.", FINAL_NONE),
    ("#### 18\nWait, that's wrong.", FINAL_NONE),
    ("#### 18\nI don\u2019t know.", FINAL_NONE),
    ("I don't know", FINAL_NONE),
    ("18 is not divisible by 5.\n#### 18", Decimal("18")),
    ("17 is wrong. The answer is 18.", Decimal("18")),
    ("I was not sure at first. Then 10 + 8 = 18.", Decimal("18")),
    ("Tom doesn't know the total, so 10 + 8 = 18.", Decimal("18")),
    ("Not 17; the answer is 18.", Decimal("18")),
    # hedges and noise: several final answers
    ("The answer is 5. The answer is 18.\n#### 7", FINAL_CONFLICT),
    ("#### 18\n#### 7", FINAL_CONFLICT),
    ("The answer is 5 or 7 or 18", FINAL_NONE),  # a hedge after the cue: no answer stated alone
    ("\\boxed{18} \\boxed{7}", FINAL_CONFLICT),
    ("A: 18\nthen 40 - 20 = 20\n#### 20", FINAL_CONFLICT),
    ("#### 7\nCandidate: 18", FINAL_CONFLICT),
    ("x\n" + " ".join(str(i) for i in range(1000)), FINAL_CONFLICT),
    (_NOISE, FINAL_CONFLICT),
    ("She has 20 apples after giving 2.", FINAL_CONFLICT),
    ("#### 1,8", FINAL_NONE),  # "1,8" is no number (a comma separates groups of three)
    # nothing to read
    ("The answer is eighteen.", FINAL_NONE),
    ("", FINAL_NONE),
    ("\n \n", FINAL_NONE),
    (None, FINAL_NONE),
    (5, FINAL_NONE),
]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("#### 1\u200b8", "#### 18"),
        ("１⁸", "1^8"),  # a superscript after a digit is a power
        ("x\u00b2 m\u00b2", "x2 m2"),  # ... after a letter NFKC's digit
        ("\u221217", "-17"),  # minus sign
        ("\u201317", "-17"),  # en dash
        ("\u201217 \u201017 \u201117", "-17 -17 -17"),  # figure dash, hyphen, non-breaking hyphen
        ("\ufe6317 \uff0d17", "-17 -17"),  # small and fullwidth hyphen-minus (NFKC)
        ("x\u207b\u00b9\u2077", "x-17"),  # superscript minus and digits (NFKC)
        ("\u2212\u200b17", "-17"),  # invisible characters go first
        ("\u2212\u0661\u0667", "-17"),  # digits of another script
        ("\u2212$17 \u2212.5", "-$17 -.5"),
        ("5 \u2013 3, 5\u2013x, \u2212 4, a\u2014b, \u201417", "5 \u2013 3, 5\u2013x, \u2212 4, a\u2014b, \u201417"),
        (None, ""),
    ],
)
def test_normalize_text(text, expected):
    """The one reading the rule, the route check, the judge's prompt and the guard share: a minus sign that is not
    ASCII is ``-`` where a number follows it, so ``\u221217`` is -17 everywhere and never 17; an em dash is a dash."""
    assert normalize_text(text) == expected


@pytest.mark.parametrize("text, expected", FINAL_ANSWER_CASES)
def test_final_answer(text, expected):
    value, status = final_answer(text)
    assert (value, status) == ((expected, FINAL_OK) if isinstance(expected, Decimal) else (None, expected))


@given(
    st.lists(st.integers(-(10**6), 10**6), min_size=2, max_size=6, unique=True),
    st.sampled_from(["The answer is {}.", "#### {}", "\\boxed{{{}}}", "A: {}", "Candidate: {}"]),
    st.sampled_from(["\n", " ", " or "]),
)
def test_final_answer_never_grounds_two_answers(values, cue, sep):
    """Any two different stated answers, in any cue style and order, are a conflict."""
    text = sep.join(cue.format(v) for v in values)
    assert final_answer(text) == (None, FINAL_CONFLICT)


@given(st.integers(-(10**9), 10**9), st.text(alphabet="abcdefgh xyz.,!?\n", max_size=200))
def test_final_answer_reads_a_final_hash_line(n, working):
    """Working without digits, then ``#### n``: the final answer is n."""
    assert final_answer(f"{working}\n#### {n}") == (Decimal(n), FINAL_OK)


@given(
    st.integers(-(10**6), 10**6),
    st.sampled_from(["/", "^", "e", "-", ":", "_", "x", "/-"]),
    st.integers(0, 10**6),
    st.sampled_from(["", ".", " (10 + 8)", "\nCheck: 18 - 8 = 10", " m²"]),
)
def test_a_hash_token_that_is_no_plain_number_states_no_answer(n, op, m, after):
    """``#### 18/5``, ``#### 18^2``, ``#### 18-20``...: never the leading number (the strict rule reads none)."""
    assert final_answer(f"#### {n}{op}{m}{after}") == (None, FINAL_NONE)


@given(
    st.integers(-(10**6), 10**6), st.sampled_from(["The answer is not {}.", "{} is wrong; I don't know", "It isn't {}"])
)
def test_a_disowned_final_number_is_no_answer(n, form):
    assert final_answer(form.format(n)) == (None, FINAL_NONE)


# shapes that would make a backtracking cue regex slow: cues followed by long gaps, unclosed boxes, digits
STATES_SHAPES = [
    lambda n: "answer" + " " * n + "x\nend",
    lambda n: "answer " * n + "\nend",
    lambda n: ("#### " + "*" * 20) * n + "\nend",
    lambda n: "\\boxed{" * n + "\nend",
    lambda n: "1," * n + "\nend",
    lambda n: "A:\n" * n + "end",
    lambda n: "#### 18/5 " * n + "\nend",
    lambda n: "#### 18\n" + "It is 17 = 17 or not 18. " * n,
    lambda n: "not 18 " * n + "I don't know",
]


@pytest.mark.parametrize("build", STATES_SHAPES, ids=range(len(STATES_SHAPES)))
def test_final_answer_work_is_linear(build, monkeypatch):
    """8x the input costs at most 9x the operations (``_operations``; a rescan per cue would cost 64x)."""
    small, large = (_operations(final_answer, build(n), monkeypatch) for n in (2000, 16_000))
    assert large <= 9 * small, (small, large)
