"""scripts.report.render.read_metrics (verl's file logger lines) and scripts.report.plot_metrics: PNGs
written and non-empty, absent panels skipped (never a crash), verl's wrapper read, the training hooks'
judge-health / position / identical-group panels."""

from __future__ import annotations

import json
import os
import sys

import pytest

import scripts
from data_prep.files.errors import DataError
from scripts.report import plot_metrics
from scripts.report.render import read_metrics

ROOT = scripts.ROOT
FIX = os.path.join(ROOT, "tests", "fixtures", "eval")

ALL_PANELS = [
    "reward",
    "judge_health",
    "position",
    "identical_reward_groups",
    "validation",
    "judge_rule_agreement",
    "judge_failures",
    "judge_scores",
    "response_length",
    "step_time",
]


def _png(path) -> bool:
    with open(path, "rb") as f:
        head = f.read(8)
    return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


def _write(path, records, wrap=True):
    with open(path, "w") as f:
        for step, data in records:
            f.write(json.dumps({"step": step, "data": data} if wrap else {"step": step, **data}) + "\n")
    return str(path)


# (metrics file lines, read_metrics rows)
READ_METRICS = [
    (
        [{"step": 1, "data": {"a": 1.5}}, {"step": 2, "data": {"a": 2, "b/c": "x"}}],
        [{"a": 1.5, "step": 1}, {"a": 2, "b/c": "x", "step": 2}],
    ),
    ([{"step": 3, "a": 1}], [{"step": 3, "a": 1}]),  # a flat line
    ([{"data": {"training/global_step": 7, "a": 1}}], [{"training/global_step": 7, "a": 1, "step": 7}]),
    ([{"data": {"a": 1}}, {"data": {"a": 2}}], [{"a": 1, "step": 1}, {"a": 2, "step": 2}]),  # no step: position
    ([{"step": 9, "data": {"step": 5}}], [{"step": 5}]),  # the data's own step is kept
    ([], []),
]


@pytest.mark.parametrize("lines,rows", READ_METRICS)
def test_read_metrics(tmp_path, lines, rows):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert read_metrics(str(path)) == rows


def test_read_metrics_missing_file_and_bad_lines(tmp_path):
    assert read_metrics(str(tmp_path / "none.jsonl")) == []
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "data": {"a": 1}}\n[1]\n{"step": 2, "da\n')
    with pytest.raises(DataError) as e:
        read_metrics(str(path))
    assert str(e.value) == f"{path}: line 2: expected a JSON object, got list"
    bad = []
    assert read_metrics(str(path), on_bad=lambda n, problem: bad.append(n)) == [{"a": 1, "step": 1}]
    assert bad == [2, 3]


def test_fixture_runs_draw_every_panel(tmp_path):
    out = tmp_path / "figs"
    rc = plot_metrics.main(
        [
            os.path.join(FIX, "metrics_rule.jsonl"),
            os.path.join(FIX, "metrics_judge.jsonl"),
            "--labels",
            "rule",
            "judge",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    drawn = [p for p in ALL_PANELS if p != "position"]  # GSM8K runs: no pairwise judge, no position keys
    assert [d["panel"] for d in summary["panels_drawn"]] == drawn
    assert summary["panels_skipped"] == [
        {"panel": "position", "looked_for": "position/verdict_a_share, position/label_a_share"}
    ]
    assert [(r["label"], r["steps"], r["last_step"]) for r in summary["runs"]] == [("rule", 51, 50), ("judge", 51, 50)]
    assert summary["last_values"]["rule"]["reward/judge_error/mean"] is None  # the rule run has no judge keys
    assert summary["last_values"]["rule"]["judge_health/error_rate"] is None
    for name in drawn + ["overview"]:
        assert _png(out / f"{name}.png"), name
    assert not (out / "position.png").exists()
    time_keys = next(d for d in summary["panels_drawn"] if d["panel"] == "step_time")["keys"]
    assert time_keys == [
        "timing_s/gen",
        "timing_s/reward",
        "timing_s/old_log_prob",
        "timing_s/ref",
        "timing_s/update_actor",
        "timing_s/step",
    ]


# (records, expected drawn panels): absent keys skip the panel, they never crash
CASES = [
    ("reward_only", [(1, {"critic/score/mean": 0.1}), (2, {"critic/score/mean": 0.3})], ["reward"]),
    (
        "timing_subset",
        [(1, {"timing_s/gen": 3.0, "timing_s/update_actor": 2.0}), (2, {"timing_s/gen": 3.5})],
        ["step_time"],
    ),
    (
        "judge_keys_any_prefix",
        [
            (
                1,
                {
                    "judge_error": 0.1,
                    "val-aux/openai/gsm8k/judge_parse_fail/mean@1": 0.2,
                    "reward/judge_error/std": 0.3,
                    "response_length/mean": 100,
                },
            )
        ],
        ["judge_failures", "response_length"],
    ),
    (
        "agreement",
        [(1, {"reward/judge_rule_agree/mean": 0.8}), (2, {"judge_rule_agreement": 0.9})],
        ["judge_rule_agreement"],
    ),
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
    assert steps == [
        (0, {"val-core/x/acc/mean@1": 0.2}),
        (1, {"critic/score/mean": 0.1, "timing_s/gen": 2.0}),
        (3, {"training/global_step": 3.0, "critic/score/mean": 0.4}),
    ]
    assert (
        capsys.readouterr().err
        == f"warning: {path}: line 4: invalid JSON: Expecting ',' delimiter (column 35), skipped\n"
    )


def test_segment_key_matching():
    keys = [
        "judge_error",
        "reward/judge_error/mean",
        "reward/judge_error/max",
        "val-aux/openai/gsm8k/judge_error/mean@4",
        "x/judge_errors",
        "judge_error/std@2",
        "reward/judge_parse_fail",
    ]
    assert plot_metrics.segment_keys(keys, ("judge_error", "judge_parse_fail")) == [
        "judge_error",
        "reward/judge_error/mean",
        "reward/judge_parse_fail",
        "val-aux/openai/gsm8k/judge_error/mean@4",
    ]


BAD = [
    (lambda d: [str(d / "missing.jsonl"), "--out", str(d / "o")], "metrics file not found"),
    (
        lambda d: [_write(d / "a.jsonl", [(1, {"critic/score/mean": 1})]), "--labels", "x", "y", "--out", str(d / "o")],
        "2 labels for 1 runs",
    ),
    (lambda d: [(d / "e.jsonl").write_text("\n") and str(d / "e.jsonl"), "--out", str(d / "o")], "no numeric metrics"),
    (
        lambda d: [_write(d / "b.jsonl", [(1, {"critic/score/mean": 1})]), "--smooth", "0", "--out", str(d / "o")],
        "--smooth must be >= 1",
    ),
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
    assert s["last_values"] == {
        "a": {"critic/score/mean": 0.0, "response_length/mean": None},
        "b": {"critic/score/mean": None, "response_length/mean": 105.0},
    }
    assert plot_metrics._smooth([0.0, 1.0, 0.0, 1.0], 2) == [0.0, 0.5, 0.5, 0.5]


# ----------------------------------------------------------------------------- training-hook panels
HEALTH = os.path.join(FIX, "metrics_health.jsonl")
JUDGE_HEALTH = [
    "judge_health/error_rate",
    "judge_health/parse_fail_rate",
    "judge_health/fallback_rate",
    "judge_health/agree_rule",
]
POSITION = ["position/verdict_a_share", "position/label_a_share"]
IDENTICAL = ["grpo/identical_reward_groups"]
LAST = {  # step 4 of metrics_health.jsonl
    "critic/score/mean": 0.875,
    "timing_s/step": 14.0,
    "reward/judge_error/mean": 0.0,
    "reward/judge_parse_fail/mean": 0.0,
    "judge_health/error_rate": 0.0,
    "judge_health/parse_fail_rate": 0.0,
    "judge_health/fallback_rate": 0.0,
    "judge_health/agree_rule": 0.875,
    "position/verdict_a_share": 0.5,
    "position/label_a_share": 0.5,
    "grpo/identical_reward_groups": 0.25,
}

# (id, keys kept from metrics_health.jsonl, [(panel drawn, its keys)] in drawing order)
HOOK_CASES = [
    (
        "every_key",
        None,
        [
            ("reward", ["critic/score/mean"]),
            ("judge_health", JUDGE_HEALTH),
            ("position", POSITION),
            ("identical_reward_groups", IDENTICAL),
            ("judge_failures", ["reward/judge_error/mean", "reward/judge_parse_fail/mean"]),
            ("step_time", ["timing_s/step"]),
        ],
    ),
    (
        "judge_health_only",
        JUDGE_HEALTH + ["judge_health/skipped_rate", "judge_health/answered_rate", "judge_health/score_mean"],
        [("judge_health", JUDGE_HEALTH)],
    ),
    ("error_rate_alone", ["judge_health/error_rate"], [("judge_health", ["judge_health/error_rate"])]),
    (
        "fallback_and_agreement",
        ["judge_health/agree_rule", "judge_health/fallback_rate"],
        [("judge_health", ["judge_health/fallback_rate", "judge_health/agree_rule"])],
    ),
    (
        "health_keys_without_a_panel",
        ["judge_health/skipped_rate", "judge_health/answered_rate", "judge_health/score_mean"],
        [],
    ),
    ("position_only", POSITION, [("position", POSITION)]),
    ("verdict_share_alone", ["position/verdict_a_share"], [("position", ["position/verdict_a_share"])]),
    ("identical_groups_only", IDENTICAL, [("identical_reward_groups", IDENTICAL)]),
    (
        "reward_and_step_time",
        ["critic/score/mean", "timing_s/step"],
        [("reward", ["critic/score/mean"]), ("step_time", ["timing_s/step"])],
    ),
]


@pytest.mark.parametrize("name,keep,drawn", HOOK_CASES, ids=[c[0] for c in HOOK_CASES])
def test_training_hook_panels_drawn_only_when_their_keys_are_present(tmp_path, capsys, name, keep, drawn):
    with open(HEALTH) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    assert [r["step"] for r in recs] == [1, 2, 3, 4]
    run = _write(
        tmp_path / "run.jsonl",
        [(r["step"], {k: v for k, v in r["data"].items() if keep is None or k in keep}) for r in recs],
    )
    assert plot_metrics.main([run, "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [(d["panel"], d["keys"]) for d in summary["panels_drawn"]] == drawn
    assert [s["panel"] for s in summary["panels_skipped"]] == [p for p in ALL_PANELS if p not in dict(drawn)]
    used = [k for _p, keys in drawn for k in keys]
    assert summary["last_values"] == {"run": {k: LAST[k] for k in sorted(used)}}
    err = capsys.readouterr().err
    for p in ("judge_health", "position", "identical_reward_groups"):
        assert (f"skipped panel '{p}'" in err) == (p not in dict(drawn)), p
        assert (tmp_path / "o" / f"{p}.png").exists() == (p in dict(drawn)), p
    for p, _keys in drawn:
        assert _png(tmp_path / "o" / f"{p}.png"), p


# (panel, y-axis limits, legend labels) of one run with every training-hook key
HOOK_LEGENDS = [
    ("judge_health", (-0.03, 1.03), ["error_rate", "parse_fail_rate", "fallback_rate", "agree_rule"]),
    ("position", (-0.03, 1.03), ["verdict_a_share", "label_a_share"]),
    ("identical_reward_groups", (-0.03, 1.03), ["identical_reward_groups"]),
]


@pytest.mark.parametrize("panel,ylim,labels", HOOK_LEGENDS, ids=[c[0] for c in HOOK_LEGENDS])
def test_training_hook_panel_axes_and_legend(panel, ylim, labels):
    steps = plot_metrics.load_run(HEALTH)
    keys = {k for _s, m in steps for k in m}
    spec = next(s for s in plot_metrics.panel_specs(keys) if s["name"] == panel)
    plt = plot_metrics.pyplot()
    fig, ax = plt.subplots()
    try:
        assert plot_metrics.draw_panel(ax, spec, [("run", steps)], smooth=1) == len(labels)
        assert ax.get_ylim() == ylim
        assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
        assert [list(line.get_ydata()) for line in ax.get_lines()] == [[m[k] for _s, m in steps] for k in spec["keys"]]
    finally:
        plt.close(fig)
