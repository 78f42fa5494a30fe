"""Warm-start (SFT) data for a policy: each GSM8K-shaped row's prompt plus its worked reference solution.

A policy that never writes a checkable final answer gives GRPO nothing to rank (every sample scores 0).
This builds, from a ``data_prep.gsm8k`` parquet, a chat data set for verl's SFT trainer
(``verl.trainer.sft_trainer``, column ``messages``): the row's own prompt (the ``gsm8k_policy``
template) and, as the assistant turn, the reference solution ``extra_info.answer`` with GSM8K's
``<<a+b=c>>`` calculator notes removed, ending ``#### N``. ``--max-rows`` keeps a seeded sample of rows:
a short warm start teaches the answer format and leaves the arithmetic to GRPO.

    python -m data_prep.policy_sft --in data/gsm8k/train.parquet --out data/policy_sft.parquet --max-rows 1000
"""

from __future__ import annotations

import random
import sys
from functools import partial

import pyarrow as pa

from data_prep.cli import cli, new_parser
from data_prep.files.errors import DataError
from data_prep.files.outputs import write_parquet
from data_prep.files.readers import read_parquet
from data_prep.perturb import strip_annotations
from data_prep.rows import SFT_FIELDS, sft_row

PROG = "data_prep.policy_sft"
SCHEMA = pa.schema(SFT_FIELDS)


def build(rows: list[dict]) -> list[dict]:
    """Each row's SFT row: its prompt, answered by its reference solution without calculator notes."""
    out = []
    for i, row in enumerate(rows):
        answer = (row.get("extra_info") or {}).get("answer")
        if not isinstance(answer, str) or "####" not in answer or not row.get("prompt"):
            raise DataError(
                f"row {i}: needs 'prompt' and extra_info.answer ending '#### N' (a data_prep.gsm8k parquet)"
            )
        out.append(sft_row(row, strip_annotations(answer).strip()))
    return out


def build_parser():
    p = new_parser(PROG, __doc__)
    p.add_argument("--in", dest="input", required=True, metavar="PARQUET", help="a data_prep.gsm8k train parquet")
    p.add_argument("--out", required=True, metavar="PARQUET", help="SFT parquet to write (column 'messages')")
    p.add_argument("--max-rows", type=int, default=-1, help="keep a seeded sample of N rows (-1 = all)")
    p.add_argument("--seed", type=int, default=0)
    return p


def run(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    rows = read_parquet(args.input)
    out = build(rows)
    if 0 <= args.max_rows < len(out):
        out = random.Random(args.seed).sample(out, args.max_rows)
    if not out:
        raise DataError(f"--in {args.input}: no rows")
    write_parquet(out, args.out, SCHEMA)
    print(f"{PROG}: {len(rows)} rows in, {len(out)} rows out -> {args.out}")


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
