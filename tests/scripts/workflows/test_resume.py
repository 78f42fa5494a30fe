"""Resuming a workflow (scripts/workflows/stages.py): a stage started in the background (``stage(...,
background=True)``) runs beside the next stage and is joined before any stage after that one, whether that stage
runs or is skipped as done; a stage marked done whose output is gone is made again.

The order is read from what the stages record, never from the clock: the background stage blocks until the main
thread either waits for it (``Stages.join``) or starts another stage's work, so a stage that starts before the
background stage is joined always shows it still unfinished.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading

import pytest

import scripts
from scripts.workflows import pipeline, stages
from scripts.workflows.stages import Stages
from tests.scripts.workflows.test_pipeline import FAKE, fake_tree, needs_model


@pytest.fixture()
def on_join(monkeypatch):
    """A list of functions, each called with a background job's name when the main thread joins it."""
    hooks = []
    join = Stages.join

    def joining(job: dict) -> None:
        for hook in hooks:
            hook(job["name"])
        join(job)

    monkeypatch.setattr(Stages, "join", staticmethod(joining))
    return hooks


# stage order: '*' marks a background stage. done: stages marked done before the run (their output there too);
# gone: of those, the ones whose output was removed since. Events: 'X' a stage's work starts, 'X end' the background
# stage's work ends (and which background stages had ended when it started), 'skip X' the stage is skipped as done.
@pytest.mark.parametrize(
    "order, done, gone, events",
    [
        ("bg* a b c", "", "", ["a", "bg end", "b", "c"]),
        ("bg* a b c", "a", "", ["skip a", "bg end", "b", "c"]),  # resumed after a: bg joined before b
        ("bg* a b c", "a b", "", ["skip a", "bg end", "skip b", "c"]),  # before b, though b is skipped
        ("bg* a b c", "a b c", "", ["skip a", "bg end", "skip b", "skip c"]),
        ("bg* a b c", "bg", "", ["skip bg", "a", "b", "c"]),
        ("bg* a b c", "bg a b", "bg", ["skip a", "bg end", "skip b", "c"]),  # bg's output gone: made again
        ("bg* a b c", "bg a b", "a", ["skip bg", "a", "skip b", "c"]),  # a's folder gone: made again
        # a background stage after the one bg ran beside starts once bg is joined
        ("bg* a bg2* b", "a", "", ["skip a", "bg end", "b", "bg2 end (started after bg ended)"]),
        ("bg* a bg2* b", "", "", ["a", "bg end", "b", "bg2 end (started after bg ended)"]),
    ],
)
def test_background_stage_is_joined_before_the_stage_after_its_company(
    order, done, gone, events, tmp_path, monkeypatch, on_join
):
    flow = Stages(str(tmp_path), quiet=True)
    for name in done.split():
        (tmp_path / f".{name}.done").write_text("1.0\n")
        if name not in gone.split():
            (tmp_path / name).mkdir()
    seen: list[str] = []
    skipped = re.compile(r"stage (\S+) skipped \(")
    monkeypatch.setattr(stages, "say", lambda msg: seen.extend(f"skip {m}" for m in skipped.findall(msg)))
    ended: list[str] = []
    held: dict[str, threading.Event] = {}  # a background stage's work ends once this is set
    on_join.append(lambda name: held[name].set())

    def work(name: str, background: bool):
        if background:  # ends once the main thread waits for it or starts a stage's work
            held[name] = threading.Event()

        def fn() -> None:
            os.makedirs(flow.path(name))
            if background:
                before = ", ".join(ended)  # the background stages that ended before this one started
                assert held[name].wait(timeout=60), "never released"
                seen.append(f"{name} end" + (f" (started after {before} ended)" if before else ""))
                ended.append(name)
            else:
                seen.append(name)
                for event in list(held.values()):
                    event.set()

        return fn

    def workflow() -> None:
        for spec in order.split():
            name = spec.rstrip("*")
            flow.stage(name, flow.path(name), work(name, spec.endswith("*")), background=spec.endswith("*"))
        flow.wait_background()

    flow.guarded(workflow)
    assert seen == events
    assert sorted(p.name for p in tmp_path.glob(".*.done")) == sorted(f".{s.rstrip('*')}.done" for s in order.split())


# The judge's stages with the stand-in interpreter: each command's wrapper records its stage and the stages marked
# done when it starts; the samples command (the background stage beside stage data) waits until the main thread
# joins it or starts another command.
RECORDER = """
import json, os, sys, time
args = sys.argv[1:]
out, flag = os.environ["REC_OUT"], os.environ["REC_RELEASE"]
mod = args[1] if args[:1] == ["-m"] else ""
stage = {"data_prep.gsm8k": "policy_data", "scripts.eval.gsm8k": "samples", "data_prep.judge_sft": "sft_data"}.get(
    mod, "sft_data" if "--candidates" in args else "data" if mod == "data_prep.gsm8k_verify" else mod
)
done = sorted(f[1:-5] for f in os.listdir(out) if f.startswith(".") and f.endswith(".done"))
with open(os.environ["REC_LOG"], "a") as f:
    f.write(json.dumps([stage, mod, done]) + "\\n")
if stage == "samples":
    end = time.time() + 120
    while not os.path.exists(flag) and time.time() < end:
        time.sleep(0.02)
elif stage != "policy_data":  # a stage after samples started
    open(flag, "a").close()
os.execv(sys.executable, [sys.executable, os.environ["REC_FAKE"], *args])
"""

STAGES = ("data", "policy_data", "samples", "sft_data")
#: what each stage leaves in the run folder (its output), removed in the rows that resume without it
OUTPUT = {"samples": "samples", "data": "data", "sft_data": os.path.join("data", "sft_train.parquet")}


JUDGE_ARGV = ["--model-solutions", "base", "--model-solution-questions", "3", "--no-sft", "--grpo-steps", "0"]
JUDGE_ARGV += ["--skip-eval", "--quiet"]


def judge(folder, tmp, log: str, env: dict) -> tuple[list, str | None]:
    """The judge's stages in ``folder`` through the recorder (its log and release flag in ``tmp``): the commands
    recorded, and the failure (None: none)."""
    py, release = tmp / "python_rec", tmp / f"{log}.released"
    if not py.exists():
        py.write_text(f"#!{sys.executable}\n{RECORDER}")
        py.chmod(0o755)
    rec = dict(REC_OUT=str(folder), REC_RELEASE=str(release), REC_LOG=str(tmp / log))
    flow = Stages(str(folder), dict(env, PYTHONPATH=scripts.ROOT, REC_FAKE=FAKE, **rec), str(py), quiet=True)
    args = pipeline.parse_args(["judge", "--out", str(folder), *JUDGE_ARGV])
    join = Stages.join

    def joining(job: dict) -> None:  # the main thread waits for samples: it may end
        release.touch()
        join(job)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Stages, "join", staticmethod(joining))
        try:
            flow.guarded(lambda: pipeline.judge(flow, args))
            failure = None
        except SystemExit as e:
            failure = str(e.code)
    return [json.loads(line) for line in open(tmp / log)] if (tmp / log).exists() else [], failure


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A whole judge run, made once for the rows that resume a copy of it: (its folder, the environment)."""
    tmp, env = fake_tree(tmp_path_factory.mktemp("judged"))
    full = tmp / "full"
    first, failure = judge(full, tmp, "first.jsonl", env)  # samples beside data, both done before sft_data
    assert failure is None and sorted(r[:2] if r[0] == "samples" else r for r in first) == [
        ["data", "data_prep.gsm8k_verify", ["policy_data"]],  # samples cannot end before this command starts
        ["policy_data", "data_prep.gsm8k", []],
        ["samples", "scripts.eval.gsm8k"],
        ["sft_data", "data_prep.gsm8k_verify", ["data", "policy_data", "samples"]],
        ["sft_data", "data_prep.judge_sft", ["data", "policy_data", "samples"]],
    ]
    return full, env


@needs_model
@pytest.mark.parametrize(
    "name, markers, removed, commands",
    [
        (  # interrupted while samples ran, after data was done: samples is joined before sft_data starts
            "resume with data done",
            ["policy_data", "data"],
            ["samples", "data/sft_train.parquet", "data/model_solutions"],
            [
                ["samples", "scripts.eval.gsm8k", ["data", "policy_data"]],
                ["sft_data", "data_prep.gsm8k_verify", ["data", "policy_data", "samples"]],
                ["sft_data", "data_prep.judge_sft", ["data", "policy_data", "samples"]],
            ],
        ),
        pytest.param(  # samples marked done, its folder removed: made again, in the background, joined before sft_data
            "samples output gone",
            ["policy_data", "data", "samples"],
            ["samples", "data/sft_train.parquet", "data/model_solutions"],
            [
                ["samples", "scripts.eval.gsm8k", ["data", "policy_data"]],
                ["sft_data", "data_prep.gsm8k_verify", ["data", "policy_data", "samples"]],
                ["sft_data", "data_prep.judge_sft", ["data", "policy_data", "samples"]],
            ],
            marks=pytest.mark.slow,  # the same join as "resume with data done", from a marked stage
        ),
        pytest.param(  # every stage marked done, the data folder removed: data and sft_data (its file in it) remade
            "data folder gone",
            ["policy_data", "data", "samples", "sft_data"],
            ["data"],
            [
                ["data", "data_prep.gsm8k_verify", ["policy_data", "samples", "sft_data"]],
                ["sft_data", "data_prep.gsm8k_verify", ["data", "policy_data", "samples"]],
                ["sft_data", "data_prep.judge_sft", ["data", "policy_data", "samples"]],
            ],
            marks=pytest.mark.slow,  # two stages made again; "all done" and "resume with data done" stay fast
        ),
        ("all done", ["policy_data", "data", "samples", "sft_data"], [], []),
    ],
)
def test_judge_resume_joins_samples_before_sft_data(name, markers, removed, commands, judged, tmp_path):
    full, env = judged
    out = tmp_path / "run"
    shutil.copytree(full, out, symlinks=True)  # the interrupted run: these markers, these outputs removed
    for stage in STAGES:
        if stage not in markers:
            (out / f".{stage}.done").unlink()
    for path in removed:
        shutil.rmtree(out / path) if (out / path).is_dir() else (out / path).unlink()
    resumed, failure = judge(out, tmp_path, "resume.jsonl", env)
    assert (sorted(resumed), failure) == (sorted(commands), None)
    assert sorted(p.name for p in out.glob(".*.done")) == [f".{s}.done" for s in STAGES]
    assert all((out / OUTPUT.get(s, s)).exists() for s in STAGES)
    assert sum(1 for _ in open(out / "samples" / "samples.jsonl")) == 6  # 3 questions, 2 answers each


@pytest.mark.parametrize("policy_folder_removed, trained", [(False, 1), (True, 2)])
def test_policy_stage_output_exists_without_checkpoints(policy_folder_removed, trained, tmp_path, monkeypatch):
    """pipeline.policy saves no checkpoint (save_freq=-1), so verl makes no ``policy/``: the stage makes it, and a
    resume skips the stage (trains it again only once that folder is removed)."""
    from scripts.launch import launcher as launch
    from scripts.workflows import cli

    runs = []
    monkeypatch.setattr(launch, "run_recipe", lambda recipe, overrides, env, **where: runs.append(recipe) or 0)
    cfg = pipeline.parse_args(["judge_to_reward", "--out", str(tmp_path)])
    flow = cli.run_of(cfg)
    stage = lambda: flow.stage("policy", flow.path("policy"), lambda: pipeline.policy(flow, cfg, "/b", "/j"))  # noqa: E731
    stage()
    if policy_folder_removed:
        shutil.rmtree(tmp_path / "policy")
    stage()
    assert (len(runs), (tmp_path / "policy").is_dir(), (tmp_path / ".policy.done").exists()) == (trained, True, True)
