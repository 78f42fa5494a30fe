"""plot_metrics: PNGs written and non-empty, absent panels skipped (never a crash), verl's wrapper read."""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "eval")
if os.path.join(ROOT, "scripts") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))

import plot_metrics  # noqa: E402

ALL_PANELS = ["reward", "validation", "judge_rule_agreement", "judge_failures", "judge_scores", "response_length", "step_time"]


def _png(path) -> bool:
    with open(path, "rb") as f:
        head = f.read(8)
    return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


def _write(path, records, wrap=True):
    with open(path, "w") as f:
        for step, data in records:
            f.write(json.dumps({"step": step, "data": data} if wrap else {"step": step, **data}) + "\n")
    return str(path)


def test_fixture_runs_draw_every_panel(tmp_path):
    out = tmp_path / "figs"
    rc = plot_metrics.main([os.path.join(FIX, "metrics_rule.jsonl"), os.path.join(FIX, "metrics_judge.jsonl"),
                            "--labels", "rule", "judge", "--out", str(out)])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [d["panel"] for d in summary["panels_drawn"]] == ALL_PANELS and summary["panels_skipped"] == []
    assert [(r["label"], r["steps"], r["last_step"]) for r in summary["runs"]] == [("rule", 51, 50), ("judge", 51, 50)]
    assert summary["last_values"]["rule"]["reward/judge_error/mean"] is None  # the rule run has no judge keys
    for name in ALL_PANELS + ["overview"]:
        assert _png(out / f"{name}.png"), name
    time_keys = next(d for d in summary["panels_drawn"] if d["panel"] == "step_time")["keys"]
    assert time_keys == ["timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/ref",
                         "timing_s/update_actor", "timing_s/step"]


# (records, expected drawn panels): absent keys skip the panel, they never crash
CASES = [
    ("reward_only", [(1, {"critic/score/mean": 0.1}), (2, {"critic/score/mean": 0.3})], ["reward"]),
    ("timing_subset", [(1, {"timing_s/gen": 3.0, "timing_s/update_actor": 2.0}), (2, {"timing_s/gen": 3.5})], ["step_time"]),
    ("judge_keys_any_prefix", [(1, {"judge_error": 0.1, "val-aux/openai/gsm8k/judge_parse_fail/mean@1": 0.2,
                                    "reward/judge_error/std": 0.3, "response_length/mean": 100})],
     ["judge_failures", "response_length"]),
    ("agreement", [(1, {"reward/judge_rule_agree/mean": 0.8}), (2, {"judge_rule_agreement": 0.9})], ["judge_rule_agreement"]),
    ("nothing_known", [(1, {"actor/entropy": 1.0})], []),
]


@pytest.mark.parametrize("name,records,drawn", CASES, ids=[c[0] for c in CASES])
def test_panels_skip_absent_keys(tmp_path, capsys, name, records, drawn):
    run = _write(tmp_path / "run.jsonl", records)
    assert plot_metrics.main([run, "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [d["panel"] for d in summary["panels_drawn"]] == drawn
    skipped = [s["panel"] for s in summary["panels_skipped"]]
    assert skipped == [p for p in ALL_PANELS if p not in drawn]
    err = capsys.readouterr().err
    for p in skipped:
        assert f"skipped panel '{p}'" in err
    for p in drawn:
        assert _png(tmp_path / "o" / f"{p}.png")
    assert (tmp_path / "o" / "overview.png").exists() == bool(drawn)


def test_flat_records_wrapper_merge_and_malformed_lines(tmp_path, capsys):
    path = tmp_path / "flat.jsonl"
    lines = [
        json.dumps({"step": 0, "val-core/x/acc/mean@1": 0.2}),
        json.dumps({"step": 1, "critic/score/mean": 0.1, "note": "text is ignored"}),
        json.dumps({"step": 1, "timing_s/gen": 2.0}),  # same step: merged
        '{"step": 2, "critic/score/mean": 0.',  # truncated last line of a run still being written
        json.dumps({"data": {"training/global_step": 3, "critic/score/mean": 0.4}}),  # step from the data
    ]
    path.write_text("\n".join(lines) + "\n")
    steps = plot_metrics.load_run(str(path), warn=lambda m: print(m, file=sys.stderr))
    assert steps == [(0, {"val-core/x/acc/mean@1": 0.2}), (1, {"critic/score/mean": 0.1, "timing_s/gen": 2.0}),
                     (3, {"training/global_step": 3.0, "critic/score/mean": 0.4})]
    assert "line 4: not JSON" in capsys.readouterr().err


def test_segment_key_matching():
    keys = ["judge_error", "reward/judge_error/mean", "reward/judge_error/max", "val-aux/openai/gsm8k/judge_error/mean@4",
            "x/judge_errors", "judge_error/std@2", "reward/judge_parse_fail"]
    assert plot_metrics.segment_keys(keys, ("judge_error", "judge_parse_fail")) == [
        "judge_error", "reward/judge_error/mean", "reward/judge_parse_fail", "val-aux/openai/gsm8k/judge_error/mean@4"]


BAD = [
    (lambda d: [str(d / "missing.jsonl"), "--out", str(d / "o")], "metrics file not found"),
    (lambda d: [_write(d / "a.jsonl", [(1, {"critic/score/mean": 1})]), "--labels", "x", "y", "--out", str(d / "o")],
     "2 labels for 1 runs"),
    (lambda d: [(d / "e.jsonl").write_text("\n") and str(d / "e.jsonl"), "--out", str(d / "o")], "no numeric metrics"),
    (lambda d: [_write(d / "b.jsonl", [(1, {"critic/score/mean": 1})]), "--smooth", "0", "--out", str(d / "o")],
     "--smooth must be >= 1"),
]


@pytest.mark.parametrize("make,message", BAD, ids=["missing", "labels", "empty", "smooth"])
def test_bad_input(tmp_path, capsys, make, message):
    assert plot_metrics.main(make(tmp_path)) == 2
    assert message in capsys.readouterr().err


def test_smoothing_and_overlay_of_partial_runs(tmp_path):
    a = _write(tmp_path / "a.jsonl", [(s, {"critic/score/mean": float(s % 2)}) for s in range(1, 11)])
    b = _write(tmp_path / "b.jsonl", [(s, {"response_length/mean": 100.0 + s}) for s in range(1, 6)], wrap=False)
    assert plot_metrics.main([a, b, "--smooth", "2", "--out", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [d["panel"] for d in s["panels_drawn"]] == ["reward", "response_length"]
    assert s["last_values"] == {"a": {"critic/score/mean": 0.0, "response_length/mean": None},
                                "b": {"critic/score/mean": None, "response_length/mean": 105.0}}
    assert plot_metrics._smooth([0.0, 1.0, 0.0, 1.0], 2) == [0.0, 0.5, 0.5, 0.5]
