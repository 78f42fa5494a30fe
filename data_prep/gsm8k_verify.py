"""GSM8K verification data: judge rows with verifiable labels (correct vs incorrect solutions).

A judge trained on these rows is the one later reused as the GSM8K reward (``reward_fns.llm_judge``),
so the pointwise rows use exactly the prompt that reward sends (``gsm8k_grade`` template, question
and reference solution shown, candidate defused) -- built by ``reward_fns.llm_judge.build_messages``
itself when that module is importable.

Candidates (``--candidates``):

* ``perturb`` (default, no model needed): input = GSM8K rows (``question``, ``answer``; local JSONL
  or hub ``openai/gsm8k`` main). The reference solution is the correct candidate; a perturbed copy
  (one arithmetic step changed and carried to a different final answer, seeded, see
  ``data_prep.perturb``) is the incorrect one. Calculator annotations ``<<...>>`` are removed from
  both candidates (``--keep-annotations`` keeps them), so the correct candidate is not a verbatim
  copy of the reference shown to the judge.
* ``solutions``: input = JSONL of model solutions, one per line: ``question``, ``response``,
  optional ``correct`` (bool/0/1; graded with ``reward_fns.gsm8k.compute_score`` in ``--grade`` mode
  when absent: ``strict`` = ``#### N``, ``flexible`` = the last number, i.e. the final answer stated
  in any way, as the judge prompts grade it),
  optional ``answer`` (reference solution ``... #### N``; else looked up by question text in
  ``--references`` GSM8K files). Identical solutions of one question are counted as duplicates.
  ``python -m scripts.eval.gsm8k``'s ``samples.jsonl`` (a model's own answers) is such a file.

Outputs (``--out DIR``): ``pointwise_<split>.parquet`` (every candidate; ground truth 4 = correct,
0 = incorrect) and ``pairwise_<split>.parquet`` (per question up to ``--pairs-per-question``
correct-vs-incorrect pairs, both orders, ``pairwise`` template with the question as the query).

    python -m data_prep.gsm8k_verify --out data/gsm8k_verify --train train.jsonl --test test.jsonl
    python -m data_prep.gsm8k_verify --out data/gsm8k_verify --candidates solutions \\
        --train samples.jsonl --references gsm8k/train.jsonl
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Mapping

import pyarrow as pa

from data_prep.cli import add_common_args, cli, finish, make_gate, resolve_sources
from data_prep.files.errors import BadRow, DataError, SkipRow
from data_prep.files.outputs import write_parquet
from data_prep.files.readers import InvalidRow, local_source
from data_prep.gsm8k import PRESETS, gsm8k_fields
from data_prep.lengths import LengthGate
from data_prep.pairwise import PAIR_EXTRA, pair_builder, pair_unit, select_orders
from data_prep.perturb import perturb, pick_style, restyle, strip_annotations, truncate
from data_prep.rows import JUDGE_ABILITY, Draft, Unit, load_exclusion, make_rows, read_units, row_schema
from data_prep.summary import Stats
from data_prep.text import normalize_text, require_str, stable_hash
from reward_fns.gsm8k import compute_score
from reward_fns.llm_judge import build_messages
from reward_fns.parse import hash_answer, normalize_number
from reward_fns.prompts import load

PROG = "data_prep.gsm8k_verify"
DEFAULT_MAX_LEN = 2048
TEXT_FIELDS = ("question", "reference", "response")
DEFAULT_GRADE_PROMPT = "gsm8k_grade.v3"
DEFAULT_PAIR_PROMPT = "pairwise_ref.v3"
POINT_EXTRA = [
    ("question", pa.string()),
    ("answer", pa.string()),
    ("response", pa.string()),
    ("correct", pa.bool_()),
    ("candidate", pa.string()),
    ("question_id", pa.string()),
    ("prompt_version", pa.string()),
    ("source_row", pa.int64()),
    ("truncated", pa.string()),
]
_PAIR_META = ("answer", "candidates", "question_id")
PAIR_SCHEMA_EXTRA = PAIR_EXTRA[:6] + [(k, pa.string()) for k in _PAIR_META] + PAIR_EXTRA[6:]
CORRECT, INCORRECT = 4, 0


def template_id(value: str) -> tuple[str, str]:
    """``"gsm8k_grade.v3"`` -> ``("gsm8k_grade", "v3")``; the template must exist."""
    name, dot, version = value.rpartition(".")
    if not dot or not name or not version:
        raise DataError(f"a prompt is NAME.VERSION (e.g. {DEFAULT_GRADE_PROMPT}), got {value!r}")
    try:
        load(name, version)
    except FileNotFoundError as e:
        raise DataError(str(e)) from None
    return name, version


def grade_messages(question: str, reference: str, response: str, version: str, name: str = "gsm8k_grade") -> list[dict]:
    """The LLM-judge reward's own prompt for (question, reference, candidate)."""
    return build_messages(
        response, None, {"question": question, "answer": reference}, prompt=name, prompt_version=version
    )


def _correct_flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise BadRow("correct", f"expected a boolean or 0/1, got {value!r}", reason="bad_value")


class References:
    """GSM8K reference solutions by question text (exact, then normalized) for ``--references``."""

    def __init__(self, paths):
        self.exact: dict[str, str] = {}
        self.norm: dict[str, str] = {}
        self.malformed = 0  # malformed reference rows are not usable for look-up; counted in the summary
        for p in paths or ():
            for _loc, _n, row in local_source([p]).rows():
                try:
                    if isinstance(row, InvalidRow):
                        raise BadRow(row.field, row.message)
                    q, a, _ = gsm8k_fields(row)
                except BadRow:
                    self.malformed += 1
                    continue
                self.exact.setdefault(q, a)
                self.norm.setdefault(normalize_text(q), a)

    def get(self, question: str) -> str | None:
        return self.exact.get(question) or self.norm.get(normalize_text(question))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {PROG}", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_args(
        p, default_max_len=DEFAULT_MAX_LEN, text_fields=TEXT_FIELDS, presets=PRESETS, default_preset="gsm8k"
    )
    g = p.add_argument_group("candidates")
    g.add_argument(
        "--candidates",
        choices=("perturb", "solutions"),
        default="perturb",
        help="perturb: reference vs perturbed copy (default); solutions: model solutions JSONL",
    )
    g.add_argument(
        "--grade",
        choices=("strict", "flexible"),
        default="strict",
        help="solutions mode: how a row without 'correct' is graded (default strict: '#### N'; flexible: "
        "the last number)",
    )
    g.add_argument(
        "--references",
        nargs="+",
        metavar="FILE",
        help="GSM8K files to look up the reference solution by question (solutions mode)",
    )
    g.add_argument(
        "--pairs-per-question", type=int, default=1, help="max correct-vs-incorrect pairs per question (default 1)"
    )
    g.add_argument("--keep-annotations", action="store_true", help="keep <<...>> calculator annotations in candidates")
    g.add_argument(
        "--final-styles",
        choices=("mixed", "hash"),
        default="mixed",
        help="perturb mode: state each question's final answers in one seeded style of "
        "data_prep.perturb.FINAL_STYLES ('The answer is 18.', 'A: 18', '\\boxed{18}', ...; mixed, "
        "default) or keep GSM8K's '#### N' (hash)",
    )
    g.add_argument(
        "--truncated-share",
        type=float,
        default=0.0,
        metavar="P",
        help="perturb mode: share of questions that also get a pointwise candidate cut off before its "
        "final answer (label 0, kind 'truncated'; pairs never use it). Default 0: measured on one "
        "H100, 0.25 did not lower the false positives on real SmolLM2 replies (docs/results)",
    )
    g.add_argument(
        "--grade-prompt",
        default=DEFAULT_GRADE_PROMPT,
        metavar="NAME.VERSION",
        help=f"pointwise template (default {DEFAULT_GRADE_PROMPT}: reference shown, final answers compared)",
    )
    g.add_argument(
        "--pair-prompt",
        default=DEFAULT_PAIR_PROMPT,
        metavar="NAME.VERSION",
        help=f"pairwise template (default {DEFAULT_PAIR_PROMPT}: reference shown; pairwise.v1: no reference, "
        "the preference-data task)",
    )
    p.add_argument(
        "--orders",
        type=int,
        choices=(1, 2),
        default=2,
        help="pairwise: both orders (2, default) or one seeded order (1)",
    )
    return p


def run(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.candidates == "perturb" and args.references:
        raise DataError("--references is for --candidates solutions")
    if args.candidates == "solutions" and not (args.train or args.test):
        raise DataError("--candidates solutions needs local --train/--test solution files")
    grade_name, grade_version = template_id(args.grade_prompt)
    pair_template = load(*template_id(args.pair_prompt))
    if not {"query", "response_a", "response_b"} <= pair_template.fields():
        raise DataError(
            f"--pair-prompt {args.pair_prompt} is not a pairwise template (needs query, response_a, response_b)"
        )
    grade_id = load(grade_name, grade_version).id
    base_gate = make_gate(args)
    # pointwise fields: question, reference, response.N; pairwise fields: query, chosen, rejected
    pair_trunc = None
    if base_gate.truncate is not None:
        names = base_gate.truncate or TEXT_FIELDS
        pair_trunc = tuple(
            x for n in names for x in {"question": ("query",), "response": ("chosen", "rejected")}.get(n, ())
        )
        if not pair_trunc and base_gate.truncate:
            pair_trunc = ("_none_",)  # only 'reference' named: nothing in a pairwise prompt may be cut
    pair_gate = LengthGate(base_gate.tokenizer, base_gate.max_len, pair_trunc, base_gate.kwargs)
    exclude = load_exclusion(args.exclude)
    refs = References(args.references)
    point_schema = row_schema(pa.int64(), POINT_EXTRA)
    pair_schema = row_schema(pa.string(), PAIR_SCHEMA_EXTRA)
    strip = (lambda t: t) if args.keep_annotations else strip_annotations
    cand_label = "reference/perturbed" if args.candidates == "perturb" else "model/model"

    def to_units(row: Mapping, n: int) -> list[Unit]:
        """One unit per candidate solution: fields question/reference/response, meta correct/kind."""
        if args.candidates == "perturb":
            q, a, _num = gsm8k_fields(row)
            qid = stable_hash(q)
            wrong = perturb(a, f"{args.seed}:{qid}")
            if wrong is None:
                raise SkipRow("no_perturbation")
            text, how = wrong
            good, bad = strip(a), strip(text)
            if args.final_styles == "mixed":
                style = pick_style(f"{args.seed}:{qid}")
                good = restyle(good, style, random.Random(f"{args.seed}:{qid}:c"))
                bad = restyle(bad, style, random.Random(f"{args.seed}:{qid}:w"))
            units = [
                Unit(
                    row=n,
                    fields={"question": q, "reference": a, "response": good},
                    meta={"correct": True, "kind": "reference", "qid": qid},
                    key=stable_hash(q, a, "c"),
                    query=q,
                ),
                Unit(
                    row=n,
                    fields={"question": q, "reference": a, "response": bad},
                    meta={"correct": False, "kind": f"perturbed:{how}", "qid": qid},
                    key=stable_hash(q, a, "w"),
                    query=q,
                ),
            ]
            rng = random.Random(f"{args.seed}:{qid}:t")
            if not 0.0 <= args.truncated_share <= 1.0:
                raise DataError(f"--truncated-share must be in [0, 1], got {args.truncated_share}")
            if rng.random() < args.truncated_share:
                cut = truncate(good, a, rng)
                if cut is not None:  # a reply stopped before its final answer: wrong, whatever it computed
                    units.append(
                        Unit(
                            row=n,
                            fields={"question": q, "reference": a, "response": cut},
                            meta={"correct": False, "kind": "truncated", "qid": qid},
                            key=stable_hash(q, a, "t"),
                            query=q,
                        )
                    )
            return units
        q = require_str(row, "question")
        resp = require_str(row, "response", allow_empty=True)
        a = row.get("answer")
        if a is None:
            a = refs.get(q)
            if a is None:
                raise BadRow("answer", "missing, and the question is not in --references", reason="missing")
        elif not isinstance(a, str):
            a = str(a)
        if normalize_number(a) is None and normalize_number(hash_answer(a)) is None:
            raise BadRow("answer", "neither a number nor a solution ending '#### <number>'", reason="bad_value")
        if "correct" in row and row["correct"] is not None:
            ok = _correct_flag(row["correct"])
        else:
            ok = compute_score(solution_str=resp, ground_truth=a, mode=args.grade)["acc"] == 1.0
        if not resp.strip():
            raise SkipRow("empty_response")
        qid = stable_hash(q)
        return [
            Unit(
                row=n,
                fields={"question": q, "reference": a, "response": resp},
                meta={"correct": ok, "kind": "model", "qid": qid},
                key=stable_hash(q, resp),
                query=q,
            )
        ]

    def build_point(u: Unit, fields: dict) -> list[Draft]:
        out = []
        for i, (ok, kind, row) in enumerate(u.meta["cands"]):
            resp = fields[f"response.{i}"]
            out.append(
                Draft(
                    messages=grade_messages(fields["question"], fields["reference"], resp, grade_version, grade_name),
                    ground_truth=CORRECT if ok else INCORRECT,
                    extra_info={
                        "question": fields["question"],
                        "answer": fields["reference"],
                        "response": resp,
                        "correct": ok,
                        "candidate": kind,
                        "question_id": u.meta["qid"],
                        "prompt_version": grade_id,
                        "source_row": row,
                    },
                )
            )
        return out

    build_pair = pair_builder(pair_template, extra=_PAIR_META)
    all_stats = []
    for split, source in resolve_sources(args, PRESETS, "gsm8k"):
        sp = Stats(split=split, output=f"pointwise_{split}", source=source.name, max_len=base_gate.max_len)
        cands = read_units(
            source, to_units, sp, on_bad_row=args.on_bad_row, progress=not args.no_progress, exclude=exclude
        )
        # group candidates by question (first-seen order)
        groups: dict[str, list[Unit]] = {}
        for c in cands:
            groups.setdefault(c.meta["qid"], []).append(c)
        point_units, pair_units = [], []
        for qid, cs in groups.items():
            first = cs[0]
            fields = {"question": first.fields["question"], "reference": first.fields["reference"]}
            for i, c in enumerate(cs):
                fields[f"response.{i}"] = c.fields["response"]
            point_units.append(
                Unit(
                    row=first.row,
                    fields=fields,
                    key=qid,
                    query=first.query,
                    weight=len(cs),
                    meta={"qid": qid, "cands": [(c.meta["correct"], c.meta["kind"], c.row) for c in cs]},
                )
            )
            good = [c for c in cs if c.meta["correct"]]
            bad = [c for c in cs if not c.meta["correct"] and c.meta["kind"] != "truncated"]
            rng = random.Random(f"{args.seed}:{split}:{qid}")
            rng.shuffle(good)
            rng.shuffle(bad)
            for g, b in list(zip(good, bad))[: max(0, args.pairs_per_question)]:
                try:
                    pair_units.append(
                        pair_unit(
                            g.row,
                            first.fields["question"],
                            g.fields["response"],
                            b.fields["response"],
                            "gsm8k_verify",
                            answer=first.fields["reference"],
                            candidates=cand_label,
                            question_id=qid,
                        )
                    )
                except SkipRow:  # identical texts cannot happen for correct vs incorrect; keep the guard
                    continue
        sq = Stats(
            split=split,
            output=f"pairwise_{split}",
            source=source.name,
            max_len=base_gate.max_len,
            read=sp.read,
            skipped=sp.skipped.copy(),
        )
        sp.items, sq.items = len(cands), len(pair_units)
        sp.extra["questions"] = len(groups)
        if args.references:
            sp.extra["reference_rows_malformed"] = refs.malformed
        sq.extra["questions_without_pair"] = len(groups) - len({u.meta["question_id"] for u in pair_units})

        accepted = base_gate.apply(point_units, build_point, sp, progress=not args.no_progress)
        drafts = [(d, names) for _u, ds, names in accepted for d in ds]
        for d, _ in drafts:
            sp.labels[d.ground_truth] += 1
        rows = make_rows(
            drafts,
            split=split,
            data_source=args.data_source or "gsm8k_verify/pointwise",
            ability=JUDGE_ABILITY,
            schema=point_schema,
        )
        sp.path = os.path.join(args.out, f"pointwise_{split}.parquet")
        write_parquet(rows, sp.path, point_schema)
        sp.written = len(rows)

        accepted = pair_gate.apply(pair_units, build_pair, sq, progress=not args.no_progress)
        drafts = select_orders(accepted, args.orders, args.seed, split)
        for d, _ in drafts:
            sq.labels[d.ground_truth] += 1
        sq.extra["pairs_written"] = len(accepted)
        rows = make_rows(
            drafts,
            split=split,
            data_source=args.data_source or "gsm8k_verify/pairwise",
            ability=JUDGE_ABILITY,
            schema=pair_schema,
        )
        sq.path = os.path.join(args.out, f"pairwise_{split}.parquet")
        write_parquet(rows, sq.path, pair_schema)
        sq.written = len(rows)
        all_stats += [sp, sq]
    return finish(PROG, all_stats, args)


def main(argv: list[str] | None = None) -> int:
    return cli(run, argv)


if __name__ == "__main__":
    sys.exit(main())
