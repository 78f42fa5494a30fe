"""The one tag/answer parser shared by every reward, judge reward and evaluator.

Rules (identical everywhere):

1. Think blocks are removed first, and they nest: everything from an outermost ``<think>`` to its matching
   ``</think>`` is thinking, whatever it contains (``<think><think>a</think><score>4</score></think>`` has no
   answer). A ``</think>`` while no block is open is ordinary text; a ``<think>`` never closed: ``unclosed_think``.
2. Then the answer tag must appear exactly once: zero is "missing", two or more "multiple" (a hedge such as
   ``<better>A</better><better>B</better>`` earns nothing).
3. The content is validated by the caller's value rule (``parse_score``, ``parse_choice``); anything else is
   "bad_value".

Every function here is total (any input returns, never raises) and linear-time, safe on megabyte inputs
(``tests/reward_fns/test_parse.py`` checks the growth rate).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

OK = "ok"
NOT_TEXT = "not_text"
UNCLOSED_THINK = "unclosed_think"
MISSING = "missing_tag"
MULTIPLE = "multiple_tags"
BAD_VALUE = "bad_value"

_THINK_TOKEN = re.compile(r"</?think>")
_TAG_CACHE: dict[str, tuple[str, str, re.Pattern]] = {}
_SCORE_VALUE = re.compile(r"\s*([0-4])\s*", re.ASCII)
_NUMBER = re.compile(r"-?[$]?\d(?:[\d,]*\d)?(?:\.\d+)?|-?[$]?\.\d+", re.ASCII)  # "18," is 18 and its comma
_HASH_ANSWER = re.compile(r"####[ \t]*(\S*)")
# what extends a "#### N" token on its line into an expression, a range, a hedge or another magnitude: "#### 72 / 5",
# "#### 72 - 24" (also an en dash or minus sign), "#### 72 ** 2", "#### 72 \\div 5", "#### 72 times 3", "#### 72 or 96",
# "#### 72 to 96", "#### 72, 96", "#### 18 1/2", "#### 18 squared"; the token is then no final answer. Working in
# brackets ("#### 18 (10 + 8)"), an equation that restates it ("#### 18 = 10 + 8"), a unit ("#### 18 m²", and so
# "#### 18 million" or "#### 5 dozen", which GSM8K asks in those units) and words ("#### 18 apples, 5 left") are not,
# nor a number in passing ("#### 18 -5 on the way", as GSM8K's strict reading).
_EXTENDED = re.compile(
    r"(?:(?<=,)|[ \t]*(?:\*\*|[+*/×÷^·⋅∙\u2044]|\\(?:div|times|cdot)|\bx"
    r"|\b(?:or|to|and|times|minus|plus|over|mod|divided[ \t]+by|multiplied[ \t]+by)\b)"
    r"|[ \t]+[-\u2010-\u2015\u2212](?=[ \t]))[ \t]*-?[$]?\.?[0-9]"
    r"|[ \t]+[0-9]+[ \t]*[/\u2044][ \t]*[0-9]|[ \t]+and[ \t]+a[ \t]+(?:half|third|quarter)\b"
    r"|[ \t]*(?:squared|cubed|to[ \t]+the[ \t]+(?:\w{1,12}[ \t]+)?power|raised[ \t]+to)\b",
    re.IGNORECASE,
)
# right before a number: what makes it part of an expression, not a value stated alone ("18/18", "\\frac{18}{18}",
# "10^18", "18e18", "6:18", "-(18)", "minus 18", "20 times 18")
_EXPRESSION_BEFORE = re.compile(
    r"(?:[/^×÷·⋅∙\u2044]|\}\{|\^\{|-\(|\\d?frac\S{0,12}|\\over[ \t]*\{?|\b(?:minus|negative|times|over))[ \t]*$"
    r"|\d[eE:][-+]?$",  # "18e18", "6:18", glued
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Parsed:
    """Outcome of parsing one model output.

    ``ok`` is True only for a well-formed answer; ``value`` is then the parsed value (an int for
    scores, ``"A"``/``"B"`` for choices, the raw inner text for ``extract_tag``). ``reason`` is one
    of ``ok``, ``not_text``, ``unclosed_think``, ``missing_tag``, ``multiple_tags``, ``bad_value``.
    """

    ok: bool
    value: object
    reason: str


def _think_blocks(text: str) -> tuple[list[str], list[str], bool]:
    """The contents of the outermost think blocks (rule 1), the text outside them and whether every block closed (one
    never closed runs to the end of the text). One pass over the ``<think>``/``</think>`` tokens with a depth
    counter, so the time is linear in the length of ``text`` whatever the nesting."""
    inside: list[str] = []
    outside: list[str] = []
    depth = start = 0
    for m in _THINK_TOKEN.finditer(text):
        if m.group() == "<think>":
            if depth == 0:
                outside.append(text[start : m.start()])
                start = m.end()
            depth += 1
        elif depth:  # a closer with no open block is plain text: it stays in the current segment
            depth -= 1
            if depth == 0:
                inside.append(text[start : m.start()])
                start = m.end()
    (inside if depth else outside).append(text[start:])
    return inside, outside, not depth


def strip_think(text: str) -> str | None:
    """Remove think blocks (nested ones included, see rule 1); ``None`` if one is never closed."""
    if "<think>" not in text:
        return text
    _inside, outside, closed = _think_blocks(text)
    return "".join(outside) if closed else None


def _tag_patterns(tag: str) -> tuple[str, str, re.Pattern]:
    pats = _TAG_CACHE.get(tag)
    if pats is None:
        open_, close = f"<{tag}>", f"</{tag}>"
        pats = (open_, close, re.compile(re.escape(open_) + r"(.*?)" + re.escape(close), re.DOTALL))
        _TAG_CACHE[tag] = pats
    return pats


def extract_tag(text: object, tag: str) -> Parsed:
    """Return the inner text of the single ``<tag>...</tag>`` outside think blocks."""
    if not isinstance(text, str):
        return Parsed(False, None, NOT_TEXT)
    body = strip_think(text)
    if body is None:
        return Parsed(False, None, UNCLOSED_THINK)
    open_, close, pattern = _tag_patterns(tag)
    n_open, n_close = body.count(open_), body.count(close)
    if n_open == 0 and n_close == 0:
        return Parsed(False, None, MISSING)
    if n_open > 1 or n_close > 1:
        return Parsed(False, None, MULTIPLE)
    m = pattern.search(body)
    if m is None:  # one opening and one closing tag, but out of order or one of them absent
        return Parsed(False, None, MISSING)
    return Parsed(True, m.group(1), OK)


def parse_score(text: object, tag: str = "score", lo: int = 0, hi: int = 4) -> Parsed:
    """Parse ``<score>N</score>`` with N an integer in ``[lo, hi]`` (ASCII digit, whitespace allowed).

    >>> parse_score("<think>ok</think><score> 3 </score>")
    Parsed(ok=True, value=3, reason='ok')
    >>> parse_score("<think>ok</think><score>7</score>")
    Parsed(ok=False, value=None, reason='bad_value')
    """
    p = extract_tag(text, tag)
    if not p.ok:
        return p
    m = _SCORE_VALUE.fullmatch(p.value)
    if m is None:
        return Parsed(False, None, BAD_VALUE)
    v = int(m.group(1))
    if not lo <= v <= hi:
        return Parsed(False, None, BAD_VALUE)
    return Parsed(True, v, OK)


def parse_choice(text: object, tag: str = "better", choices: tuple[str, ...] = ("A", "B")) -> Parsed:
    """Parse ``<better>X</better>`` with X one of ``choices`` (case-insensitive, trimmed).

    >>> parse_choice("<think>B shows its work</think><better> b </better>")
    Parsed(ok=True, value='B', reason='ok')
    """
    p = extract_tag(text, tag)
    if not p.ok:
        return p
    v = p.value.strip().upper()
    if v not in choices:
        return Parsed(False, None, BAD_VALUE)
    return Parsed(True, v, OK)


def normalize_number(s: object) -> Decimal | None:
    """Turn ``"$1,234.00."``, ``"-18"``, ``"18.00"`` into a Decimal; ``None`` if not a number.

    Removes ``$``, thousands commas (between groups of three digits only: ``1,8`` and ``1,0,0,0`` are no
    numbers), surrounding whitespace and one trailing period. Only plain decimal notation is accepted (no
    exponents, fractions, NaN or infinity).
    """
    if isinstance(s, bool):
        return None
    if isinstance(s, int):
        return Decimal(s)
    if isinstance(s, float):
        return Decimal(repr(s)) if s == s and abs(s) != float("inf") else None
    if not isinstance(s, str):
        return None
    t = s.strip().replace("$", "").removesuffix(".")
    if "," in t:  # a thousands separator only between groups of three: "1,234" is 1234, "1,8" is no number
        if not re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d*)?", t, re.ASCII):
            return None
        t = t.replace(",", "")
    if not re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", t, re.ASCII):
        return None
    try:
        return Decimal(t)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid literals
        return None


def numbers_equal(a: object, b: object) -> bool:
    """Numeric equality after ``normalize_number`` on both sides; False if either is not a number."""
    x, y = normalize_number(a), normalize_number(b)
    return x is not None and y is not None and x == y


def _last(pattern: re.Pattern, text: str, *span: int) -> re.Match | None:
    """The last match of ``pattern`` in ``text`` (``span``: where to search), or None."""
    m = None
    for m in pattern.finditer(text, *span):
        pass
    return m


def last_number(text: object) -> str | None:
    """The last number-looking token in ``text`` (GSM8K "flexible" extraction), or ``None``."""
    found = _last(_NUMBER, text) if isinstance(text, str) else None
    return found.group(0) if found is not None else None


def split_think(text: str) -> tuple[str, str]:
    """``(thinking, rest)``: the contents of the outermost think blocks (rule 1) and the text outside them, each
    joined by newlines; a block never closed runs to the end of the text.

    >>> split_think("a<think>b<think>c</think>d</think>e<think>f")
    ('b<think>c</think>d\\nf', 'a\\ne')
    """
    inside, outside, _closed = _think_blocks(text)
    return "\n".join(inside), "\n".join(outside)


# A quote's value: up to 64 characters to the next whitespace, "<" or comma (a comma between groups of three digits
# stays: "1,000" is one number, "A:17,B:18" quotes 17).
QUOTE_VALUE = r"((?:[^\s<,]|,(?=\d{3}(?!\d))){0,64})(?![^\s<,]|,\d{3}(?!\d))"
# Between a quote's label and its value: a colon (the value may start the next line), or "=", a table's "|", a dash
# between spaces, or "answer is"; these four only before a value with a digit near its start, so that prose such as
# "The candidate - who adds - ..." is no quote.
QUOTE_SEP = (
    r"(?:[ \t*_]{0,8}:[ \t*_]{0,8}(?:\n[ \t*_]{0,8}(?=[^\s<]{0,12}\d))?"
    r"|[ \t*_]{0,8}(?:=|\||(?<=[ \t])[-\u2013\u2014](?=[ \t])|(?<=answer)[ \t]+is)[ \t*_|]{0,8}(?=[^\s<,]{0,12}\d))"
)
# "Candidate: 17", "Candidate answer: 17", "Candidate's final answer: 17", "**Candidate:** 17"; not inside a word
_QUOTED_CANDIDATE = re.compile(
    r"(?<![\w&])candidate(?:'s)?(?:[ \t]+final)?(?:[ \t]+answer)?" + QUOTE_SEP + QUOTE_VALUE, re.IGNORECASE
)
# what may wrap a plain number: markdown, brackets, quotes, LaTeX (\boxed{}, \( \), \[ \]), sentence punctuation, a
# trailing unit
_WRAP_LEAD = re.compile(r"(?:\\boxed\{|\\[(\[]|[*_(\[{\"'`]){0,16}")
_WRAP_TAIL = re.compile(r"(?:\\[)\]]|[*_)\]}|\"'`.,;:!?%\u3002\uff0c\uff1b]){0,16}$")
_UNIT = re.compile(r"[^\W\d_]+$")
# superscript and subscript digits and signs: a power or an index (18², x₂), never more digits of the number
_POWER = re.compile("[\u00b2\u00b3\u00b9\u2070\u2074-\u207b\u2080-\u208b]+")


def _plain_number(token: str) -> Decimal | None:
    """The one plain number ``token`` (no whitespace in it) writes, read through what may wrap it (``**17**``,
    ``(17)``, ``\\boxed{17}``, ``\\(17\\)``, ``17,``, ``17kg``, ``17。``); None when what is left is no plain number
    (``17/1``, ``17^2``, ``17-20``, ``17:30``, ``seventeen``)."""
    t = _WRAP_TAIL.sub("", token[_WRAP_LEAD.match(token).end() :], count=1)
    t = _WRAP_TAIL.sub("", _UNIT.sub("", t), count=1)
    return normalize_number(t) if t else None


def last_quote(pattern: re.Pattern, judge_text: object) -> Decimal | None:
    """The number a judge's reply quotes with ``pattern`` (its group 1: the quoted value): read after
    ``normalize_text`` (a superscript or subscript is written ``^`` first, so ``17²`` is the power ``17^2``, not
    172), the LAST match in the reply's think part (its summary, after any working that names the same label), else
    the last in the rest of the reply; what wraps the value is read through (``_plain_number``). ``None`` when
    nothing matches or the value is not one plain number."""
    if not isinstance(judge_text, str):
        return None
    for part in split_think(normalize_text(_POWER.sub(r"^\g<0>", judge_text))):
        m = _last(pattern, part)
        if m is not None:
            return _plain_number(m.group(1))
    return None


def quoted_candidate(judge_text: object) -> Decimal | None:
    """The candidate's final answer as a judge's reply quotes it (the ``gsm8k_grade`` prompts ask for
    ``<think>Reference: 18. Candidate: 18. Same.</think>``): the number after the last ``Candidate:`` (or
    ``Candidate answer:``, ``Candidate =``, ``| Candidate |`` ...) of the think part, else of the rest of the reply,
    read by ``last_quote``; ``None`` when the reply quotes none or no plain number: a guard that reads ``None`` fails
    closed.

    >>> quoted_candidate("<think>Reference: 18, Candidate: (17), Same.</think><score>4</score>")
    Decimal('17')
    >>> quoted_candidate("<think>The candidate: adds. So Candidate: 18.</think><score>4</score>")
    Decimal('18')
    >>> quoted_candidate("<think>Candidate: seventeen.</think><score>4</score>") is None
    True
    """
    return last_quote(_QUOTED_CANDIDATE, judge_text)


# An answer cue, what comes before its number, the number and the rest of its token: "#### 18", "The answer is $18.",
# "Final answer: 18", "**Final answer:** 18", a line "A: 18", "\\boxed{18}", and a judge's own "Candidate: 18" written
# into an answer. Every repetition is bounded, so a match attempt costs O(1) past the cue and the scan is linear.
_ANSWER_CUE = re.compile(
    r"(?:####|answer(?:[ \t*]{0,8}:|[ \t*]{1,8}is)|^[ \t]{0,16}A:|\\boxed\{|candidate(?:'s final answer)?[ \t]{0,8}:)"
    r"([ \t*$:]{0,16})(" + _NUMBER.pattern + r")(\S{0,64})",
    re.IGNORECASE | re.MULTILINE | re.ASCII,
)
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # a decimal digit of another script: "١٨", fullwidth "１８"
FINAL_OK, FINAL_NONE, FINAL_CONFLICT = "ok", "none", "conflict"


# invisible characters: soft hyphen, Mongolian vowel separator, zero-width spaces and joiners, direction marks, line
# and paragraph separators, word joiner and invisible operators, byte-order mark
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u2028\u2029\u2060-\u2064\ufeff]")


# a minus sign that is not ASCII, right before a number: minus sign U+2212 (also what NFKC makes of the superscript
# and subscript minus), hyphen, non-breaking hyphen, figure dash, en dash (NFKC already makes the small and fullwidth
# hyphen-minus ASCII). Dropped, it read -17 as 17; an em dash is a dash and stays.
_MINUS = re.compile("[\u2010-\u2013\u2212](?=[$.(]?[0-9])")
# superscript digits and signs right after a digit: a power ("13²" is 13^2, not 132)
_AFTER_DIGIT_POWER = re.compile("(?<=\\d)[\u00b2\u00b3\u00b9\u2070\u2074-\u207b]+")


def normalize_text(text: object) -> str:
    """The one reading of a policy's answer that the rule, the judge's prompt and the guard share: a superscript after
    a digit written as a power (``13²`` -> ``13^2``, never more digits), then NFKC (fullwidth ``１８`` -> ``18``),
    invisible characters removed (``1\u200b8`` -> ``18``), every decimal digit of another script written in ASCII,
    and a minus sign that is not ASCII (``\u2212``, an en dash ``\u2013``, a hyphen or figure dash) written ``-``
    where a number follows it (``\u221217`` -> ``-17``; ``5 \u2013 3`` stays); a non-string is ``""``.

    >>> normalize_text("#### 1\u200b8"), normalize_text("１⁸"), normalize_text("#### \u221217")
    ('#### 18', '1^8', '#### -17')
    """
    if not isinstance(text, str):
        return ""
    text = _AFTER_DIGIT_POWER.sub(lambda m: "^" + unicodedata.normalize("NFKC", m[0]), text)
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return _MINUS.sub("-", _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m[0])), text))


# after a last "#### N" line: a computation (an operator between two numbers: "Check: 18 - 8 = 10") is working; a
# number after "is", "was", "be", "equals", "'s" or "=", or alone on its line, restates an answer ("It is 17")
_COMPUTATION = re.compile(r"[\d)][ \t]*(?:[+*/×÷=^]|[ \t]-[ \t]|[ \t][x×][ \t])[ \t]*[-$(]?[\d(.]")
_STATED = re.compile(
    r"(?:\b(?:is|was|be|equals?)|'s|=)[ \t*_$:]{0,16}(" + _NUMBER.pattern + r")"
    r"|^[\W_]{0,8}(" + _NUMBER.pattern + r")[\W_]{0,8}$",
    re.IGNORECASE,
)
# the final statement disowned: "that's wrong", "18 is incorrect", "it isn't right", "I don't know", "not sure"; or
# its number negated: "not 18", "isn't 18", "can't be 18"
_WHAT = r"(?:\b(?:that|this|it|which|answer|result)|\d)"
_DISOWN = re.compile(
    _WHAT + r"(?:['\u2019]s|[ \t]+(?:is|was|seems|looks|(?:must|might|may|could)[ \t]+be))[ \t]+"
    r"(?:wrong|incorrect|not[ \t]+(?:right|correct)|a[ \t]+mistake)\b"
    r"|" + _WHAT + r"[ \t]+(?:is|was)n['\u2019]?t[ \t]+(?:right|correct)\b"
    r"|\bI[ \t]+(?:do[ \t]+not|don['\u2019]?t)[ \t]+know\b|\bnot[ \t]+(?:sure|certain)\b|\bunsure\b|\bno[ \t]+idea\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(
    r"(?:\bnot|n['\u2019]t|\bnever)(?:[ \t]+(?:be|equal(?:[ \t]+to)?|exactly|really))?[ \t*_$:]{0,16}("
    + _NUMBER.pattern
    + ")",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?;](?=\s)|[\r\n]")


def _hash_value(t: str, cue: re.Match) -> Decimal | None:
    """The value of a ``####`` cue: its whole token, as the strict rule reads it (``hash_answer``), read through
    what may wrap a number (``_plain_number``: ``**18**``, ``18.``, ``18kg``); None when that token is no plain
    number (``18/5``, ``18^2``, ``18e2``, ``18-20``, ``18:30``, ``18_2``, ``$ 18``) or the line goes on to extend it
    (``_EXTENDED``: ``18 / 5``, ``18 or 20``)."""
    lead = cue.group(1).lstrip(" \t")
    extended = any(_EXTENDED.match(t, i) for i in (cue.end(2), cue.end()))  # after the number ("18** 2") or its token
    if " " in lead or "\t" in lead or t[cue.end() : cue.end() + 1].strip() or extended:
        return None
    return _plain_number(lead + cue.group(2) + cue.group(3))


def _in_expression(t: str, start: int, end: int) -> bool:
    """Whether the number at ``t[start:end]`` is part of an expression rather than a value stated alone: an operator,
    ``\\frac{..}{``, ``-(`` or ``minus`` right before it (``_EXPRESSION_BEFORE``: ``18/18``, ``minus 18``), or what
    extends a token after it (``_EXTENDED``: ``18 * 10``, ``18 squared``; ``:`` or an exponent: ``18:30``, ``18e3``)."""
    if _EXPRESSION_BEFORE.search(t, max(0, start - 16), start):
        return True
    return bool(_EXTENDED.match(t, end) or re.match(r"(?::|[eE][-+]?)[0-9]", t[end : end + 3]))


def _restated(lines: list[str], value: Decimal) -> bool:
    """Whether a line after a last ``#### value`` states another number as an answer (``_STATED``), a computation
    (``_COMPUTATION``) being working, not an answer."""
    for line in lines:
        if not _COMPUTATION.search(line):
            for m in _STATED.finditer(line):
                stated = normalize_number(m.group(1) or m.group(2))
                if stated is not None and stated != value:
                    return True
    return False


def _disowned(t: str, start: int, value: Decimal) -> bool:
    """Whether the final statement (from the sentence or line holding ``start`` to the end) disowns ``value``."""
    sentence = _last(_SENTENCE_END, t, 0, start)
    final = t[sentence.end() if sentence else 0 :]
    if _DISOWN.search(final):
        return True
    return any(normalize_number(m.group(1)) == value for m in _NEGATED.finditer(final))


def final_answer(text: object) -> tuple[Decimal | None, str]:
    """The one final answer ``text`` states, as the strict and the flexible rules read it: ``(value, "ok")``;
    ``(None, "none")`` when it states no number it stands by; ``(None, "conflict")`` when it states different final
    answers. Every number after an answer cue (``####``, ``answer is``, ``answer:``, a line starting ``A:``,
    ``\\boxed{``, ``Candidate:``) and the last number must be one value; a ``####`` states its whole token
    (``hash_answer``); the final statement must not disown its answer. The full reading, with examples:
    reward_fns/README_llm_judge.md, "Ungrounded". Total and linear-time.

    >>> final_answer("She has 5 + 3 = 8 apples.\\n#### 8")
    (Decimal('8'), 'ok')
    >>> final_answer("The answer is 5. The answer is 18."), final_answer("#### 18/5"), final_answer("It is not 8.")
    ((None, 'conflict'), (None, 'none'), (None, 'none'))
    """
    if not isinstance(text, str):
        return None, FINAL_NONE
    t = normalize_text(text)
    cues = list(_ANSWER_CUE.finditer(t))
    cued = []
    for i, m in enumerate(cues):
        if m.group(0).startswith("####"):
            value = _hash_value(t, m)
            if value is None:  # a #### token that is no plain number states no answer
                return None, FINAL_NONE
        elif _in_expression(t, *m.span(2)):  # the last cue's expression states no answer ("The answer is 18/18");
            if i == len(cues) - 1:  # an earlier one's is working ("Check the answer: 18 x 2 = 36")
                return None, FINAL_NONE
            continue
        else:
            value = normalize_number(m.group(2))
        cued += [value] if value is not None else []
    hash_last = bool(cues) and cues[-1].group(0).startswith("####")
    last = None if hash_last else _last(_NUMBER, t)  # the flexible rule's reading, unless the strict rule's is last
    if last and _in_expression(t, last.start(), last.end()):
        return None, FINAL_NONE
    flexible = normalize_number(last.group(0)) if last else None
    values = set(cued) | ({flexible} if flexible is not None else set())
    if not values:
        return None, FINAL_NONE
    if len(values) > 1:
        return None, FINAL_CONFLICT
    value = values.pop()
    if hash_last and _restated(t[cues[-1].end() :].splitlines()[1:], value):
        return None, FINAL_CONFLICT
    if not cued:
        body = t.rstrip()
        line = body[max(body.rfind("\n"), body.rfind("\r")) + 1 :]
        found = [m for m in _NUMBER.finditer(line) if line[m.end() : m.end() + 1] != ","]  # "by 2, we": working
        on_line = {normalize_number(m.group(0)) for m in found} - {None}
        if len(on_line) > 1 and not re.search(r"=[ \t$]*$", line[: found[-1].start()]):
            return None, FINAL_CONFLICT
    if _disowned(t, (cues[-1] if hash_last else last).start(), value):
        return None, FINAL_NONE
    return value, FINAL_OK


def hash_answer(text: object) -> str | None:
    """The token right after the last ``####`` on its line (GSM8K "strict"), or ``None``; ``None`` too when the line
    goes on to make the token part of an expression, a range or a hedge (``#### 18 / 5``, ``#### 18 or 20``).

    The token is returned raw (``"$1,234."``); ``normalize_number`` decides whether it is a number.
    """
    if not isinstance(text, str) or "####" not in text:
        return None
    m = _HASH_ANSWER.match(text, text.rfind("####"))
    return (m.group(1) or None) if m and not _EXTENDED.match(text, m.end()) else None


def reference_answer(reference: object, ground_truth: object = None) -> str | None:
    """The reference's final answer as a judge prompt shows it, or ``None``.

    The ``####`` answer of a GSM8K reference solution, else a numeric ``ground_truth``; ``$`` and a
    trailing period are dropped (``"$1,234."`` -> ``"1,234"``). Data prep's warm-start rationale
    (``data_prep.judge_sft``) writes the same string, so what the judge is shown is what it learns to copy.
    """
    for token in (hash_answer(reference), ground_truth):
        if normalize_number(token) is not None:
            return shown(token)
    return None


def shown(token: object) -> str:
    """A final answer as a judge prompt or a rationale writes it: ``none`` when missing, without ``$`` or a trailing
    period.

    >>> shown("$72."), shown(None)
    ('72', 'none')
    """
    if token is None:
        return "none"
    return str(token).replace("$", "").strip().removesuffix(".")
