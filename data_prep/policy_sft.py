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

import argparse
import random
import re
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from data_prep.files.errors import DataError
from data_prep.files.outputs import write_parquet

PROG = "data_prep.policy_sft"
SCHEMA = pa.schema(
    [
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("data_source", pa.string()),
    ]
)
CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")


def solution(answer: str) -> str:
    """The worked solution as the policy should write it: calculator notes removed, ``#### N`` kept."""
    return CALCULATOR_NOTE.sub("", answer).strip()


def build(rows: list[dict]) -> list[dict]:
    out = []
    for i, row in enumerate(rows):
        answer = (row.get("extra_info") or {}).get("answer")
        prompt = row.get("prompt")
        if not isinstance(answer, str) or "####" not in answer or not prompt:
            raise DataError(
                f"row {i}: needs 'prompt' and extra_info.answer ending '#### N' (a data_prep.gsm8k parquet)"
            )
        msgs = [{"role": m["role"], "content": m["content"]} for m in prompt]
        out.append(
            {
                "messages": msgs + [{"role": "assistant", "content": solution(answer)}],
                "data_source": str(row.get("data_source", "")),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=f"python -m {PROG}", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--in", dest="input", required=True, metavar="PARQUET", help="a data_prep.gsm8k train parquet")
    p.add_argument("--out", required=True, metavar="PARQUET", help="SFT parquet to write (column 'messages')")
    p.add_argument("--max-rows", type=int, default=-1, help="keep a seeded sample of N rows (-1 = all)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        try:
            rows = pq.read_table(args.input).to_pylist()
        except (OSError, pa.ArrowInvalid) as e:
            raise DataError(f"--in {args.input}: {e}") from None
        out = build(rows)
        if 0 <= args.max_rows < len(out):
            out = random.Random(args.seed).sample(out, args.max_rows)
        if not out:
            raise DataError(f"--in {args.input}: no rows")
        write_parquet(out, args.out, SCHEMA)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{PROG}: {len(rows)} rows in, {len(out)} rows out -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
