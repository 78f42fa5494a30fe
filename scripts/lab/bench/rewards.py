"""Throughput of the rule rewards on realistic outputs, in samples/s on one core.

Judge outputs: a ~120-word <think> block then the verdict (plus 10% malformed: unclosed think,
hedged double verdicts). Policy outputs: GSM8K reference solutions (from --gsm8k JSONL when given,
else ../shared/data/gsm8k/test.jsonl when present, else synthetic worked solutions), scored in
strict and flexible mode. Single process, so the figure is per core. Prints a Markdown table.

    python -m scripts.lab.bench.rewards [--n 20000] [--gsm8k path/to/test.jsonl]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time

import scripts
from data_prep.files.readers import read_jsonl
from reward_fns import gsm8k, pairwise, pointwise

ROOT = scripts.ROOT

WORDS = (
    "the response answers the question correctly but misses one step and the tone is fine "
    "overall it is clear relevant and concise although a detail about units is wrong"
).split()


def think(rng: random.Random, n_words: int = 120) -> str:
    return "<think>" + " ".join(rng.choice(WORDS) for _ in range(n_words)) + "</think>"


def judge_outputs(rng, n, tag, values):
    out = []
    for _ in range(n):
        r = rng.random()
        v = rng.choice(values)
        if r < 0.05:
            out.append(think(rng)[:-8] + f"<{tag}>{v}</{tag}>")  # unclosed think
        elif r < 0.10:
            out.append(think(rng) + f"<{tag}>{v}</{tag}><{tag}>{rng.choice(values)}</{tag}>")
        else:
            out.append(think(rng) + f"\n<{tag}>{v}</{tag}>")
    return out


def gsm8k_outputs(rng, n, path):
    rows = []
    if path and os.path.exists(path):
        rows = read_jsonl(path)
    if not rows:
        rows = [
            {"answer": f"She has {a} apples and buys {b} more: {a}+{b}=<<{a}+{b}={a + b}>>{a + b}.\n#### {a + b}"}
            for a, b in ((rng.randint(1, 999), rng.randint(1, 999)) for _ in range(500))
        ]
    picks = [rng.choice(rows)["answer"] for _ in range(n)]
    return [(p, p.split("####")[-1].strip()) for p in picks]


def rate(fn, items) -> float:
    t = time.perf_counter()
    for args in items:
        fn(*args)
    return len(items) / (time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.rewards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--n", type=int, default=20_000, help="samples per reward (default 20000)")
    ap.add_argument(
        "--gsm8k",
        default=os.path.join(ROOT, "..", "shared", "data", "gsm8k", "test.jsonl"),
        help="GSM8K JSONL whose reference solutions serve as policy outputs",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    pw = [("j", s, rng.randint(0, 4)) for s in judge_outputs(rng, args.n, "score", "01234")]
    pr = [("j", s, rng.choice("AB")) for s in judge_outputs(rng, args.n, "better", "AB")]
    gs = [("openai/gsm8k", s, gt) for s, gt in gsm8k_outputs(rng, args.n, args.gsm8k)]
    avg_len = {k: sum(len(x[1]) for x in v) / len(v) for k, v in (("pointwise", pw), ("pairwise", pr), ("gsm8k", gs))}
    results = [
        ("pointwise", rate(pointwise.compute_score, pw), avg_len["pointwise"]),
        ("pairwise", rate(pairwise.compute_score, pr), avg_len["pairwise"]),
        ("gsm8k strict", rate(lambda *a: gsm8k.compute_score(*a, mode="strict"), gs), avg_len["gsm8k"]),
        ("gsm8k flexible", rate(lambda *a: gsm8k.compute_score(*a, mode="flexible"), gs), avg_len["gsm8k"]),
    ]
    print(
        f"# rule reward throughput, one core ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, n={args.n})\n"
    )
    print("| reward | samples/s/core | avg output chars | target 20k/s |")
    print("|---|---:|---:|---|")
    for name, r, n_chars in results:
        print(f"| {name} | {r:,.0f} | {n_chars:,.0f} | {'ok' if r >= 20_000 else 'BELOW'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
