"""Judge data, pairwise: (query, chosen, rejected) -> A/B-balanced verl parquet for the pairwise recipe.

Input schemas (``--format auto`` picks one from the first row's keys): ``openjudge`` (OpenJudge's pairwise parquet:
``input`` chat messages, two ``output`` answers with ``label.preference``; ties skipped and counted), ``hh-rlhf``
(``chosen``/``rejected`` transcripts sharing the conversation before the last Assistant turn) and ``generic`` (JSONL
``query``, ``chosen``, ``rejected``).

``--orders 2`` (default) writes every pair in both orders (adjacent rows sharing ``extra_info.pair_id``): labels
exactly 50% A; ``--orders 1`` one order per pair, chosen by ``--seed`` so A and B differ by at most one. Both orders
pass the length gate together, so the balance holds after filtering too.

    python -m data_prep.pairwise --out data/hh_harmless --hf hh-rlhf-harmless --on-bad-row skip
    python -m data_prep.pairwise --out data/pairs --train pairs.jsonl --orders 1 --seed 3
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import pyarrow as pa

from data_prep.cli import (
    Conversion,
    HFPreset,
    Options,
    SplitRun,
    add_common_args,
    all_drafts,
    cli,
    new_parser,
    run_conversion,
)
from data_prep.conversations import hh_pair, openjudge_output
from data_prep.files.errors import BadRow, SkipRow
from data_prep.rows import JUDGE_ABILITY, Draft, Unit, row_schema
from data_prep.text import neutralize, require_str, stable_hash
from reward_fns.parse import reference_answer

PROG = "data_prep.pairwise"
TEMPLATE = "pairwise"
DEFAULT_MAX_LEN = 2048
FORMATS = ("openjudge", "hh-rlhf", "generic")
#: how ``--format auto`` tells them apart, tried in this order
SIGNATURES = {
    "openjudge": {"input", "output"},
    "generic": {"chosen", "rejected", "query"},
    "hh-rlhf": {"chosen", "rejected"},
}
PRESETS = {
    "openjudge": HFPreset(
        path="agentscope-ai/OpenJudge",
        data_files=(
            ("train", "train_rm/grpo/pairwise/*train*.parquet"),
            ("test", "train_rm/grpo/pairwise/*val*.parquet"),
        ),
        help="agentscope-ai/OpenJudge train_rm/grpo/pairwise",
        format="openjudge",
    ),
    "hh-rlhf-harmless": HFPreset(
        path="Anthropic/hh-rlhf", data_dir="harmless-base", help="Anthropic/hh-rlhf harmless-base", format="hh-rlhf"
    ),
    "hh-rlhf-helpful": HFPreset(
        path="Anthropic/hh-rlhf", data_dir="helpful-base", help="Anthropic/hh-rlhf helpful-base", format="hh-rlhf"
    ),
}
TEXT_FIELDS = ("query", "chosen", "rejected")
PAIR_EXTRA = ["query", "response_a", "response_b", "a_is", "pair_id", "origin"]


def _preference(label: object, i: int) -> str | None:
    if isinstance(label, Mapping):
        label = label.get("preference")
    if label is None:
        return None
    if not isinstance(label, str):
        raise BadRow(
            f"output[{i}].answer.label.preference", f"expected 'A', 'B' or 'tie', got {label!r}", reason="bad_label"
        )
    return label.strip().upper()


def pair_from_row(row: Mapping, fmt: str) -> tuple[str, str, str]:
    """(query, chosen, rejected) of one input row in format ``fmt``."""
    if fmt == "generic":
        return require_str(row, "query"), *(require_str(row, k, allow_empty=True) for k in ("chosen", "rejected"))
    if fmt == "hh-rlhf":
        return hh_pair(require_str(row, "chosen"), require_str(row, "rejected"))
    if fmt == "openjudge":
        query, answers = openjudge_output(row, pair=True)
        given = [(i, p) for i, (_, label) in enumerate(answers) if (p := _preference(label, i)) is not None]
        if not given:
            raise BadRow("output[0].answer.label.preference", "missing", reason="missing")
        if len({p for _, p in given}) > 1:
            raise BadRow(
                f"output[{given[1][0]}].answer.label.preference",
                f"disagrees with output[{given[0][0]}]",
                reason="bad_label",
            )
        pref = given[0][1]
        if pref in ("TIE", "SAME", "EQUAL", "NONE"):
            raise SkipRow("tie")
        if pref not in ("A", "B"):
            raise BadRow(
                f"output[{given[0][0]}].answer.label.preference",
                f"expected 'A', 'B' or 'tie', got {pref!r}",
                reason="bad_label",
            )
        (a, _), (b, _) = answers
        return (query, a, b) if pref == "A" else (query, b, a)
    raise ValueError(fmt)


def pair_unit(n: int, query: str, chosen: str, rejected: str, origin: str, **meta) -> Unit:
    """A pair unit; content filters (empty / identical responses) raise SkipRow.

    Its key does not depend on which response is chosen, and its label is the chosen response, so the
    same pair given twice with opposite preferences is a conflict (both dropped), not two pairs.
    """
    if not chosen.strip() or not rejected.strip():
        raise SkipRow("empty_response")
    if chosen.strip() == rejected.strip():
        raise SkipRow("identical_responses")
    fields = {"query": query, "chosen": chosen, "rejected": rejected}
    meta = {"origin": origin, "pair_id": stable_hash(query, chosen, rejected), **meta}
    return Unit(n, fields, meta, key=stable_hash(query, *sorted((chosen, rejected))), query=query, label=chosen)


def pair_builder(template, extra: tuple[str, ...] = ()):
    """Builder of both orders of a pair: [chosen in A (label A), rejected in A (label B)].

    ``extra`` names ``unit.meta`` entries copied into ``extra_info`` (before ``prompt_version``).
    """

    def build(u: Unit, fields: dict) -> list[Draft]:
        q, c, r = fields["query"], fields["chosen"], fields["rejected"]
        out = []
        for a_is, (ra, rb), gt in (("chosen", (c, r), "A"), ("rejected", (r, c), "B")):
            ei = {"query": q, "response_a": ra, "response_b": rb, "a_is": a_is}
            ei |= {k: u.meta[k] for k in ("pair_id", "origin", *extra)}
            ei |= {"prompt_version": template.id, "source_row": u.row}
            values = {"query": neutralize(q), "response_a": neutralize(ra), "response_b": neutralize(rb)}
            if "reference" in template.fields():  # reference-guided templates (pairwise_ref): the reference solution
                values["reference"] = neutralize(u.meta["answer"])
            if "reference_answer" in template.fields():  # pairwise_ref.v2: and its final answer
                values["reference_answer"] = reference_answer(u.meta["answer"]) or "unknown"
            out.append(Draft(messages=template.render(**values), ground_truth=gt, extra_info=ei))
        return out

    return build


def order_selector(orders: int, seed: int) -> Callable[[SplitRun, list], list]:
    """``Conversion.select`` for pairs: ``[(draft, truncated)]`` of both orders (``orders`` 2), or of one order per
    pair with A/B counts differing by <= 1 (seeded per split); the pairs written are counted (``pairs_written``)."""

    def select(run: SplitRun, accepted: list) -> list:
        run.stats.extra["pairs_written"] = len(accepted)
        if orders == 2:
            return all_drafts(run, accepted)
        rng = random.Random(f"{seed}:{run.split}:orders")
        n = len(accepted)
        labels = ["A"] * (n // 2) + ["B"] * (n // 2)
        if n % 2:
            labels.append(rng.choice("AB"))
        rng.shuffle(labels)
        return [
            (next(d for d in ds if d.ground_truth == want), names) for (_u, ds, names), want in zip(accepted, labels)
        ]

    return select


@dataclass(frozen=True, kw_only=True)
class PairOptions(Options):
    orders: int  # --orders


def build_parser():
    p = new_parser(PROG, __doc__)
    add_common_args(p, default_max_len=DEFAULT_MAX_LEN, text_fields=TEXT_FIELDS, presets=PRESETS, formats=FORMATS)
    orders_help = "2 (default): both orders of every pair; 1: one seeded order per pair, A/B balanced"
    p.add_argument("--orders", type=int, choices=(1, 2), default=2, help=orders_help)
    return p


def run(argv: list[str] | None = None) -> dict:
    options = PairOptions.parse(build_parser(), argv, PRESETS)
    template = options.template(TEMPLATE)

    def to_units(run: SplitRun, row: Mapping, n: int) -> list[Unit]:
        q, c, r = pair_from_row(row, run.detect(row, SIGNATURES))
        return [pair_unit(n, q, c, r, run.fmt)]

    conv = Conversion(
        prog=PROG,
        schema=row_schema(pa.string(), PAIR_EXTRA),
        ability=JUDGE_ABILITY,
        to_units=to_units,
        build=pair_builder(template),
        select=order_selector(options.orders, options.seed),
        data_source=lambda run: options.data_source or f"pairwise/{run.fmt or 'empty'}",
    )
    return run_conversion(conv, options)


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
