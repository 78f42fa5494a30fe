"""Seeded grade-school word problems in GSM8K's own shape: a testbed a small policy can learn.

Writes ``train.jsonl``, ``test.jsonl`` and ``heldout.jsonl`` with GSM8K's fields (``question``, ``answer`` ending
``#### N``) plus ``story``, and ``settings.json``; point ``GSM8K_DIR`` at the folder and everything that reads GSM8K
works unchanged. Each problem is one story of ``data_prep.stories``; train and test share stories and no text;
``heldout.jsonl`` holds only the held-out stories. The same settings and seed give byte-identical files.

    python -m data_prep.word_problems --out data/word_problems                      # the default testbed
    python -m data_prep.word_problems --out data/wp1 --steps 1 --max-number 10 --ops add,sub --heldout-stories ''

Difficulty: ``--steps`` (operations chained, 1-4), ``--max-number`` (operands 1..N), ``--ops`` (``add``, ``sub``,
``mul``, ``div``; results stay whole and non-negative). ``--heldout-size`` needs held-out stories and they need it;
``--heldout-stories ''`` is none.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from functools import partial

from data_prep import stories
from data_prep.cli import cli, new_parser
from data_prep.files.errors import DataError
from data_prep.files.outputs import check_output_folder, output_set, write_jsonl, write_text
from data_prep.stories import STORIES

PROG = "data_prep.word_problems"
MAX_NUMBER = 1_000_000  # operands beyond this are no grade-school problem (and divisors would take long to list)
OPS = ("add", "sub", "mul", "div")
NAMES = tuple("Tom Anna Ben Maria Sam Lily Jack Emma Noah Mia Leo Zoe Omar Priya Chen Sara Ivan Nina Paul Rosa".split())
HE = {"Tom", "Ben", "Sam", "Jack", "Noah", "Leo", "Omar", "Chen", "Ivan", "Paul"}  # every other name: she
SPLITS = ("train", "test", "heldout")
HELDOUT_SIZE = 1000  # --heldout-size's default when there are held-out stories
# the worked solution's lines, the same for every story (the question's wording varies, the working does not)
WORKING = {
    "add": "{n} more: {a} + {n} = <<{a}+{n}={r}>>{r} {item}.",
    "sub": "{n} fewer: {a} - {n} = <<{a}-{n}={r}>>{r} {item}.",
    "mul": "{n} times as many: {a} * {n} = <<{a}*{n}={r}>>{r} {item}.",
    "div": "One of {n} equal shares: {a} / {n} = <<{a}/{n}={r}>>{r} {item}.",
}


def problem(rng: random.Random, steps: int, max_number: int, ops: tuple[str, ...], story: str = "collection") -> dict:
    """One problem of ``story`` (``data_prep.stories``): ``question``, a worked ``answer`` ending ``#### N`` and
    ``story``. Whole, non-negative results."""
    s = STORIES[story]
    name, item = rng.choice(NAMES), rng.choice(s.items)
    p, q, o, pos = ("He", "he", "him", "his") if name in HE else ("She", "she", "her", "her")
    f = {"name": name, "name_pos": f"{name}'s", "p": p, "q": q, "o": o, "pos": pos, "item": item}
    start = rng.randint(1, max_number)
    total, sentences, working = start, [rng.choice(s.opening).format(**f, n=start)], [f"Start: {start} {item}."]
    for k in range(1, steps + 1):
        op = _feasible_op(rng, ops, total, max_number)
        n = _operand(rng, op, total, max_number)
        result = {"add": total + n, "sub": total - n, "mul": total * n, "div": total // n if op == "div" else 0}[op]
        f.update(day=stories.DAYS[k], prev=stories.DAYS[k - 1])
        sentences.append(rng.choice(getattr(s, op)).format(**f, n=n, times=stories.times(n), part=stories.part(n)))
        working.append(WORKING[op].format(n=n, a=total, r=result, item=item))
        total = result
    sentences.append(rng.choice(s.question).format(**f))
    return {"question": " ".join(sentences), "answer": "\n".join(working) + f"\n#### {total}", "story": story}


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


def generate(
    n_train: int,
    n_test: int,
    *,
    steps: int,
    max_number: int,
    ops: tuple[str, ...],
    seed: int,
    n_heldout: int = 0,
    heldout: tuple[str, ...] = stories.HELDOUT,
    max_tries: int = 50,
) -> dict[str, list[dict]]:
    """``{"train": [...], "test": [...], "heldout": [...]}`` of distinct problems: train and test from the stories not
    in ``heldout``, heldout from those alone; DataError when the settings cannot yield that many."""
    if not 1 <= steps <= 4:
        raise DataError(f"--steps must be 1-4, got {steps}")
    if not 2 <= max_number <= MAX_NUMBER:
        raise DataError(f"--max-number must be 2-{MAX_NUMBER:,}, got {max_number}")
    bad = [op for op in ops if op not in OPS]
    if bad or not ops or len(set(ops)) != len(ops):  # a repeated op would be drawn more often than the others
        raise DataError(
            f"--ops must be a comma-separated subset of {','.join(OPS)}, each once, got {','.join(ops) or 'nothing'}"
        )
    if min(n_train, n_test, n_heldout) < 0 or n_train + n_test + n_heldout == 0:
        raise DataError(
            "--train-size / --test-size / --heldout-size must be >= 0 and not all 0, got "
            f"{n_train} / {n_test} / {n_heldout}"
        )
    twice = [x for i, x in enumerate(heldout) if x in heldout[:i]]
    if twice:  # a story named twice would be drawn twice as often as the others
        named = ",".join(dict.fromkeys(twice))
        raise DataError(f"--heldout-stories: {named} named more than once, got {','.join(heldout)}")
    unknown = [x for x in heldout if x not in STORIES]
    seen_stories = [x for x in STORIES if x not in heldout]
    if unknown or not seen_stories:
        raise DataError(f"--heldout-stories must name some, not all, of {','.join(STORIES)}; got {','.join(heldout)}")
    if n_heldout and not heldout:
        raise DataError(f"--heldout-size {n_heldout} needs --heldout-stories")
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {s: [] for s in SPLITS}
    seen: set[str] = set()

    def draw(want: dict[str, int], pool: list[str], split) -> None:
        budget = max_tries * sum(want.values())
        while any(len(out[s]) < want[s] for s in want) and budget > 0:
            budget -= 1
            p = problem(rng, steps, max_number, ops, rng.choice(pool))
            if p["question"] in seen:
                continue
            seen.add(p["question"])
            s = split(p["question"])
            if len(out[s]) < want[s]:
                out[s].append(p)

    share = n_test / (n_train + n_test) if n_train + n_test else 0.0
    draw({"train": n_train, "test": n_test}, seen_stories, lambda q: split_of(q, share))
    draw({"heldout": n_heldout}, list(heldout), lambda q: "heldout")
    want = {"train": n_train, "test": n_test, "heldout": n_heldout}
    if any(len(out[s]) < want[s] for s in SPLITS):
        got = " / ".join(f"{len(out[s])} {s}" for s in SPLITS)
        asked = " / ".join(str(want[s]) for s in SPLITS)
        raise DataError(
            f"only {got} distinct problems with these settings (asked {asked}): raise --max-number or "
            "--steps, or ask for fewer"
        )
    return out


def build_parser():
    p = new_parser(PROG, __doc__)
    p.add_argument("--out", required=True, help="folder for train.jsonl, test.jsonl, settings.json")
    p.add_argument("--steps", type=int, default=2, help="operations per problem, 1-4 (default 2)")
    p.add_argument("--max-number", type=int, default=20, help="operands from 1..N (default 20)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {','.join(OPS)} (default all)")
    p.add_argument("--train-size", type=int, default=5000, help="train problems (default 5000)")
    p.add_argument("--test-size", type=int, default=1000, help="test problems (default 1000)")
    size_help = f"problems of the held-out stories, heldout.jsonl (default {HELDOUT_SIZE}; 0, the default with no "
    size_help += "held-out stories, is an error with some, as is a size with none)"
    p.add_argument("--heldout-size", type=int, default=None, help=size_help)
    held = ",".join(stories.HELDOUT)
    held_help = f"stories kept out of train and test, comma-separated, of {','.join(stories.STORIES)} (default "
    held_help += f"{held}; empty = none)"
    p.add_argument("--heldout-stories", default=held, help=held_help)
    p.add_argument("--seed", type=int, default=0)
    return p


def run(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    check_output_folder(args.out)
    heldout = tuple(x.strip() for x in args.heldout_stories.split(",") if x.strip())
    if args.heldout_size == 0 and heldout:
        raise DataError(
            f"--heldout-size 0 with --heldout-stories {','.join(heldout)}: those stories would be kept out of "
            "train and test with none of their problems written; give a size > 0, or --heldout-stories '' for none"
        )
    n_heldout = (HELDOUT_SIZE if heldout else 0) if args.heldout_size is None else args.heldout_size
    shape = {"steps": args.steps, "max_number": args.max_number, "ops": ops, "seed": args.seed}
    data = generate(args.train_size, args.test_size, n_heldout=n_heldout, heldout=heldout, **shape)
    settings = {
        "generator": PROG,
        **shape,
        "ops": list(ops),  # JSON: keeps its place among the settings
        "stories": [x for x in STORIES if x not in heldout],
        "heldout_stories": list(heldout),
        **{s: len(data[s]) for s in SPLITS},
    }
    with output_set() as outs:
        for split, rows in data.items():
            path = os.path.join(args.out, f"{split}.jsonl")
            if rows:
                write_jsonl(path, rows)
            else:  # an earlier run's split of this name is not this set's
                outs.drop(path)
        write_text(os.path.join(args.out, "settings.json"), json.dumps(settings, indent=1))
    print(
        f"{PROG}: {settings['train']} train / {settings['test']} test / {settings['heldout']} held-out problems "
        f"-> {args.out} (steps {args.steps}, numbers 1..{args.max_number}, ops {','.join(ops)}, seed {args.seed})"
    )


main = partial(cli, run)  # exit status: see data_prep.cli.cli


if __name__ == "__main__":
    sys.exit(main())
