"""The training entry point of every GRPO recipe: verl's PPO trainer plus the ``verl_judge`` hooks.

    python -m scripts.train --config-path "$PWD/recipes/judge_pointwise" --config-name config [hydra overrides]

It adds the search path and the ``vj.*`` resolvers (``scripts/launch/knobs.py``) and runs verl's ``run_ppo`` with a
task runner that installs the hooks (``scripts.train.seam``) in the process that trains, into verl's legacy trainer
(``trainer.use_v1: false``: verl 0.9.1's V1 trainer passes a colocated judge no ground truth and logs no reward keys
per step).

The driver's Ray job id is drawn at random (``unique_job_id``): verl 0.9.1 names the weight-sync socket
``/tmp/rl-colocate-zmq-<Ray job id>-replica-<r>-rank-<k>.sock`` and every fresh Ray cluster numbers its first job
``01000000``, so two runs on one machine would bind the same path and one's vLLM would wait for the other's weights.
"""

from __future__ import annotations

import secrets
import sys

import ray
from verl.trainer.main_ppo_v0 import TaskRunner as _VerlTaskRunner

from scripts.launch import knobs


@ray.remote(num_cpus=1)
class JudgeTaskRunner(_VerlTaskRunner.__ray_actor_class__):
    """verl's legacy TaskRunner with the hooks installed (``scripts.train.seam``) before it builds its trainer."""

    def run(self, config):
        from verl.trainer import main_ppo_v0

        from scripts.train import seam

        seam.install(config)
        verl_run = super().run
        # Ray ships this class's bases by value: verl's ``run`` here reads its own copy of main_ppo_v0's names, so
        # the trainer it builds is named there too
        verl_run.__func__.__globals__["RayPPOTrainer"] = main_ppo_v0.RayPPOTrainer
        return verl_run(config)


def check(config) -> None:
    """Refuse settings the hooks cannot honour, before any worker starts."""
    opts = config.get("verl_judge") or {}
    if config.trainer.get("use_v1", False) and opts.get("pair_groups", False):
        raise SystemExit("error: verl_judge.pair_groups needs verl's legacy trainer (trainer.use_v1=false)")


SILENT_JUDGE_EXIT = 3


def unique_job_id() -> str:
    """Give this driver a random Ray job id instead of the cluster's next one (``01000000`` for the first job of
    every fresh cluster), so verl's per-job files in /tmp are this run's alone; returns its hex. Call before
    ``ray.init``. Drawn from [2**16, 2**31): far above any count a cluster reaches with its own numbering."""
    from ray._private import state

    job = ray.JobID.from_int(2**16 + secrets.randbelow(2**31 - 2**16))
    state.next_job_id = lambda: job  # ray.init -> connect() asks this for the driver's job id
    return job.hex()


def silent_judge(exc: BaseException | None):
    """The ``StopRun`` (silent judge, reward hacking) that ``exc`` is or wraps (the ``cause`` of the Ray task error that
    ``ray.get`` raises for the task runner, or a chained cause), else None."""
    from scripts.train.hooks import StopRun

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ray.exceptions.RayTaskError) and getattr(exc, "cause", None) is not None:
            exc = exc.cause
        elif isinstance(exc, StopRun):
            return exc
        else:
            exc = exc.__cause__ or exc.__context__
    return None


def exit_on_silent_judge(exc: BaseException) -> None:
    """Fail-fast end of a run: print the silent judge's message (cause and likely fix) as the last line
    and exit with status 3, rather than ending on Ray's traceback alone. Other errors return unchanged."""
    err = silent_judge(exc)
    if err is not None:
        print(f"\nerror: {err}", file=sys.stderr, flush=True)
        raise SystemExit(SILENT_JUDGE_EXIT)


def main() -> None:
    import hydra
    from omegaconf import OmegaConf
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    knobs.register()

    @hydra.main(config_path=None, config_name=None, version_base=None)
    def _main(config):
        OmegaConf.resolve(config)  # the knobs as this process sees them; Ray workers get plain values
        auto_set_device(config)
        check(config)
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config

        validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
        job = unique_job_id()
        print(f"[train] Ray job id {job} (verl's weight-sync sockets in /tmp are this run's alone)", flush=True)
        if config.trainer.get("use_v1", False):
            from verl.trainer.main_ppo import TaskRunnerV1

            print("[train] trainer.use_v1=true: verl's V1 trainer, without the verl_judge step metrics and fail-fast")
            run_ppo(config, task_runner_class=TaskRunnerV1)
        else:
            try:
                run_ppo(config, task_runner_class=JudgeTaskRunner)
            except Exception as e:
                exit_on_silent_judge(e)
                raise

    if not any(a.startswith("hydra.searchpath") for a in sys.argv[1:]):
        sys.argv.append(knobs.SEARCH_PATH)
    _main()
