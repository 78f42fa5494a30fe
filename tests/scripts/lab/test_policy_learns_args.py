"""scripts/lab/policy_learns.py before any stage runs: bad values stop the command line at once (exit 2, one
clear message, also under DRY_RUN=1), and ``--reuse`` links only finished stages made with the same settings (never a
"done" marker beside a half-written stage). That a dry run writes nothing outside a temporary folder:
tests/scripts/lab/test_policy_learns.py::test_judge_placement_of_the_judge_run."""

from __future__ import annotations

import json
import os

import pytest

from scripts.lab import policy_learns, reuse
from scripts.workflows.stages import Stages

GPUS = "argument --gpus: GPU ids are non-negative integers, comma-separated, none empty (e.g. 0,1), got "


def _exit(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        policy_learns.main(argv)
    return e.value.code, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpus", "x"], GPUS + "'x'"),
        (["--gpus", "0,,1"], GPUS + "'0,,1'"),
        (["--gpus=-1"], GPUS + "'-1'"),
        (["--gpus", "0,1.5"], GPUS + "'0,1.5'"),
        (["--gpus", ""], GPUS + "''"),
        (["--kv-cache-gb", "inf"], "--kv-cache-gb must be a finite number > 0, got inf"),
        (["--kv-cache-gb", "nan"], "--kv-cache-gb must be a finite number > 0, got nan"),
        (["--kv-cache-gb", "0"], "--kv-cache-gb must be a finite number > 0, got 0.0"),
        (
            ["--arms", ""],
            "argument --arms: needs at least one arm of rule, judge, random, format, route, flaky_fallback, "
            "flaky_abstain, pairwise_ref, tournament, got ''",
        ),
        (["--arms", " , "], "argument --arms: needs at least one arm of"),
        (["--eval-kv-cache-gb", "inf"], "--eval-kv-cache-gb must be a finite number > 0, got inf"),
        (["--eval-gpu-mem", "1.5"], "--eval-gpu-mem must be a finite number > 0 and <= 1, got 1.5"),
        (["--sft-lr", "nan"], "--sft-lr must be a finite number > 0, got nan"),
        (["--arms", "rule,judge,judge"], "--arms: judge listed more than once in rule,judge,judge: list each once"),
        (["--arms", "rule,moon"], "--arms: unknown arm(s) moon; known: rule, judge, random, format, route, "),
        (["--seeds", "0,0"], "--seeds: 0 listed more than once in 0,0: list each once"),
        (["--seeds", "2,1,2,1"], "--seeds: 2, 1 listed more than once in 2,1,2,1: list each once"),
        (["--seeds", "0,-1"], "--arms and --seeds need at least one value each; seeds >= 0"),
        (["--instances", "0,0,0"], "--instances: 0 listed more than once in 0,0,0: list each once"),
    ],
)
def test_bad_values_stop_the_command_line(args, message, tmp_path, capsys, monkeypatch):
    """Each is refused when the arguments are read (a dry run too), not after the testbed and SFT stages."""
    monkeypatch.setenv("DRY_RUN", "1")
    code, line = _exit(["--out", str(tmp_path / "x"), *args], capsys)
    assert code == 2 and line.startswith("python -m scripts.lab.policy_learns: error: ") and message in line, line
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1, 2]\n", "report.json: not a report (a JSON object), got a list; move it away"),
        ('"text"\n', "report.json: not a report (a JSON object), got a str; move it away"),
        ("{not json\n", "report.json: not a report (Expecting property name enclosed in double quotes"),
    ],
)
def test_an_unreadable_report_stops_the_command_line(content, message, tmp_path, capsys):
    """The report adds to ``report.json``: one that is not a JSON object is an error now, not a traceback after
    the runs."""
    out = tmp_path / "pl"
    out.mkdir()
    (out / "report.json").write_text(content)
    code, line = _exit(["--out", str(out)], capsys)
    assert code == 2 and f"error: --out {out}: {out}/report.json: " in line and message in line, line


# ------------------------------------------------------------------------------------------------------- --reuse
def _experiment(src, stages: dict[str, str | None]) -> None:
    """A finished experiment's folder: ``.NAME.done`` for each stage, its product (a file at the given path) when
    the path is not None."""
    src.mkdir(parents=True, exist_ok=True)
    for name, product in stages.items():
        (src / f".{name}.done").write_text("1.0\n")
        if product is not None:
            (src / product).parent.mkdir(parents=True, exist_ok=True)
            (src / product).write_text(name)


SOURCE = {
    "testbed": "testbed/train.jsonl",
    "policy_data": "policy_data/train.parquet",
    "data": "data/pointwise_train.parquet",
    "sft_data": "data/sft_train.parquet",
    "sft": "sft/global_step_1/huggingface/config.json",
    "judge_model": "judge_model/config.json",
    "rule": "rule/x",  # a run: never linked
}


@pytest.mark.parametrize(
    "drop, here, linked, said",
    [
        # a clean folder: every stage but the run
        ({}, {}, ["data", "judge_model", "policy_data", "sft", "sft_data", "testbed"], []),
        # a torn testbed here (an interrupted attempt): replaced by the link, its marker copied
        (
            {},
            {"testbed/train.jsonl": "torn"},
            ["data", "judge_model", "policy_data", "sft", "sft_data", "testbed"],
            [
                "stage testbed: {out}/testbed is half-written (no .testbed.done here): replaced by a link to "
                "{src}/testbed"
            ],
        ),
        # a marker whose product is missing there: not copied, the stage made here
        (
            {"policy_data"},
            {},
            ["data", "judge_model", "sft", "sft_data", "testbed"],
            ["stage policy_data: marked done in {src}, but {src}/policy_data is missing: made here"],
        ),
        # sft_data's product missing: data (which holds it) is not linked either, so nothing is written into {src}
        (
            {"sft_data"},
            {},
            ["judge_model", "policy_data", "sft", "testbed"],
            [
                "stage data: made here, as {out}/data also holds a stage made or finished here",
                "stage sft_data: marked done in {src}, but {src}/data/sft_train.parquet is missing: made here",
            ],
        ),
        # a stage finished here is kept
        (
            {},
            {".testbed.done": "1.0", "testbed/train.jsonl": "mine"},
            ["data", "judge_model", "policy_data", "sft", "sft_data"],
            [],
        ),
    ],
)
def test_reuse_links_only_finished_stages(drop, here, linked, said, tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out"
    _experiment(src, {k: v for k, v in SOURCE.items() if k not in drop})
    for name in drop:  # marked done there, its product gone
        (src / f".{name}.done").write_text("1.0\n")
    for path, text in here.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    assert reuse.reuse(Stages(str(out)), str(src), policy_learns.ARMS) == linked
    lines = [line.removeprefix("[pipeline] ") for line in capsys.readouterr().out.splitlines()]
    assert [line for line in lines if line.startswith("stage ")] == [s.format(src=src, out=out) for s in said]
    assert sorted(p.name for p in out.iterdir() if p.is_symlink()) == sorted({SOURCE[n].split("/")[0] for n in linked})
    markers_before = {p[1:-5] for p in here if p.endswith(".done")}
    assert sorted(p.name[1:-5] for p in out.glob(".*.done")) == sorted(set(linked) | markers_before)
    for name in linked:  # every marker copied sits beside the source's own product
        assert (out / SOURCE[name]).read_text() == name
    assert (src / "testbed" / "train.jsonl").read_text() == "testbed"  # the source untouched


def _record(src, **changes) -> None:
    settings = reuse.stage_settings(policy_learns.parse_args(["--out", str(src)]), {"MODEL": "/models/m"})
    settings.update(changes)
    (src / reuse.SETTINGS_FILE).write_text(json.dumps(settings))


@pytest.mark.parametrize(
    "recorded, argv, message",
    [
        ({}, [], None),
        ({"policy_sft_rows": 8}, [], "policy_sft_rows: 8 there, 500 here"),
        ({}, ["--testbed-arg=--steps=3"], 'testbed_arg: [] there, ["--steps=3"] here'),
        ({"model": "/models/other"}, [], 'model: "/models/other" there, "/models/m" here'),
        (
            {"sft_lr": 1e-5, "eval_questions": 100},
            [],
            "eval_questions: 100 there, 500 here; sft_lr: 1e-05 there, 2e-05 here",
        ),
        ({}, ["--steps", "20", "--arms", "rule,route", "--seeds", "0,1", "--kv-cache-gb", "2"], None),  # runs' own
    ],
)
def test_reuse_refuses_other_settings(recorded, argv, message, tmp_path, capsys, monkeypatch):
    """--reuse compares the settings that made the linked stages with these and names each difference (exit 2)."""
    src = tmp_path / "src"
    _experiment(src, {"judge_model": "judge_model/config.json"})
    _record(src, **recorded)
    monkeypatch.setenv("MODEL", "/models/m")
    cfg = policy_learns.parse_args(["--out", str(tmp_path / "out"), *argv])
    problems = reuse.reuse_problems(str(src), cfg, os.environ)
    if message is None:
        assert problems == []
        return
    assert problems == [f"--reuse {src}: its stages were made with other settings: {message}"]
    code, line = _exit(["--out", str(tmp_path / "out"), "--reuse", str(src), *argv], capsys)
    assert code == 2 and line.endswith(f"error: --reuse {src}: its stages were made with other settings: {message}")


def test_an_experiment_records_its_stage_settings_once(tmp_path, capsys):
    """The attempt that starts a folder writes its record; a resume keeps it and says what differs."""
    out = tmp_path / "pl"
    first = policy_learns.parse_args(["--out", str(out)])
    reuse.record_settings(str(out), first, {})
    record = json.loads((out / reuse.SETTINGS_FILE).read_text())
    assert (record["policy_sft_rows"], record["testbed_arg"], record["model"]) == (500, [], "")
    again = policy_learns.parse_args(["--out", str(out), "--policy-sft-rows", "8"])
    reuse.record_settings(str(out), again, {})
    assert json.loads((out / reuse.SETTINGS_FILE).read_text()) == record
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            f"WARNING: {out} was started with other settings; its finished stages keep theirs: "
            "policy_sft_rows: 500 there, 8 here"
        )
    )


#: the stage settings a default command line records (MODEL=/m), in their order
RECORDED = {
    "testbed": "word_problems",
    "testbed_arg": [],
    "eval_questions": 500,
    "policy_sft_rows": 500,
    "task": "pointwise",
    "model_solutions": "base",
    "model_solution_questions": 2000,
    "sft": True,
    "sft_model": None,
    "sft_rows": 4000,
    "sft_epochs": 1,
    "sft_steps": 100,
    "sft_batch": 32,
    "sft_lr": 2e-05,
    "sft_override": [],
    "grpo_steps": 0,
    "pair_groups": "true",
    "max_prompt_length": 1280,
    "max_response_length": 128,
    "eval_pairs": 100,
    "skip_eval": False,
    "eval_before": True,
    "model": "/m",
}
JUDGE = ["--grpo-steps", "5", "--sft-override", "a=1", "--sft-override", "b=2", "--model-solutions", "none"]
JUDGE += ["--sft-lr", "1e-5", "--judge-task", "pairwise_ref", "--no-sft", "--eval-pairs", "7"]


@pytest.mark.parametrize(
    "argv, want",
    [
        ([], RECORDED),
        (
            ["--testbed-arg=--steps=3", *JUDGE, "x.y=1", "z=https://u:p@h/v"],
            {
                **RECORDED,
                "testbed_arg": ["--steps=3"],
                "task": "pairwise_ref",
                "model_solutions": None,
                "sft": False,
                "sft_lr": 1e-05,
                "sft_override": ["a=1", "b=2"],
                "grpo_steps": 5,
                "eval_pairs": 7,
                "judge_grpo_overrides": ["x.y=1", "z=https://***@h/v"],
            },
        ),
        (
            ["--testbed", "none", "--no-eval-before", "--skip-eval", "--policy-sft-rows", "0"],
            {
                **RECORDED,
                "testbed": "none",
                "policy_sft_rows": 0,
                "skip_eval": True,
                "eval_before": False,
                "gsm8k_dir": "/data/gsm8k",
            },
        ),
    ],
)
def test_the_stage_settings_record_is_pinned(argv, want, tmp_path):
    """``stage_settings.json`` of a command line, byte for byte: ``--reuse`` and the ledger compare the records of
    runs made at different times, so its keys, their order and their values stay the same for the same command."""
    out = tmp_path / "pl"
    cfg = policy_learns.parse_args(["--out", str(out), *argv])
    reuse.record_settings(str(out), cfg, {"MODEL": "/m", "GSM8K_DIR": "/data/gsm8k"})
    assert (out / reuse.SETTINGS_FILE).read_text() == json.dumps(want, indent=2) + "\n"
