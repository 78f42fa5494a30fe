"""scripts.eval.judge asks the verdict kind, never its name: a made-up kind (a copy of POINTWISE or PAIRWISE under
another name, registered here only) gets the same report.md as the kind it copies, and ``--pairs`` follows ``paired``.
"""

from __future__ import annotations

import dataclasses
import json
import types

import pytest

from reward_fns import verdicts
from scripts.eval import judge as eval_judge
from scripts.eval.cli import InputError
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.fixtures.eval.make_fixtures import pairwise_rows, pointwise_row, write_parquet

GRADED = dataclasses.replace(verdicts.POINTWISE, name="graded")
RANKED = dataclasses.replace(verdicts.PAIRWISE, name="ranked")
FAST = ["--max-retries", "1", "--timeout", "10", "--no-progress"]


def report_md(task: str, rows: list[dict], labels: list, replies: list[str]) -> str:
    results = [
        types.SimpleNamespace(ok=True, text=t, finish_reason="stop", cached=True, latency_s=0.0) for t in replies
    ]
    _, body = eval_judge.evaluate(task, rows, labels, results)
    report = {"task": task, "data": "/d.parquet", "judge": {"model": "m", "endpoint": "http://e"}, "wall_s": 1.0}
    return eval_judge.render_md({**report, **body})


# labels 0 and 4 (verification): the accept/reject counts and the confusion matrix; two orders of one pair: none of
# the pairs of both orders compared, so the caveat
CASES = {
    "pointwise copy": (
        GRADED,
        "pointwise",
        [4, 0, 4],
        ["<think>x</think><score>4</score>", "<think>x</think><score>3</score>", "no verdict"],
        ["Verification (labels 0 and 4; accept = score >= 3): tp 1, fp 1, tn 0, fn 0, none 1", "## Confusion matrix"],
    ),
    "pairwise copy": (
        RANKED,
        "pairwise",
        ["A", "B"],
        ["<think>x</think><better>A</better>", "<think>x</think><better>B</better>"],
        ["No pair appears in both orders (extra_info.pair_id)"],
    ),
}


@pytest.mark.parametrize("kind, original, labels, replies, expected", CASES.values(), ids=CASES.keys())
def test_a_copied_kind_gets_the_report_of_its_original(monkeypatch, kind, original, labels, replies, expected):
    monkeypatch.setattr(verdicts, "KINDS", {**verdicts.KINDS, kind.name: kind})
    rows = [{"prompt": [{"role": "user", "content": f"q{i}"}], "data_source": "s"} for i in range(len(labels))]
    copy, orig = report_md(kind.name, rows, labels, replies), report_md(original, rows, labels, replies)
    title = f"# Judge evaluation: {original}"
    assert copy == orig.replace(title, f"# Judge evaluation: {kind.name}", 1) and orig.startswith(title)
    assert [e in copy for e in expected] == [True] * len(expected)


def test_pairs_follows_paired_not_the_name(monkeypatch, tmp_path):
    """--pairs draws pairs of a paired kind of any name and refuses an unpaired one (auto-detected: each copy is
    registered ahead of the kind it copies)."""
    pairs = write_parquet(
        pairwise_rows("p1", "Q?", "good", "bad", "s", marker="p1") + pairwise_rows("p2", "Q?", "good", "bad", "s"),
        str(tmp_path / "pairs.parquet"),
    )
    points = write_parquet([pointwise_row("q", "r", 4)], str(tmp_path / "pt.parquet"))
    monkeypatch.setattr(verdicts, "KINDS", {"ranked": RANKED, "graded": GRADED, **verdicts.KINDS})
    with FakeOpenAIServer(lambda b: "<think>x</think><better>A</better>") as srv:
        argv = ["--base-url", srv.base_url, "--model", "m", "--pairs", "1", *FAST]
        assert eval_judge.main(["--data", pairs, "--out", str(tmp_path / "o"), *argv]) == 0
        with pytest.raises(InputError, match="--pairs only applies to pairwise data"):
            eval_judge._run(["--data", points, "--out", str(tmp_path / "o2"), *argv])
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert (report["task"], report["overall"]["n"], report["overall"]["pairs_both_orders"]) == ("ranked", 2, 1)
