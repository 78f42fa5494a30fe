"""``scripts.lab.policy_learns --instances``: each instance's command line (scripts/lab/instances.py child_argv:
the parent's own --out, --gpus and --instances gone in every spelling argparse takes, its folder, testbed seed and
rotated GPUs in their place), the argument checks (exit 2 before anything starts), and the random control seeded by
its run's seed (two seeds' random runs are paid by different coins), and the progress line's last stage (the one
finished most recently)."""

from __future__ import annotations

import os

import pytest

from reward_fns import controls
from scripts.lab import instances, policy_learns
from scripts.workflows.stages import Stages


@pytest.mark.parametrize(
    "argv, out, k, gpus, i, want",
    [
        (  # space-separated values, GPUs rotated by the instance's position (1: start at the second)
            ["--out", "runs/c", "--instances", "3,5", "--seeds", "0,1", "--gpus", "0,1", "trainer.x=1"],
            "runs/c",
            5,
            ["0", "1"],
            1,
            ["--out", "runs/c/instance_5", "--testbed-arg=--seed=5", "--gpus=1,0", "--seeds", "0,1", "trainer.x=1"],
        ),
        (  # the = spelling, three GPUs, position 2
            ["--out=runs/c", "--instances=0,1,2", "--gpus=4,5,6", "--arms", "rule,judge", "+a.b=c", "x.y=[1,2]"],
            "runs/c",
            2,
            ["4", "5", "6"],
            2,
            ["--out", "runs/c/instance_2", "--testbed-arg=--seed=2", "--gpus=6,4,5", "--arms", "rule,judge", "+a.b=c"]
            + ["x.y=[1,2]"],
        ),
        (  # position 0: the GPUs as given; position past the GPUs: around again (3 % 2 = 1)
            ["--instances", "0,1,2,7", "--out", "o"],
            "o",
            0,
            ["0", "1"],
            0,
            ["--out", "o/instance_0", "--testbed-arg=--seed=0", "--gpus=0,1"],
        ),
        (
            ["--instances", "0,1,2,7", "--out", "o"],
            "o",
            7,
            ["0", "1"],
            3,
            ["--out", "o/instance_7", "--testbed-arg=--seed=7", "--gpus=1,0"],
        ),
        (  # no --gpus: none given to the instance either
            ["--out", "o", "--instances", "0,1", "--steps", "3", "--parallel", "2"],
            "o",
            1,
            [],
            1,
            ["--out", "o/instance_1", "--testbed-arg=--seed=1", "--steps", "3", "--parallel", "2"],
        ),
        (  # abbreviations argparse takes: --instance, --ou, --gpu, --inst=, --o=, --gp=
            ["--instance", "0,1", "--ou", "o", "--gpu", "0,1", "--testbed-arg=--train-size=60", "a=1"],
            "o",
            0,
            ["0", "1"],
            0,
            ["--out", "o/instance_0", "--testbed-arg=--seed=0", "--gpus=0,1", "--testbed-arg=--train-size=60", "a=1"],
        ),
        (
            ["--inst=0,1", "--o=o", "--gp=0,1", "--seeds", "2"],
            "o",
            1,
            ["0", "1"],
            1,
            ["--out", "o/instance_1", "--testbed-arg=--seed=1", "--gpus=1,0", "--seeds", "2"],
        ),
    ],
)
def test_child_argv(argv, out, k, gpus, i, want):
    assert instances.child_argv(argv, out, k, gpus, i) == want


def test_child_argv_is_what_the_parser_reads():
    """Each instance's command line, read by policy_learns' own parser: its folder, its testbed seed, its GPUs and
    the parent's other arguments; no --instances (else each instance would start instances of its own)."""
    argv = ["--out", "runs/c", "--instance", "0,1", "--gpu", "2,3", "--seeds", "0,1", "--steps", "3", "a.b=1"]
    parent = policy_learns.parse_args(argv)
    assert (parent.out, parent.instances, parent.gpus) == ("runs/c", (0, 1), "2,3")
    for i, k in enumerate(parent.instances):
        child = policy_learns.parse_args(instances.child_argv(argv, parent.out, k, ["2", "3"], i))
        assert (child.out, child.instances, child.gpus, child.testbed_arg) == (
            f"runs/c/instance_{k}",
            None,
            ["2,3", "3,2"][i],
            (f"--seed={k}",),
        )
        assert (child.seeds, child.steps, child.overrides) == ((0, 1), 3, ("a.b=1",))


INSTANCES = "--instances: testbed seeds >= 0, with the word-problem testbed"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--instances", "0,0"], "--instances: 0 listed more than once in 0,0: list each once"),
        (["--instances", "1,2,1"], "--instances: 1 listed more than once in 1,2,1: list each once"),
        (["--instances=-1"], INSTANCES),
        (["--instances", "0,-2"], INSTANCES),
        (["--instances", "0,1", "--testbed", "none"], INSTANCES),
        (["--instances", "0,1", "--testbed-arg=--seed=3"], "--instances sets each instance's --testbed-arg=--seed"),
        (["--instances", "0", "--testbed-arg=--seed", "--testbed-arg=3"], "--instances sets each instance's"),
        (["--instances", ""], "argument --instances: invalid"),
        (["--instances", "0,,1"], "argument --instances: invalid"),
    ],
)
@pytest.mark.parametrize("dry", ["0", "1"])
def test_bad_instances_stop_the_command_line(args, message, dry, tmp_path, capsys, monkeypatch):
    """Refused when the arguments are read (exit 2, also under DRY_RUN=1): no instance starts, no folder is made."""
    started = []
    monkeypatch.setattr(instances, "run", lambda *a: started.append(a) or 0)
    monkeypatch.setenv("DRY_RUN", dry)
    with pytest.raises(SystemExit) as e:
        policy_learns.main(["--out", str(tmp_path / "x"), *args])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and line.startswith("python -m scripts.lab.policy_learns: error: ") and message in line, (
        line
    )
    assert started == [] and not (tmp_path / "x").exists()


def test_good_instances_start_them(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(instances, "run", lambda cfg, argv: started.append((cfg.instances, argv, cfg.steps)) or 7)
    monkeypatch.delenv("DRY_RUN", raising=False)
    argv = ["--out", str(tmp_path / "x"), "--instances", "2,0", "--steps", "5", "--testbed-arg=--train-size=60"]
    assert policy_learns.main(argv) == 7
    assert started == [((2, 0), argv, 5)]


def _settings(tmp_path, arms: str, seeds: str) -> dict[str, list[str]]:
    """Each run's settings (``policy_learns.run_settings``), by run name."""
    cfg = policy_learns.parse_args(["--out", str(tmp_path), "--arms", arms, "--seeds", seeds])
    flow = Stages(str(tmp_path))
    return {name: policy_learns.run_settings(flow, cfg, name, arm, seed) for name, arm, seed in policy_learns.runs(cfg)}


SEED = "++reward.custom_reward_function.reward_kwargs.seed="


@pytest.mark.parametrize(
    "arms, seeds, want",
    [
        ("rule,random", "0,1", {"rule": [], "random": ["0"], "rule_s1": [], "random_s1": ["1"]}),
        ("random,format,judge", "3,5", {"random_s3": ["3"], "random_s5": ["5"], "format_s3": [], "judge_s5": []}),
    ],
)
def test_the_random_control_is_seeded_by_its_run(arms, seeds, want, tmp_path):
    settings = _settings(tmp_path, arms, seeds)
    got = {name: [s[len(SEED) :] for s in v if s.startswith(SEED)] for name, v in settings.items()}
    assert {name: got[name] for name in want} == want
    for name, seed in got.items():  # the coin's seed is the run's data.seed
        assert seed == [] or [f"data.seed={seed[0]}"] == [s for s in settings[name] if s.startswith("data.seed=")]
    assert len({tuple(v) for name, v in got.items() if name.startswith("random")}) == 2  # two seeds, two coins


def test_two_seeds_coins_pay_different_samples():
    """The seed reaches the coin: the same 64 answers are paid differently under seeds 0 and 1, the same under 0
    twice."""
    answers = [f"so the answer is #### {n}" for n in range(64)]

    def paid(seed):
        return [controls.random_reward(solution_str=x, ground_truth="7", seed=seed)["score"] for x in answers]

    assert paid(0) == paid(0) and paid(0) != paid(1)
    assert 16 < sum(paid(0)) < 48 and 16 < sum(paid(1)) < 48


# markers (stage name, mtime in s) -> the progress line: the last stage is the one finished most recently (the newest
# marker), not the one whose name sorts last; the name breaks a tie
@pytest.mark.parametrize(
    "markers, want",
    [
        (None, "starting"),  # no folder yet
        ([], "0 stages done"),
        ([("testbed", 100)], "1 stages done (last: testbed)"),
        ([("testbed", 100), ("judge_sft", 200), ("rule", 300)], "3 stages done (last: rule)"),
        ([("testbed", 300), ("judge_sft", 200), ("rule", 100)], "3 stages done (last: testbed)"),
        ([("testbed", 100), ("warm_start", 200), ("judge", 300)], "3 stages done (last: judge)"),
        ([("b", 100), ("a", 100)], "2 stages done (last: b)"),
    ],
)
def test_progress_names_the_stage_finished_last(markers, want, tmp_path):
    if markers is not None:
        where = tmp_path / "instance_3"
        where.mkdir()
        (where / "notes.txt").write_text("")  # no marker
        for name, mtime in markers:
            (where / f".{name}.done").write_text("")
            os.utime(where / f".{name}.done", (mtime, mtime))
    assert instances.progress(str(tmp_path), 3) == want
