"""Table-driven tests of the shared parser (reward_fns.parse): every rule, exact values."""

from decimal import Decimal

import pytest

from reward_fns.parse import (
    Parsed,
    extract_tag,
    hash_answer,
    last_number,
    normalize_number,
    numbers_equal,
    parse_choice,
    parse_score,
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
        ("<think><think>a</think></think>X", "</think>X"),  # nested: inner pair removed, stray close kept
        ("</think>X", "</think>X"),  # stray close is not an opening
        ("", ""),
    ],
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<score>3</score>", Parsed(True, "3", "ok")),
        ("<think>t</think><score> 3 </score>", Parsed(True, " 3 ", "ok")),
        ("<think><score>1</score></think><score>2</score>", Parsed(True, "2", "ok")),  # tag inside think ignored
        ("<think><score>1</score></think>", Parsed(False, None, "missing_tag")),
        ("<think><score>1</score>", Parsed(False, None, "unclosed_think")),
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
