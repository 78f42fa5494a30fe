"""Seeded grade-school word problems in GSM8K's own shape: a testbed a small policy can learn.

Writes ``train.jsonl`` and ``test.jsonl`` with GSM8K's fields, ``question`` and ``answer`` (a worked
solution with ``<<a+b=c>>`` calculator notes, ending ``#### N``), plus ``settings.json``. Point
``GSM8K_DIR`` (or ``data_prep.gsm8k --train/--test``) at the folder and every recipe, reward, judge
prompt, verification-data builder and evaluator works unchanged. Train and test questions are disjoint
(a question's split is decided by its text's hash, so no text is in both); the same settings and seed
give byte-identical files.

    python -m data_prep.word_problems --out data/word_problems                      # the default testbed
    python -m data_prep.word_problems --out data/wp1 --steps 1 --max-number 10 --ops add,sub

Difficulty: ``--steps`` (operations chained in one story, 1-4), ``--max-number`` (operands drawn from
1..N), ``--ops`` (``add``, ``sub``, ``mul``, ``div``; results stay whole and non-negative). The default is two steps, numbers up to 20, all four
operations. SmolLM2-135M-Instruct solves none of these untrained (it rarely ends with ``#### N``):
``scripts.policy_learns`` warm-starts it on worked solutions first. With a real model, use GSM8K
itself (``GSM8K_DIR``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys

from data_prep.errors import DataError
from data_prep.outputs import check_output_folder, output_set

PROG = "data_prep.word_problems"
MAX_NUMBER = 1_000_000  # operands beyond this are no grade-school problem (and divisors would take long to list)
OPS = ("add", "sub", "mul", "div")
NAMES = ("Tom", "Anna", "Ben", "Maria", "Sam", "Lily", "Jack", "Emma", "Noah", "Mia", "Leo", "Zoe", "Omar",
         "Priya", "Chen", "Sara", "Ivan", "Nina", "Paul", "Rosa")
PRONOUN = {"Tom": "He", "Ben": "He", "Sam": "He", "Jack": "He", "Noah": "He", "Leo": "He", "Omar": "He",
           "Chen": "He", "Ivan": "He", "Paul": "He"}  # every other name: "She"
ITEMS = ("apples", "pencils", "stickers", "marbles", "cookies", "books", "stamps", "shells", "cards", "eggs",
         "balloons", "coins", "crayons", "flowers", "toy cars")

# One sentence per operation; {n} is the operand. The running total is always the subject's count.
STEP_TEXT = {
    "add": ("{p} buys {n} more.", "{p} finds {n} more.", "A friend gives {o} {n} more.", "{p} gets {n} more."),
    "sub": ("{p} gives {n} to a friend.", "{p} loses {n}.", "{p} uses {n}.", "{p} sells {n}."),
    "mul": ("Then {q} gets enough to have {n} times as many.", "{p} ends up with {n} times as many as before."),
    "div": ("{p} shares them equally among {n} friends and keeps one share.",
            "{p} splits them into {n} equal groups and keeps one group."),
}
WORKING = {
    "add": "{name} gets {n} more: {a} + {n} = <<{a}+{n}={r}>>{r} {item}.",
    "sub": "{name} has {n} fewer: {a} - {n} = <<{a}-{n}={r}>>{r} {item}.",
    "mul": "{name} has {n} times as many: {a} * {n} = <<{a}*{n}={r}>>{r} {item}.",
    "div": "{name} keeps one of {n} equal shares: {a} / {n} = <<{a}/{n}={r}>>{r} {item}.",
}


def problem(rng: random.Random, steps: int, max_number: int, ops: tuple[str, ...]) -> dict:
    """One problem: ``question`` and a worked ``answer`` ending ``#### N``. Whole, non-negative results."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    pron = PRONOUN.get(name, "She")
    obj = "him" if pron == "He" else "her"
    start = rng.randint(1, max_number)
    opening = f"{name} has {start} {item}." if rng.random() < 0.5 else f"There are {start} {item} in {name}'s room."
    total, sentences, working = start, [opening], [f"{name} starts with {start} {item}."]
    for _ in range(steps):
        op = _feasible_op(rng, ops, total, max_number)
        n = _operand(rng, op, total, max_number)
        result = {"add": total + n, "sub": total - n, "mul": total * n, "div": total // n if op == "div" else 0}[op]
        sentences.append(rng.choice(STEP_TEXT[op]).format(p=pron, q=pron.lower(), o=obj, n=n))
        working.append(WORKING[op].format(name=name, n=n, a=total, r=result, item=item))
        total = result
    where = "now" if rng.random() < 0.5 else "in the end"
    sentences.append(f"How many {item} does {name} have {where}?")
    return {"question": " ".join(sentences), "answer": "\n".join(working) + f"\n#### {total}"}


def _feasible_op(rng: random.Random, ops: tuple[str, ...], total: int, max_number: int) -> str:
    allowed = [op for op in ops if op != "sub" or total >= 1]
    allowed = [op for op in allowed if op != "div" or _divisors(total, max_number)]
    allowed = [op for op in allowed if op != "mul" or total <= 10 * max_number]
    return rng.choice(allowed or ["add"])


def _divisors(total: int, max_number: int) -> list[int]:
    return [d for d in range(2, min(total, max_number) + 1) if total % d == 0]


def _operand(rng: random.Random, op: str, total: int, max_number: int) -> int:
    if op == "sub":
        return rng.randint(1, min(total, max_number))
    if op == "mul":
        return rng.randint(2, max(2, min(max_number, 5)))
    if op == "div":
        return rng.choice(_divisors(total, max_number))
    return rng.randint(1, max_number)


def split_of(question: str, test_share: float) -> str:
    """``test`` or ``train`` from the question's text alone, so one text never lands in both."""
    h = int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big") / 2**64
    return "test" if h < test_share else "train"


def generate(n_train: int, n_test: int, *, steps: int, max_number: int, ops: tuple[str, ...], seed: int,
             max_tries: int = 50) -> dict[str, list[dict]]:
    """``{"train": [...], "test": [...]}`` of distinct problems; DataError when the settings cannot yield that many."""
    if not 1 <= steps <= 4:
        raise DataError(f"--steps must be 1-4, got {steps}")
    if not 2 <= max_number <= MAX_NUMBER:
        raise DataError(f"--max-number must be 2-{MAX_NUMBER:,}, got {max_number}")
    bad = [op for op in ops if op not in OPS]
    if bad or not ops:
        raise DataError(f"--ops must be a comma-separated subset of {','.join(OPS)}, got {','.join(ops) or 'nothing'}")
    if n_train < 0 or n_test < 0 or n_train + n_test == 0:
        raise DataError(f"--train-size / --test-size must be >= 0 and not both 0, got {n_train} / {n_test}")
    rng = random.Random(seed)
    want = {"train": n_train, "test": n_test}
    share = n_test / (n_train + n_test)
    out: dict[str, list[dict]] = {"train": [], "test": []}
    seen: set[str] = set()
    budget = max_tries * (n_train + n_test)
    while any(len(out[s]) < want[s] for s in out) and budget > 0:
        budget -= 1
        p = problem(rng, steps, max_number, ops)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        s = split_of(p["question"], share)
        if len(out[s]) < want[s]:
            out[s].append(p)
    if any(len(out[s]) < want[s] for s in out):
        raise DataError(f"only {len(out['train'])} train / {len(out['test'])} test distinct problems with these settings "
                        f"(asked {n_train} / {n_test}): raise --max-number or --steps, or ask for fewer")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for train.jsonl, test.jsonl, settings.json")
    p.add_argument("--steps", type=int, default=2, help="operations per problem, 1-4 (default 2)")
    p.add_argument("--max-number", type=int, default=20, help="operands from 1..N (default 20)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {','.join(OPS)} (default all)")
    p.add_argument("--train-size", type=int, default=5000, help="train problems (default 5000)")
    p.add_argument("--test-size", type=int, default=1000, help="test problems (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    try:
        check_output_folder(args.out)
        data = generate(args.train_size, args.test_size, steps=args.steps, max_number=args.max_number, ops=ops,
                        seed=args.seed)
        settings = {"generator": PROG, "steps": args.steps, "max_number": args.max_number, "ops": list(ops),
                    "seed": args.seed, "train": len(data["train"]), "test": len(data["test"])}
        with output_set() as outs:
            for split, rows in data.items():
                path = os.path.join(args.out, f"{split}.jsonl")
                if not rows:  # an earlier run's split of this name is not this set's
                    outs.drop(path)
                    continue
                with open(outs.stage(path), "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            with open(outs.stage(os.path.join(args.out, "settings.json")), "w", encoding="utf-8") as f:
                f.write(json.dumps(settings, indent=1) + "\n")
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{PROG}: {settings['train']} train / {settings['test']} test problems -> {args.out} "
          f"(steps {args.steps}, numbers 1..{args.max_number}, ops {','.join(ops)}, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
