"""Deterministic wrong GSM8K solutions: change one arithmetic step and carry the change to the end.

``perturb`` picks one ``<<expr=result>>result`` step (seeded), gives it a nearby wrong result, replaces every later
number equal to a changed value and re-evaluates later expressions exactly, down to ``#### N``. A result is kept only
if its final answer differs from the reference's (the rule gives 0 with ``format_ok`` 1); otherwise other steps and
deltas are tried, and last the final calculation (or the ``####`` line).
"""

from __future__ import annotations

import ast
import operator
import random
import re
from fractions import Fraction

from reward_fns.gsm8k import compute_score
from reward_fns.parse import hash_answer, last_number, numbers_equal

ANNOTATION = re.compile(r"<<([^<>]*)=([^<>=]*)>>")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?|(?<![\w.\d])\.\d+")
_SIGNED = re.compile(r"-?(?:" + _NUMBER.pattern + ")")  # a final answer keeps its sign: "#### -5" is -5
_DELTAS = (1, 2, 3, 4, 5, 10)
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def strip_annotations(text: str) -> str:
    """Remove GSM8K calculator annotations ``<<...>>`` (model solutions never contain them)."""
    return ANNOTATION.sub("", text)


def to_fraction(token: str) -> Fraction | None:
    t = token.replace(",", "").replace("$", "").strip().removesuffix(".")
    if not re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", t):
        return None
    return Fraction(t)


def fmt_number(x: Fraction) -> str:
    """Integers as integers, else a decimal with at most 2 places (trailing zeros removed)."""
    if x.denominator == 1:
        return str(x.numerator)
    s = f"{float(x):.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def safe_eval(expr: str) -> Fraction | None:
    """Exact value of a GSM8K calculator expression, or None if it is not plain arithmetic."""
    e = expr.replace(",", "").replace("$", "").replace("x", "*").replace("×", "*").replace("÷", "/").strip()
    if not e or len(e) > 200:
        return None
    try:
        tree = ast.parse(e, mode="eval")
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow):
                if b.denominator != 1 or abs(b) > 8:
                    raise ValueError("exponent")
                return a ** int(b)
            op = _OPS.get(type(node.op))
            if op is None:
                raise ValueError("operator")
            return Fraction(op(a, b))
        raise ValueError("node")

    try:
        return ev(tree.body)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def fmt_like(token: str, x: Fraction) -> str:
    """``fmt_number(x)``, with thousands commas when ``token`` (the number it replaces) had them."""
    s = fmt_number(x)
    if "," not in token:
        return s
    sign, body = ("-", s[1:]) if s.startswith("-") else ("", s)
    whole, dot, frac = body.partition(".")
    return f"{sign}{int(whole):,}{dot}{frac}"


def _subst(text: str, mapping: dict[Fraction, Fraction]) -> str:
    if not mapping:
        return text

    def repl(m: re.Match) -> str:
        v = to_fraction(m.group(0))
        return fmt_like(m.group(0), mapping[v]) if v is not None and v in mapping else m.group(0)

    return _NUMBER.sub(repl, text)


def _apply(answer: str, step: int, new: Fraction) -> str:
    """The solution with step ``step``'s result set to ``new`` and the change carried forward."""
    out, mapping, pos = [], {}, 0
    for i, m in enumerate(ANNOTATION.finditer(answer)):
        out.append(_subst(answer[pos : m.start()], mapping))
        expr, res = m.group(1), m.group(2)
        if i == step:
            old = to_fraction(res)
            mapping[old] = new
            out.append(f"<<{expr}={fmt_number(new)}>>")
        elif i > step:
            expr2 = _subst(expr, mapping)
            old = to_fraction(res)
            val = safe_eval(expr2) if expr2 != expr else None
            if val is not None and old is not None and val != old:
                mapping.setdefault(old, val)
                out.append(f"<<{expr2}={fmt_number(val)}>>")
            else:
                out.append(f"<<{expr2}={res}>>")
        else:
            out.append(m.group(0))
        pos = m.end()
    out.append(_subst(answer[pos:], mapping))
    return "".join(out)


def _is_wrong(candidate: str, reference: str) -> bool:
    s = compute_score(solution_str=strip_annotations(candidate), ground_truth=reference)
    return s["format_ok"] == 1.0 and s["acc"] == 0.0


def _delta_values(old: Fraction, rng: random.Random) -> list[Fraction]:
    """Nearby wrong values, scaled to the magnitude of ``old`` (24 -> 25..34, 120000 -> 130000...)."""
    scale = 10 ** max(0, len(str(abs(int(old)))) - 2)
    deltas = [d * scale for d in _DELTAS]
    rng.shuffle(deltas)
    out = []
    for d in deltas:
        sign = rng.choice((1, -1))
        out += [old + s * d for s in (sign, -sign) if not old >= 0 > old + s * d]  # never below 0 from >= 0
    return out


def perturb(answer: str, seed: str | int) -> tuple[str, str] | None:
    """(wrong solution, how) for a GSM8K reference ``answer``, or None if no change alters the answer.

    ``how`` is ``"step"`` (a calculation changed and carried), ``"final_step"`` (the last
    calculation changed) or ``"final_line"`` (only the ``####`` number changed: no usable step).
    Deterministic in ``(answer, seed)``.
    """
    rng = random.Random(f"perturb:{seed}")
    steps = [i for i, m in enumerate(ANNOTATION.finditer(answer)) if to_fraction(m.group(2)) is not None]
    order = steps[:-1]
    rng.shuffle(order)
    results = [to_fraction(m.group(2)) for m in ANNOTATION.finditer(answer)]
    for kind, candidates in (("step", order), ("final_step", steps[-1:])):
        for i in candidates:
            for new in _delta_values(results[i], rng)[:3]:
                cand = _apply(answer, i, new)
                if _is_wrong(cand, answer):
                    return cand, kind
    # no usable calculation: change the number after '####' (and the same number just before it)
    m = _final_number(answer)
    if m is None:
        return None
    idx = answer.rfind("####")
    old = to_fraction(m.group(0))
    for new in _delta_values(old, rng):
        body = _subst_last(answer[:idx], old, new)
        cand = body + answer[idx : m.start()] + fmt_like(m.group(0), new) + answer[m.end() :]
        if _is_wrong(cand, answer):
            return cand, "final_line"
    return None


def _final_number(solution: str) -> re.Match | None:
    """The first number after the last ``####`` of ``solution`` (GSM8K's final answer) with its sign, or None."""
    idx = solution.rfind("####")
    return None if idx < 0 else _SIGNED.search(solution, idx)


def _subst_last(text: str, old: Fraction, new: Fraction) -> str:
    """Replace the last occurrence of the number ``old`` in ``text`` (the stated result) by ``new``."""
    last = next((m for m in reversed(list(_NUMBER.finditer(text))) if to_fraction(m.group(0)) == old), None)
    if last is None:
        return text
    return text[: last.start()] + fmt_like(last.group(0), new) + text[last.end() :]


# ------------------------------------------------------------------------------------ final-answer styles
#: How a solution may state its final answer. Training candidates are restyled so that a judge learns
#: to find the final answer in any of these, not only after ``####`` (model-written solutions rarely
#: use GSM8K's ``#### N`` line). ``{n}`` is the number as written; ``answer_only`` drops the reasoning.
FINAL_STYLES = (
    ("hash", "#### {n}"),
    ("the_answer_is", "The answer is {n}."),
    ("a_colon", "A: {n}"),
    ("answer_colon", "Answer: {n}"),
    ("boxed", "So the final answer is \\boxed{{{n}}}."),
    ("bold", "**Final answer:** {n}"),
    ("therefore", "Therefore, the answer is {n}."),
    ("bare", "{n}"),
    ("answer_only", "The answer is {n}."),
)
_HASH_LINE = re.compile(r"\n?[ \t]*####[^\n]*$")


def number_variant(token: str, rng: random.Random) -> str:
    """The same value written another way (``1234`` -> ``1,234``, ``18`` -> ``$18`` or ``18.00``), or as is."""
    x = to_fraction(token)
    if x is None:
        return token
    r = rng.random()
    plain = fmt_number(x)
    if r < 0.6:
        return plain
    if r < 0.75 and abs(x) >= 1000:
        return fmt_like("1,000", x)
    if r < 0.85:
        return "$" + plain if x >= 0 else plain
    if x.denominator == 1 and r < 0.95:
        return f"{plain}.00"
    return plain


def restyle(solution: str, style: str, rng: random.Random) -> str:
    """``solution`` (a GSM8K-style text ending ``#### N``) with its final answer stated in ``style``.

    The reasoning is kept (``answer_only``: dropped); the final number keeps its value but may be
    written differently (``number_variant``). A solution without a ``####`` line is returned as is.
    """
    templates = dict(FINAL_STYLES)
    if style not in templates:
        raise ValueError(f"unknown final-answer style {style!r}; known: {[s for s, _ in FINAL_STYLES]}")
    m = _final_number(solution)
    if m is None:
        return solution
    final = templates[style].format(n=number_variant(m.group(0), rng))
    if style == "answer_only":
        return final
    body = _HASH_LINE.sub("", solution.rstrip()).rstrip()
    return f"{body}\n{final}" if body else final


def pick_style(seed: str) -> str:
    """A seeded final-answer style (``hash`` about one time in four, the others evenly)."""
    rng = random.Random(f"style:{seed}")
    if rng.random() < 0.25:
        return "hash"
    return rng.choice([s for s, _ in FINAL_STYLES if s != "hash"])


def truncate(solution: str, reference: str, rng: random.Random) -> str | None:
    """``solution`` cut off before it states a final answer, as a model reply stopped by its length
    limit reads (half of the time ending in a repeated sentence, the loop small models fall into).

    The cut lies in the reasoning before the last calculation, so no final answer was reached; None
    when the solution is too short to cut or when the text left still ends on the reference's answer.
    """
    body = _HASH_LINE.sub("", solution.rstrip()).rstrip()
    lines = [ln for ln in body.split("\n") if ln.strip()]
    if len(lines) < 2:
        return None
    head = "\n".join(lines[:-1])
    if len(head) < 20:
        return None
    cut = head.rfind(" ", 0, int(len(head) * rng.uniform(0.4, 1.0)))
    text = head[:cut] if cut > 10 else head
    if rng.random() < 0.5:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.strip()]
        if sentences:
            text = text + ("\n" + sentences[-1].strip()) * rng.randint(3, 8)
    return None if numbers_equal(last_number(text), hash_answer(reference)) else text
