"""Warm-start (SFT) data for a judge: each verification row's prompt plus a short, checkable answer.

GRPO cannot teach a small model a verdict format it never writes (every sample malformed = every reward equal = no
gradient). This builds, from the GRPO stage's parquet, a chat data set for verl's SFT trainer (column ``messages``)
whose assistant turn states the final answers the verdict rests on, then the verdict, e.g.
``<think>Reference: 72. Candidate: 62. Different.</think><score>0</score>`` or
``<think>Reference: 72. A: 72. B: 62.</think><better>A</better>``. A row whose label disagrees with those answers is
skipped as ``rationale_mismatch``.

    python -m data_prep.judge_sft --in data/gsm8k_verify/pointwise_train.parquet --out data/sft/pointwise_train.parquet
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from functools import partial

import pyarrow as pa

from data_prep.cli import cli, new_parser
from data_prep.files.errors import DataError, SkipRow
from data_prep.files.outputs import write_parquet
from data_prep.files.readers import read_parquet
from data_prep.rows import SFT_FIELDS, sft_row
from reward_fns import verdicts

PROG = "data_prep.judge_sft"
SCHEMA = pa.schema([*SFT_FIELDS, ("label", pa.string())])


def target(row: dict) -> str:
    """The assistant turn for one verification row: its verdict kind's rationale and verdict
    (``reward_fns.verdicts``); raises SkipRow with a reason."""
    extra = row.get("extra_info") or {}
    kind = verdicts.of_row(extra)
    if kind is None:
        raise SkipRow("not_a_judge_row")
    try:
        return kind.target(extra, (row.get("reward_model") or {}).get("ground_truth"))
    except verdicts.NoTarget as e:
        raise SkipRow(e.args[0]) from None


def build(rows: list[dict]) -> tuple[list[dict], Counter]:
    out, skipped = [], Counter()
    for row in rows:
        try:
            answer = target(row)
        except SkipRow as e:
            skipped[e.reason] += 1
            continue
        out.append({**sft_row(row, answer), "label": str((row.get("reward_model") or {}).get("ground_truth"))})
    return out, skipped


def build_parser():
    p = new_parser(PROG, __doc__)
    in_help = "verification parquet(s) from data_prep.gsm8k_verify (pointwise or pairwise)"
    p.add_argument("--in", dest="inputs", nargs="+", required=True, metavar="PARQUET", help=in_help)
    p.add_argument("--out", required=True, metavar="PARQUET", help="SFT parquet to write (column 'messages')")
    p.add_argument("--max-rows", type=int, default=-1, help="keep at most N rows (-1 = all)")
    seed_help = "several --in files: their rows are interleaved by a shuffle with this seed before --max-rows"
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    return p


def run(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    rows = [row for path in args.inputs for row in read_parquet(path)]
    out, skipped = build(rows)
    if len(args.inputs) > 1:  # e.g. perturbed + model-written candidates: --max-rows keeps both kinds
        random.Random(args.seed).shuffle(out)
    if args.max_rows >= 0:
        out = out[: args.max_rows]
    if not out:
        raise DataError(f"no row could be turned into SFT data (read {len(rows)}, skipped {dict(skipped)})")
    write_parquet(out, args.out, SCHEMA)  # deterministic, atomic (data_prep.files.outputs)
    labels = Counter(r["label"] for r in out)
    print(f"== {PROG}: {args.out}")
    print(f"  rows read      {len(rows)}")
    print(f"  rows written   {len(out)}")
    print(f"  skipped        {sum(skipped.values())}" + "".join(f"\n    {k}: {v}" for k, v in sorted(skipped.items())))
    print("  labels         " + "  ".join(f"{k}: {v}" for k, v in sorted(labels.items())))


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
