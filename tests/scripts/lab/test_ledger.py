"""The ledger of judge instances (``scripts.lab.ledger``): ``keep`` stores an experiment's per-question grades and
settings; ``pool`` gives the scorecard over the instances of several kept folders exactly as the scorecard over
their experiments does, pools an instance once, and refuses instances whose settings differ (steps, experiment
settings, an arm's overrides), naming the difference; the machine's overrides (paths, KV cache, GPU memory) are not
settings. The kept 2026-11-28 pairwise folder pools to its own scorecard's numbers."""

from __future__ import annotations

import json
import os

import pytest

from scripts.lab import ledger, scorecard
from scripts.lab.scorecard_stats import bootstrap
from tests.scripts.lab.test_scorecard import _experiment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KEPT = os.path.join(ROOT, "docs", "results", "2026-11-28-pairwise_reward")
LINE = (
    "[launch] command: PYTHONPATH=/p MODEL=/m python3 -m scripts.train --config-path /p/recipes/{recipe} "
    "--config-name config +ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={out}/{run}_metrics.jsonl "
    "actor_rollout_ref.model.path={out}/policy_sft/hf data.seed=0 trainer.total_training_steps=10 "
    "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes={kv} "
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.15 trainer.validation_data_dir={out}/{run}_val {extra}\n"
)
JUDGE = (
    "reward.custom_reward_function.path=pkg://reward_fns.llm_judge "
    "++reward.custom_reward_function.reward_kwargs.mode=judge"
)


def experiment(out, seed: int, before="0011", rule="1111", judge="0111", kv=2147483648, judge_extra=JUDGE, lr=None):
    """A finished experiment folder (testbed seed ``seed``): validation dumps, stage settings and launch lines."""
    _experiment(str(out), before, {"rule": rule, "judge": judge})
    os.makedirs(out / "logs", exist_ok=True)
    settings = {"testbed": "word_problems", "testbed_arg": [f"--seed={seed}"], "model": f"/m{seed}", "sft_rows": 40}
    (out / "stage_settings.json").write_text(json.dumps(settings))
    for run, recipe, extra in (("rule", "gsm8k_rule", ""), ("judge", "gsm8k_local_judge", judge_extra)):
        extra += f" actor_rollout_ref.actor.optim.lr={lr}" if lr and run == "judge" else ""
        (out / "logs" / f"{run}.log").write_text(LINE.format(recipe=recipe, out=out, run=run, kv=kv, extra=extra))
    return str(out)


def kept(tmp_path, name, *experiments, commit="abc"):
    dest = str(tmp_path / name)
    stamp = {"commit": commit, "machine": "one GPU", "date": "2026-11-28", "command": "policy_learns"}
    ledger.keep(list(experiments), dest, ["rule", "judge"], [0], 10, stamp)
    return dest


def test_arm_settings_leave_the_machine_out(tmp_path):
    out = experiment(tmp_path / "e", 3)
    assert ledger.arm_settings(out, "judge") == [
        "++reward.custom_reward_function.reward_kwargs.mode=judge",
        "data.seed=0",
        "reward.custom_reward_function.path=pkg://reward_fns.llm_judge",
        "trainer.total_training_steps=10",
    ]
    assert ledger.instance_name(out) == "word_problems seed 3"
    assert ledger.experiment_settings(out) == {"testbed": "word_problems", "testbed_arg": [], "sft_rows": 40}


def test_pool_over_kept_folders_is_the_scorecard_over_their_experiments(tmp_path):
    a = experiment(tmp_path / "a", 0, before="0011", rule="1111", judge="0111")
    b = experiment(tmp_path / "b", 1, before="0001", rule="0111", judge="0011", kv=4294967296)  # another machine
    one, two = kept(tmp_path, "k1", a), kept(tmp_path, "k2", b, commit="def")
    res = ledger.pool([one, two], ["rule", "judge"], [0])
    insts = [scorecard.splits(f, ["rule", "judge"], [0], 10)["test"] for f in (a, b)]
    assert res["pooled"]["test"] == bootstrap(insts, ["rule", "judge"])
    assert [(s["instance"], s["commit"]) for s in res["instances"]] == [
        ("word_problems seed 0", "abc"),
        ("word_problems seed 1", "def"),
    ]
    assert "| judge |" in ledger.markdown(res, ["rule", "judge"])


@pytest.mark.parametrize(
    "other, message",
    [
        (dict(seed=0), "instance 'word_problems seed 0' is already pooled from another folder"),
        (dict(seed=1, lr="1e-5"), "arm judge: 'actor_rollout_ref.actor.optim.lr=1e-5' in one only"),
        (dict(seed=1, judge_extra=JUDGE.replace("llm_judge", "pairwise_judge")), "arm judge: "),
    ],
)
def test_pool_refuses_a_repeat_or_other_settings(other, message, tmp_path):
    first = kept(tmp_path, "k1", experiment(tmp_path / "a", 0))
    second = kept(tmp_path, "k2", experiment(tmp_path / "b", **other))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("+", r"\+")):
        ledger.pool([first, second], ["rule", "judge"], [0])


def test_pool_refuses_other_experiment_settings_and_missing_arms(tmp_path):
    first = kept(tmp_path, "k1", experiment(tmp_path / "a", 0))
    b = experiment(tmp_path / "b", 1)
    settings = json.loads((tmp_path / "b" / "stage_settings.json").read_text())
    (tmp_path / "b" / "stage_settings.json").write_text(json.dumps({**settings, "sft_rows": 80}))
    second = kept(tmp_path, "k2", b)
    with pytest.raises(ValueError, match="setting sft_rows: 40 != 80"):
        ledger.pool([first, second], ["rule", "judge"], [0])
    with pytest.raises(ValueError, match="has no random, seed 1"):
        ledger.pool([first], ["rule", "judge", "random"], [0, 1])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["pool", "x", "--arms", "rule,judge,judge"], "ledger: --arms: judge listed more than once"),
        (["pool", "x", "--arms", ","], "ledger: --arms needs at least one value"),
        (["pool", "/nonexistent", "--arms", "rule,judge"], "ledger: "),
    ],
)
def test_command_line_errors(argv, message, capsys):
    try:
        code = ledger.main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2 and message in capsys.readouterr().err


def test_the_kept_pairwise_folder_pools_to_its_scorecard():
    res = ledger.pool([KEPT], ["rule", "pairwise_ref", "tournament"], [0])
    report = json.load(open(os.path.join(KEPT, "report.json")))
    for split in ("test", "heldout"):
        assert res["pooled"][split]["ratio"]["pairwise_ref"] == report["pooled"][split]["ratios"]["pairwise_ref"]
        assert res["pooled"][split]["gain"]["rule"] == report["pooled"][split]["rule_gain"]
    assert [s["commit"][:7] for s in res["instances"]] == ["425df64"]


def test_the_kept_pairwise_folder_readme_quotes_its_files():
    """The folder's README: the pooled ratios from the kept grades, and the loop's medians from the kept metrics."""
    import gzip
    import statistics

    res = ledger.pool([KEPT], ["rule", "pairwise_ref", "tournament"], [0])
    text = open(os.path.join(KEPT, "README.md")).read()
    for split in ("test", "heldout"):
        for arm in ("pairwise_ref", "tournament"):
            r = res["pooled"][split]["ratio"][arm]
            assert f"**{r['mean']:.3f} ({r['lo']:.3f} to {r['hi']:.3f})**" in text, (split, arm)

    def median(run, key):
        rows = [json.loads(x) for x in gzip.open(os.path.join(KEPT, "metrics", f"{run}.jsonl.gz"))]
        return statistics.median(r["data"][key] for r in rows if key in r["data"])

    said = {
        ("pairwise_ref", "judge_health/flip_rate"): "**0.109**",
        ("tournament", "judge_health/flip_rate"): "**0.545**",
        ("tournament", "judge_health/guarded_rate"): "**0.818**",
    }
    for (run, key), quoted in said.items():
        assert f"**{median(run, key):.3f}**" == quoted and quoted in text
    steps = {run: median(run, "timing_s/step") for run in ("rule", "pairwise_ref", "tournament")}
    assert [round(steps[r], 2) for r in steps] == [3.69, 5.94, 7.22]
    assert f"**{steps['pairwise_ref'] / steps['rule']:.2f}x**" == "**1.61x**" and "**1.96x**" in text


def test_the_kept_pairwise_folder_readme_quotes_its_disagreements():
    d = json.load(open(os.path.join(KEPT, "disagreements.json")))["instances"]["/tmp/pw/instance_3"]["runs"]
    classes = {arm: d[arm]["rollouts"]["classes"] for arm in ("pairwise_ref", "tournament")}
    got = {
        arm: (
            c["other_form"]["count"],
            c["paid_wrong"]["count"],
            c["refused_right"]["count"],
            c["guard_voided"]["count"],
        )
        for arm, c in classes.items()
    }
    assert got == {"pairwise_ref": (105, 1, 9, 1570), "tournament": (60, 0, 0, 11023)}
    text = " ".join(open(os.path.join(KEPT, "README.md")).read().split())
    assert "pairwise_ref paid **105** answers" in text and "refused 9 it paid" in text and "voided 1,570" in text
    assert "the tournament paid **60**" in text and "voided 11,023 (5 right)" in text
