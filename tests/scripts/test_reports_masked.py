"""What the reports record of a command line or of Hydra overrides passes through ``scripts.console.masked``: a judge
URL with credentials in them is written masked: the scorecard's command, an experiment's settings record
(``python -m scripts.lab.bench.judge_cost``'s report: tests/scripts/lab/bench/test_judge_cost.py)."""

from __future__ import annotations

import json

import pytest

from scripts.lab import policy_learns, reuse, scorecard
from tests.scripts.lab.test_scorecard import ARMS, SEEDS, _instances

SECRET = "https://svc:S3cret@judge.example/v1?key=QueryK3y"
MASKED = "https://***@judge.example/v1?key=***"
OVERRIDE = "++reward.custom_reward_function.reward_kwargs.base_url='{}'"


def _scorecard(tmp_path):
    out = tmp_path / "card"
    command = ["python", "-m", "scripts.lab.policy_learns", OVERRIDE.format(SECRET)]
    scorecard.write_pooled(str(out), _instances(tmp_path), ARMS, SEEDS, 10, command=command)
    return [out / "report.json", out / "scorecard.md"], ("command",), [*command[:3], OVERRIDE.format(MASKED)]


def _stage_settings(tmp_path):
    out = tmp_path / "pl"
    cfg = policy_learns.parse_args(["--out", str(out), "--grpo-steps", "5", OVERRIDE.format(SECRET)])
    reuse.record_settings(str(out), cfg, {})
    return [out / reuse.SETTINGS_FILE], ("judge_grpo_overrides",), [OVERRIDE.format(MASKED)]


@pytest.mark.parametrize("write", [_scorecard, _stage_settings], ids=lambda f: f.__name__[1:])
def test_a_recorded_command_is_masked(write, tmp_path):
    files, key, want = write(tmp_path)
    assert [str(f) for f in files if "S3cret" in f.read_text() or "QueryK3y" in f.read_text()] == []
    record = json.loads(files[0].read_text())
    for k in key:
        record = record[k]
    assert record == want
