"""GSM8K -> verl policy parquet (the GSM8K GRPO recipe; rule reward or LLM-judge reward).

Input rows: ``question`` and ``answer`` (worked solution ending ``#### <number>``), from local JSONL
or the hub (``openai/gsm8k`` config ``main``). Each output row's prompt is the ``gsm8k_policy``
template (the question plus the instruction to end with ``#### <number>``); ``reward_model.
ground_truth`` is the final number as a string (commas removed); ``extra_info`` carries ``question``
and ``answer`` (the full reference solution, as in verl's own GSM8K prep) so an LLM judge sees them.

    python -m data_prep.gsm8k --out data/gsm8k                       # from the hub
    python -m data_prep.gsm8k --out data/gsm8k --train train.jsonl --test test.jsonl
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import partial

import pyarrow as pa

from data_prep.cli import Conversion, HFPreset, Options, SplitRun, add_common_args, cli, new_parser, run_conversion
from data_prep.files.errors import BadRow
from data_prep.rows import Draft, Unit, row_schema
from data_prep.text import require_str, stable_hash
from reward_fns.parse import hash_answer, normalize_number

PROG = "data_prep.gsm8k"
DATA_SOURCE = "openai/gsm8k"
TEMPLATE = "gsm8k_policy"
DEFAULT_MAX_LEN = 512
PRESETS = {"gsm8k": HFPreset(path="openai/gsm8k", name="main", help="openai/gsm8k main")}
TEXT_FIELDS = ("question",)


def gsm8k_fields(row: Mapping) -> tuple[str, str, str]:
    """(question, full answer, final number string) of a GSM8K row; BadRow names the bad field."""
    question = require_str(row, "question")
    answer = require_str(row, "answer")
    token = hash_answer(answer)
    if token is None:
        raise BadRow("answer", "no final answer '#### <number>'", reason="bad_value")
    number = token.replace(",", "").replace("$", "").removesuffix(".")
    if normalize_number(number) is None:
        raise BadRow("answer", f"final answer {token!r} after '####' is not a number", reason="bad_value")
    return question, answer, number


def build_parser():
    p = new_parser(PROG, __doc__)
    add_common_args(p, default_max_len=DEFAULT_MAX_LEN, text_fields=TEXT_FIELDS, presets=PRESETS)
    return p


def run(argv: list[str] | None = None) -> dict:
    options = Options.parse(build_parser(), argv, PRESETS)
    template = options.template(TEMPLATE)

    def to_units(_run: SplitRun, row: Mapping, n: int) -> list[Unit]:
        q, a, num = gsm8k_fields(row)
        return [Unit(row=n, fields={"question": q}, meta={"answer": a, "number": num}, key=stable_hash(q, a), query=q)]

    def build(u: Unit, fields: dict) -> list[Draft]:
        q = fields["question"]
        extra = {"question": q, "answer": u.meta["answer"], "prompt_version": template.id, "source_row": u.row}
        return [Draft(messages=template.render(question=q), ground_truth=u.meta["number"], extra_info=extra)]

    conv = Conversion(
        prog=PROG,
        schema=row_schema(pa.string(), ["question", "answer"]),
        ability="math",
        to_units=to_units,
        build=build,
        data_source=lambda _run: options.data_source or DATA_SOURCE,
        count_labels=False,
    )
    return run_conversion(conv, options)


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
