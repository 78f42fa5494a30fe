"""Judge data, pointwise: (query, response, 0-4 score) -> verl parquet for the pointwise judge recipe.

Input schemas (``--format auto`` picks one from the first row's keys): ``openjudge`` (OpenJudge's parquet, one row
per ``output`` answer, label ``helpfulness``), ``helpsteer`` (``prompt``, ``response``, ``helpfulness``) and ``generic``
(JSONL ``query``, ``response``, ``score``). The prompt is the versioned ``pointwise`` template, untrusted text
neutralized; ``reward_model.ground_truth`` is the integer label.

    python -m data_prep.pointwise --out data/pointwise --hf openjudge
    python -m data_prep.pointwise --out data/pointwise --train rows.jsonl --test eval.jsonl
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import partial

import pyarrow as pa

from data_prep.cli import Conversion, HFPreset, Options, SplitRun, add_common_args, cli, new_parser, run_conversion
from data_prep.conversations import openjudge_output
from data_prep.files.errors import BadRow
from data_prep.rows import JUDGE_ABILITY, Draft, Unit, row_schema
from data_prep.text import neutralize, require_str, stable_hash
from reward_fns._labels import score_label

PROG = "data_prep.pointwise"
TEMPLATE = "pointwise"
DEFAULT_MAX_LEN = 2048
SIGNATURES = {"openjudge": {"input", "output"}, "helpsteer": {"helpfulness", "prompt"}, "generic": {"query", "score"}}
FORMATS = tuple(SIGNATURES)
PRESETS = {
    "openjudge": HFPreset(
        path="agentscope-ai/OpenJudge",
        data_files=(
            ("train", "train_rm/grpo/pointwise/*train*.parquet"),
            ("test", "train_rm/grpo/pointwise/*val*.parquet"),
        ),
        help="agentscope-ai/OpenJudge train_rm/grpo/pointwise",
        format="openjudge",
    ),
    "helpsteer2": HFPreset(
        path="nvidia/HelpSteer2",
        splits=(("train", "train"), ("test", "validation")),
        help="nvidia/HelpSteer2",
        format="helpsteer",
    ),
}
TEXT_FIELDS = ("query", "response")


def _label(value: object, field_name: str) -> int:
    if value is None:
        raise BadRow(field_name, "missing", reason="missing")
    try:
        return score_label(value)
    except ValueError as e:
        raise BadRow(field_name, str(e), reason="bad_label") from None


def items_from_row(row: Mapping, fmt: str) -> list[tuple[str, str, int]]:
    """``[(query, response, label)]`` of one input row in format ``fmt``."""
    if fmt == "openjudge":
        query, answers = openjudge_output(row)
        items = []
        for i, (content, label) in enumerate(answers):
            if isinstance(label, Mapping):
                label = label.get("helpfulness", label.get("score"))
            items.append((query, content, _label(label, f"output[{i}].answer.label.helpfulness")))
        return items
    query, score = {"helpsteer": ("prompt", "helpfulness"), "generic": ("query", "score")}[fmt]
    q, r = require_str(row, query), require_str(row, "response", allow_empty=True)
    return [(q, r, _label(row.get(score), score))]


def build_parser():
    p = new_parser(PROG, __doc__)
    add_common_args(p, default_max_len=DEFAULT_MAX_LEN, text_fields=TEXT_FIELDS, presets=PRESETS, formats=FORMATS)
    return p


def run(argv: list[str] | None = None) -> dict:
    options = Options.parse(build_parser(), argv, PRESETS)
    template = options.template(TEMPLATE)

    def to_units(run: SplitRun, row: Mapping, n: int) -> list[Unit]:
        out = []
        for q, r, label in items_from_row(row, run.detect(row, SIGNATURES)):
            if not r.strip():
                run.stats.skipped["empty_response"] += 1
                continue
            meta = {"label": label, "origin": run.fmt}
            out.append(Unit(n, {"query": q, "response": r}, meta, key=stable_hash(q, r), query=q, label=label))
        return out

    def build(u: Unit, fields: dict) -> list[Draft]:
        q, r = fields["query"], fields["response"]
        extra = {"query": q, "response": r, "item_id": u.key, "origin": u.meta["origin"]}
        extra |= {"prompt_version": template.id, "source_row": u.row}
        messages = template.render(query=neutralize(q), response=neutralize(r))
        return [Draft(messages=messages, ground_truth=u.meta["label"], extra_info=extra)]

    conv = Conversion(
        prog=PROG,
        schema=row_schema(pa.int64(), ["query", "response", "item_id", "origin"]),
        ability=JUDGE_ABILITY,
        to_units=to_units,
        build=build,
        data_source=lambda run: options.data_source or f"pointwise/{run.fmt or 'empty'}",
    )
    return run_conversion(conv, options)


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
