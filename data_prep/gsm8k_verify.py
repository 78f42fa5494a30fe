"""GSM8K verification data: judge rows with verifiable labels (correct vs incorrect solutions).

Pointwise rows use exactly the prompt of the GSM8K LLM-judge reward (``reward_fns.llm_judge.build_messages``,
``gsm8k_grade``, reference shown), so a judge trained on them is a drop-in reward.

Candidates (``--candidates``; details: data_prep/README.md):

* ``perturb`` (default): GSM8K rows (local JSONL or hub ``openai/gsm8k`` main); the reference solution is the correct
  candidate, a perturbed copy (``data_prep.perturb``, seeded) the incorrect one; ``<<...>>`` annotations are removed
  from both unless ``--keep-annotations``.
* ``solutions``: JSONL of model solutions (``question``, ``response``, optional ``correct``, else graded by
  ``reward_fns.gsm8k`` in ``--grade`` mode; optional ``answer``, else looked up by question in ``--references``), such
  as ``scripts.eval.gsm8k``'s ``samples.jsonl``. Identical solutions of one question count as duplicates.

Outputs (``--out DIR``): ``pointwise_<split>.parquet`` (4 = correct, 0 = incorrect) and ``pairwise_<split>.parquet``
(per question up to ``--pairs-per-question`` correct-vs-incorrect pairs, both orders, question as the query).

    python -m data_prep.gsm8k_verify --out data/gsm8k_verify --train train.jsonl --test test.jsonl
    python -m data_prep.gsm8k_verify --out data/gsm8k_verify --candidates solutions \\
        --train samples.jsonl --references gsm8k/train.jsonl
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

import pyarrow as pa

from data_prep.cli import (
    Conversion,
    SplitRun,
    add_common_args,
    cli,
    load_template,
    new_parser,
    run_conversion,
    write_split,
)
from data_prep.files.errors import BadRow, DataError, SkipRow
from data_prep.files.readers import InvalidRow, local_source
from data_prep.gsm8k import PRESETS, gsm8k_fields
from data_prep.lengths import LengthGate
from data_prep.pairwise import PAIR_EXTRA, PairOptions, order_selector, pair_builder, pair_unit
from data_prep.perturb import perturb, pick_style, restyle, strip_annotations, truncate
from data_prep.rows import JUDGE_ABILITY, Draft, Unit, row_schema
from data_prep.summary import Stats
from data_prep.text import normalize_text, require_str, stable_hash
from reward_fns.gsm8k import compute_score
from reward_fns.llm_judge import build_messages
from reward_fns.parse import hash_answer, normalize_number

PROG = "data_prep.gsm8k_verify"
DEFAULT_MAX_LEN = 2048
TEXT_FIELDS = ("question", "reference", "response")
DEFAULT_GRADE_PROMPT = "gsm8k_grade.v3"
DEFAULT_PAIR_PROMPT = "pairwise_ref.v3"
POINT_EXTRA = ["question", "answer", "response", ("correct", pa.bool_()), "candidate", "question_id"]
_PAIR_META = ("answer", "candidates", "question_id")
CORRECT, INCORRECT = 4, 0
#: ``--truncate-field`` names (pointwise fields) -> the pairwise fields they stand for
PAIR_FIELDS = {"question": ("query",), "response": ("chosen", "rejected")}


@dataclass(frozen=True, kw_only=True)
class VerifyOptions(PairOptions):
    candidates: str
    grade: str
    references: tuple[str, ...] | None
    pairs_per_question: int
    keep_annotations: bool
    final_styles: str
    truncated_share: float
    grade_prompt: str
    pair_prompt: str


def build_parser():
    p = new_parser(PROG, __doc__)
    add_common_args(p, default_max_len=DEFAULT_MAX_LEN, text_fields=TEXT_FIELDS, presets=PRESETS)
    g = p.add_argument_group("candidates")
    cand_help = "perturb: reference vs perturbed copy (default); solutions: model solutions JSONL"
    g.add_argument("--candidates", choices=("perturb", "solutions"), default="perturb", help=cand_help)
    grade_help = "solutions mode: how a row without 'correct' is graded (default strict: '#### N'; flexible: "
    grade_help += "the last number)"
    g.add_argument("--grade", choices=("strict", "flexible"), default="strict", help=grade_help)
    ref_help = "GSM8K files to look up the reference solution by question (solutions mode)"
    g.add_argument("--references", nargs="+", metavar="FILE", help=ref_help)
    ppq_help = "max correct-vs-incorrect pairs per question (default 1)"
    g.add_argument("--pairs-per-question", type=int, default=1, help=ppq_help)
    g.add_argument("--keep-annotations", action="store_true", help="keep <<...>> calculator annotations in candidates")
    styles_help = "perturb mode: state each question's final answers in one seeded style of "
    styles_help += "data_prep.perturb.FINAL_STYLES ('The answer is 18.', 'A: 18', '\\boxed{18}', ...; mixed, default) "
    styles_help += "or keep GSM8K's '#### N' (hash)"
    g.add_argument("--final-styles", choices=("mixed", "hash"), default="mixed", help=styles_help)
    cut_help = "perturb mode: share of questions that also get a pointwise candidate cut off before its final answer "
    cut_help += "(label 0, kind 'truncated'; pairs never use it). Default 0: measured on one H100, 0.25 did not lower "
    cut_help += "the false positives on real SmolLM2 replies (docs/results)"
    g.add_argument("--truncated-share", type=float, default=0.0, metavar="P", help=cut_help)
    grade_prompt_help = f"pointwise template (default {DEFAULT_GRADE_PROMPT}: reference shown, final answers compared)"
    g.add_argument("--grade-prompt", default=DEFAULT_GRADE_PROMPT, metavar="NAME.VERSION", help=grade_prompt_help)
    pair_prompt_help = f"pairwise template (default {DEFAULT_PAIR_PROMPT}: reference shown; pairwise.v1: no "
    pair_prompt_help += "reference, the preference-data task)"
    g.add_argument("--pair-prompt", default=DEFAULT_PAIR_PROMPT, metavar="NAME.VERSION", help=pair_prompt_help)
    orders_help = "pairwise: both orders (2, default) or one seeded order (1)"
    p.add_argument("--orders", type=int, choices=(1, 2), default=2, help=orders_help)
    return p


def check_candidates(options: VerifyOptions) -> None:
    """The candidate options fit together (before any work)."""
    if options.candidates == "perturb" and options.references:
        raise DataError("--references is for --candidates solutions")
    if options.candidates == "solutions" and not (options.train or options.test):
        raise DataError("--candidates solutions needs local --train/--test solution files")
    if options.candidates == "perturb" and not 0.0 <= options.truncated_share <= 1.0:
        raise DataError(f"--truncated-share must be in [0, 1], got {options.truncated_share}")


def template(value: str, option: str):
    """The prompt template ``value`` = ``NAME.VERSION`` (e.g. ``gsm8k_grade.v3``) of ``option``."""
    name, dot, version = value.rpartition(".")
    if not dot or not name or not version:
        raise DataError(f"a prompt is NAME.VERSION (e.g. {DEFAULT_GRADE_PROMPT}), got {value!r}")
    return load_template(name, version, f"{option} {value}")


def pair_template(value: str):
    """``--pair-prompt``'s template; it must be a pairwise one."""
    found = template(value, "--pair-prompt")
    if not {"query", "response_a", "response_b"} <= found.fields():
        raise DataError(f"--pair-prompt {value} is not a pairwise template (needs query, response_a, response_b)")
    return found


def pair_gate(point_gate: LengthGate) -> LengthGate:
    """The pairwise outputs' gate: the pointwise one with ``--truncate-field`` names mapped to pairwise fields."""
    names = point_gate.truncate
    if names:  # only 'reference' named: nothing in a pairwise prompt may be cut
        names = tuple(x for n in names for x in PAIR_FIELDS.get(n, ())) or ("_none_",)
    return replace(point_gate, truncate=names)


# ----------------------------------------------------------------------------- candidates
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
        for _loc, _n, row in local_source(paths or ()).rows():
            try:
                q, a, _ = gsm8k_fields({} if isinstance(row, InvalidRow) else row)  # undecodable: malformed too
            except BadRow:
                self.malformed += 1
                continue
            self.exact.setdefault(q, a)
            self.norm.setdefault(normalize_text(q), a)

    def get(self, question: str) -> str | None:
        return self.exact.get(question) or self.norm.get(normalize_text(question))


def candidate(n: int, question: str, reference: str, response: str, correct: bool, kind: str, key: str) -> Unit:
    """One candidate solution of input row ``n``: fields question/reference/response, meta correct/kind/qid."""
    meta = {"correct": correct, "kind": kind, "qid": stable_hash(question)}
    return Unit(n, {"question": question, "reference": reference, "response": response}, meta, key=key, query=question)


def perturbed_candidates(options: VerifyOptions, row: Mapping, n: int) -> list[Unit]:
    """A GSM8K row's reference solution (correct) and a perturbed copy (incorrect), both restyled unless
    ``--final-styles hash``; for a ``--truncated-share`` of questions also a copy cut off before its final answer."""
    q, a, _num = gsm8k_fields(row)
    seed = f"{options.seed}:{stable_hash(q)}"
    wrong = perturb(a, seed)
    if wrong is None:
        raise SkipRow("no_perturbation")
    text, how = wrong
    good, bad = (a, text) if options.keep_annotations else (strip_annotations(a), strip_annotations(text))
    if options.final_styles == "mixed":
        style = pick_style(seed)
        good = restyle(good, style, random.Random(f"{seed}:c"))
        bad = restyle(bad, style, random.Random(f"{seed}:w"))
    units = [
        candidate(n, q, a, good, True, "reference", stable_hash(q, a, "c")),
        candidate(n, q, a, bad, False, f"perturbed:{how}", stable_hash(q, a, "w")),
    ]
    rng = random.Random(f"{seed}:t")
    if rng.random() < options.truncated_share:
        cut = truncate(good, a, rng)
        if cut is not None:  # a reply stopped before its final answer: wrong, whatever it computed
            units.append(candidate(n, q, a, cut, False, "truncated", stable_hash(q, a, "t")))
    return units


def model_candidate(options: VerifyOptions, refs: References, row: Mapping, n: int) -> list[Unit]:
    """A model solution: its reference from the row or ``--references``, graded by the rule reward unless the row
    says ``correct``."""
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
        ok = compute_score(solution_str=resp, ground_truth=a, mode=options.grade)["acc"] == 1.0
    if not resp.strip():
        raise SkipRow("empty_response")
    return [candidate(n, q, a, resp, ok, "model", stable_hash(q, resp))]


# ----------------------------------------------------------------------------- per question
def question_unit(qid: str, cands: list[Unit]) -> Unit:
    """The pointwise unit of one question: every candidate (``response.<i>``), so all pass the length gate together."""
    first = cands[0]
    fields = {"question": first.fields["question"], "reference": first.fields["reference"]}
    fields |= {f"response.{i}": c.fields["response"] for i, c in enumerate(cands)}
    meta = {"qid": qid, "cands": [(c.meta["correct"], c.meta["kind"], c.row) for c in cands]}
    return Unit(first.row, fields, meta, key=qid, query=first.query, weight=len(cands))


def question_pairs(options: VerifyOptions, split: str, qid: str, cands: list[Unit]) -> list[Unit]:
    """Up to ``--pairs-per-question`` correct-vs-incorrect pairs of one question (seeded; never a truncated one)."""
    q, ref = cands[0].fields["question"], cands[0].fields["reference"]
    good = [c for c in cands if c.meta["correct"]]
    bad = [c for c in cands if not c.meta["correct"] and c.meta["kind"] != "truncated"]
    rng = random.Random(f"{options.seed}:{split}:{qid}")
    rng.shuffle(good)
    rng.shuffle(bad)
    label = "reference/perturbed" if options.candidates == "perturb" else "model/model"
    pairs = []
    for g, b in list(zip(good, bad))[: max(0, options.pairs_per_question)]:
        meta = {"answer": ref, "candidates": label, "question_id": qid}
        try:
            pairs.append(pair_unit(g.row, q, g.fields["response"], b.fields["response"], "gsm8k_verify", **meta))
        except SkipRow:  # solutions mode: two answers that differ only in whitespace
            continue
    return pairs


def point_builder(grade) -> Callable[[Unit, dict], list[Draft]]:
    """Drafts of a question's pointwise unit: one per candidate, in the LLM-judge reward's own prompt."""

    def build(u: Unit, fields: dict) -> list[Draft]:
        out = []
        for i, (ok, kind, row) in enumerate(u.meta["cands"]):
            q, ref, resp = fields["question"], fields["reference"], fields[f"response.{i}"]
            messages = build_messages(
                resp, None, {"question": q, "answer": ref}, prompt=grade.name, prompt_version=grade.version
            )
            extra = {"question": q, "answer": ref, "response": resp, "correct": ok, "candidate": kind}
            extra.update({"question_id": u.meta["qid"], "prompt_version": grade.id, "source_row": row})
            out.append(Draft(messages=messages, ground_truth=CORRECT if ok else INCORRECT, extra_info=extra))
        return out

    return build


# ----------------------------------------------------------------------------- the run
def run(argv: list[str] | None = None) -> dict:
    """Check the options and templates, load ``--references``, then the shared per-split loop with two outputs."""
    options = VerifyOptions.parse(build_parser(), argv, PRESETS)
    check_candidates(options)
    grade, pairs = template(options.grade_prompt, "--grade-prompt"), pair_template(options.pair_prompt)
    refs = References(options.references)
    pair = Conversion(
        prog=PROG,
        schema=row_schema(pa.string(), PAIR_EXTRA + list(_PAIR_META)),
        ability=JUDGE_ABILITY,
        build=pair_builder(pairs, extra=_PAIR_META),
        select=order_selector(options.orders, options.seed),
        data_source=lambda _run: options.data_source or "gsm8k_verify/pairwise",
    )

    def to_units(_run: SplitRun, row: Mapping, n: int) -> list[Unit]:
        if options.candidates == "perturb":
            return perturbed_candidates(options, row, n)
        return model_candidate(options, refs, row, n)

    def write(point_run: SplitRun, cands: list[Unit], gate: LengthGate) -> list[Stats]:
        """A split's candidates -> per question a pointwise unit and pairs -> ``pointwise_<split>.parquet`` and
        ``pairwise_<split>.parquet``."""
        groups: dict[str, list[Unit]] = {}  # candidates by question, first-seen order
        for c in cands:
            groups.setdefault(c.meta["qid"], []).append(c)
        pair_units = [u for qid, cs in groups.items() for u in question_pairs(options, point_run.split, qid, cs)]
        stats, split = point_run.stats, point_run.split
        pair_stats = Stats(split=split, output=f"pairwise_{split}", source=stats.source, max_len=gate.max_len)
        pair_stats.read, pair_stats.skipped, pair_stats.items = stats.read, stats.skipped.copy(), len(pair_units)
        stats.extra["questions"] = len(groups)
        if options.references:
            stats.extra["reference_rows_malformed"] = refs.malformed
        pair_stats.extra["questions_without_pair"] = len(groups) - len({u.meta["question_id"] for u in pair_units})
        return [
            write_split(point, point_run, [question_unit(qid, cs) for qid, cs in groups.items()], gate, options),
            write_split(pair, SplitRun(split, point_run.source, pair_stats), pair_units, pair_gate(gate), options),
        ]

    point = Conversion(
        prog=PROG,
        schema=row_schema(pa.int64(), POINT_EXTRA),
        ability=JUDGE_ABILITY,
        build=point_builder(grade),
        data_source=lambda _run: options.data_source or "gsm8k_verify/pointwise",
        to_units=to_units,
        outputs=("pointwise_", "pairwise_"),
        write=write,
    )
    return run_conversion(point, options)


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
