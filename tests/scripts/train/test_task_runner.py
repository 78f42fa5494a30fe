"""The task runner as Ray ships it: verl's ``TaskRunner.run`` builds ``JudgeTrainer``, not verl's own trainer.

Ray pickles the actor class, and with it verl's ``TaskRunner.run``, by value: in the actor's process that ``run`` reads
a copy of ``verl.trainer.main_ppo_v0``'s names, so patching the module alone leaves verl's ``RayPPOTrainer`` built
(seen on a GPU: no judge-server wait, validation groups waiting for rollout.n answers). The test pickles the class the
way Ray does, calls the copy's ``run`` with no config (verl's ``run`` stops at its first line), and reads the name
``run`` would build its trainer by.
"""

from __future__ import annotations

import pytest
import ray.cloudpickle as cloudpickle
from verl.trainer import main_ppo_v0

from scripts.train import seam, trainer


@pytest.mark.parametrize("shipped", [True, False], ids=["as Ray ships it", "in this process"])
def test_verls_run_builds_the_judge_trainer(shipped, monkeypatch):
    verl_runner = main_ppo_v0.TaskRunner.__ray_actor_class__
    monkeypatch.setattr(verl_runner, "run", vars(verl_runner)["run"])  # unpickling replaces it here: put it back after
    judge_trainer = type("JudgeTrainer", (), {})
    monkeypatch.setattr(seam, "install", lambda config: setattr(main_ppo_v0, "RayPPOTrainer", judge_trainer))
    actor = trainer.JudgeTaskRunner.__ray_metadata__.modified_class
    if shipped:
        actor = cloudpickle.loads(cloudpickle.dumps(actor))
    verl_run = vars(actor.__mro__[2])["run"]
    assert actor.__mro__[2].__name__ == "TaskRunner" and (verl_run.__globals__ is vars(main_ppo_v0)) is not shipped
    with pytest.raises(ValueError, match="not an OmegaConf config"):  # verl's run stops at its first line
        actor.run(object.__new__(actor), "no config")
    assert verl_run.__globals__["RayPPOTrainer"] is judge_trainer
