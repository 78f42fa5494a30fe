"""The arithmetic of pairwise rewards, pure (no judge, no I/O): the comparisons of a GRPO group's answers
(``comparisons``: ``circular`` or ``all_pairs``) and, from the judge's verdicts on them, each answer's win rate and the
group's flip, split and cycle rates (``win_rates``). ``reward_fns.pairwise_judge`` asks the judge and pays what this
counts, in its ``pairwise_ref`` mode too (the answer and the reference solution are a group of two). How a comparison
counts: a verdict for one answer is a win for it and a loss for the other; two answers that both state the shown
reference's final answer tie (a win for both, whatever the letter); a verdict the guard voided is a loss for the
answer picked and no loss for the other; no verdict is a loss for both (so an answer that breaks the judge's reply
costs its mate too); a transport failure counts for neither; an answer for which no comparison counts has no win
rate (the caller's fallback). Flips and splits count only between answers whose final answers differ
(``parse.final_answer``). No command of its own:

    >>> cycle = {(0, 1): "A", (1, 0): "B", (1, 2): "A", (2, 1): "B", (2, 0): "A", (0, 2): "B"}
    >>> t = win_rates(["#### 1", "#### 2", "#### 3"], cycle, "circular")
    >>> t["win_rate"], t["flip_rate"], t["cycle_rate"]
    ([0.5, 0.5, 0.5], 0.0, 1.0)
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal

from reward_fns.parse import FINAL_OK, final_answer

SCHEMES = ("circular", "all_pairs")
FAILED, REFUSED = "failed", "refused"  # a comparison's outcome besides "A", "B" and None (no verdict in the reply)


def comparisons(n: int, scheme: str = "circular") -> list[tuple[int, int]]:
    """The ordered comparisons ``(a, b)`` (answer ``a`` shown as A, ``b`` as B) of a group of ``n`` answers.

    >>> comparisons(3, "circular"), len(comparisons(4, "circular")), len(comparisons(4, "all_pairs"))
    ([(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)], 8, 12)
    """
    if scheme == "all_pairs":
        return [(a, b) for a in range(n) for b in range(n) if a != b]
    if scheme != "circular":
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    out: dict[tuple[int, int], None] = {}
    for a in range(n):
        b = (a + 1) % n
        if a != b:
            out.update({(a, b): None, (b, a): None})
    return list(out)


def win_rates(
    texts: Sequence[object],
    verdicts: Mapping[tuple[int, int], str | None],
    scheme: str = "circular",
    decided: Mapping[tuple[int, int], str] | None = None,
    voided: Collection[tuple[int, int]] = (),
    ties: Collection[tuple[int, int]] = (),
    finals: Sequence[Decimal | None] | None = None,
) -> dict:
    """Win rates of one group's answers (``texts``; ``finals``: their final answers where the caller knows them
    better) from the verdicts of every comparison of ``scheme``, counted as the module docstring says.

    ``verdicts[(a, b)]``: the judge's ``"A"``/``"B"``, ``None``/``REFUSED`` or ``FAILED`` with ``a`` as A;
    ``decided[(a, b)]``: comparisons settled without the judge (every comparison is in exactly one of the two);
    ``ties`` / ``voided``: judged comparisons that tie / the guard voided. Per answer (lists): ``win_rate`` (None when
    no comparison counts), ``wins``, ``played``, ``calls`` (judge comparisons with it as A), ``flip``, ``tie``,
    ``parse_fail``, ``guarded``, ``error``, ``failed``. Group: ``flip_rate``, ``tie_rate``, ``cycle_rate``
    (intransitive triples among those whose three majorities are decided)."""
    n, decided, voided, ties = len(texts), dict(decided or {}), set(voided), set(ties)
    plan = comparisons(n, scheme)
    outcomes = _checked(plan, verdicts, decided, voided, ties, f"{scheme} over {n} answers")
    finals = list(finals) if finals is not None else [final_of(t) for t in texts]
    wins, played, calls, asked = [0] * n, [0] * n, [0] * n, [0] * n
    no_verdict, guarded, error = [0] * n, [0] * n, [0.0] * n
    for (a, b), v in outcomes.items():
        judged = (a, b) in verdicts
        calls[a] += judged
        for i in (a, b):
            asked[i] += judged
            no_verdict[i] += v is None
            guarded[i] += (a, b) in voided
            error[i] = max(error[i], float(v in (FAILED, REFUSED)))
        if v == FAILED:
            continue
        picked = {"A": a, "B": b}.get(v)
        if (a, b) in ties:
            wins[a], wins[b], played[a], played[b] = wins[a] + 1, wins[b] + 1, played[a] + 1, played[b] + 1
        elif (a, b) in voided:
            played[picked] += 1
        else:
            played[a], played[b] = played[a] + 1, played[b] + 1
            if picked is not None:
                wins[picked] += 1
    pairs = _pairs(n, outcomes, set(verdicts), voided, ties, finals)
    share = lambda k, d: k / d if d else 0.0  # noqa: E731
    return {
        "comparisons": plan,
        "win_rate": [share(wins[i], played[i]) if played[i] else None for i in range(n)],
        "wins": wins,
        "played": played,
        "calls": calls,
        "flip": [share(pairs["flips"][i], pairs["parsed"][i]) for i in range(n)],
        "tie": [share(pairs["splits"][i], pairs["pairs"][i]) for i in range(n)],
        "parse_fail": [share(no_verdict[i], asked[i]) for i in range(n)],
        "guarded": [share(guarded[i], asked[i]) for i in range(n)],
        "error": error,
        "failed": [
            any(i in p for p in outcomes) and all(v == FAILED for p, v in outcomes.items() if i in p) for i in range(n)
        ],
        "flip_rate": share(sum(pairs["flips"]), sum(pairs["parsed"])),
        "tie_rate": share(sum(pairs["splits"]), sum(pairs["pairs"])),
        "cycle_rate": share(pairs["cycles"], pairs["triples"]),
        "triples_decided": pairs["triples"],
        "cycles": pairs["cycles"],
    }


def _checked(plan: list, verdicts: Mapping, decided: dict, voided: set, ties: set, what: str) -> dict:
    """Every comparison's outcome (``decided`` and ``verdicts`` together); ValueError for a plan not covered once,
    an unknown verdict, or voided / tied comparisons that were not judged with a letter."""
    if set(verdicts) & set(decided) or set(verdicts) | set(decided) != set(plan):
        raise ValueError(f"verdicts and decided must hold each comparison of {what} once: {plan}")
    outcomes = {**decided, **verdicts}
    bad = set(outcomes.values()) - {"A", "B", None, FAILED, REFUSED} | set(decided.values()) - {"A", "B"}
    if bad:
        raise ValueError(f"unknown verdicts {sorted(map(str, bad))} (A, B, None, {REFUSED!r}, {FAILED!r})")
    if any(verdicts.get(p) not in ("A", "B") for p in voided | ties) or voided & ties:
        raise ValueError(f"voided and ties must name judged comparisons with a verdict A or B, each once: {plan}")
    return outcomes


def _pairs(n: int, outcomes: Mapping, judged: set, voided: set, ties: set, finals: Sequence) -> dict:
    """Per answer, over its pairs (both orders, neither failed) whose final answers differ: ``pairs``, ``splits``
    (won exactly one order), ``parsed`` (both orders with a letter), ``flips`` (the same letter both ways); and the
    group's ``triples`` (three pairwise majorities decided) and ``cycles`` (intransitive ones)."""
    stands = {p: v for p, v in outcomes.items() if p not in voided | ties and v in ("A", "B")}  # one winner each
    out = {k: [0] * n for k in ("pairs", "splits", "parsed", "flips")}
    pair_wins: dict[tuple[int, int], tuple[int, int]] = {}
    for x, y in itertools.combinations(range(n), 2):
        if (x, y) not in outcomes or FAILED in (outcomes[(x, y)], outcomes[(y, x)]):
            continue
        first, second = outcomes[(x, y)], outcomes[(y, x)]
        tied = ((x, y) in ties) + ((y, x) in ties)  # a tie is a win for both
        wx = tied + (stands.get((x, y)) == "A") + (stands.get((y, x)) == "B")
        wy = tied + (stands.get((x, y)) == "B") + (stands.get((y, x)) == "A")
        pair_wins[(x, y)] = (wx, wy)
        if {(x, y), (y, x)} <= judged and finals[x] != finals[y]:
            both = first in ("A", "B") and second in ("A", "B")
            for i, w in ((x, wx), (y, wy)):
                out["pairs"][i] += 1
                out["splits"][i] += w == 1
                out["parsed"][i] += both
                out["flips"][i] += both and first == second
    beats = {(x, y) if wx > wy else (y, x) for (x, y), (wx, wy) in pair_wins.items() if wx != wy}
    out["triples"] = out["cycles"] = 0
    for x, y, z in itertools.combinations(range(n), 3):
        edges = [(p, q) for p, q in itertools.permutations((x, y, z), 2) if (p, q) in beats]
        if len(edges) == 3:
            out["triples"] += 1
            out["cycles"] += sorted(p for p, _ in edges) == [x, y, z]  # each beats exactly one: a cycle
    return out


def final_of(text: object) -> Decimal | None:
    """An answer's one final answer (``parse.final_answer``), None when it states none or several."""
    value, status = final_answer(text)
    return value if status == FINAL_OK else None
