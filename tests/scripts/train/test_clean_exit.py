"""Clean ends of a training run, on CPU.

* No DataLoader worker processes: ``recipes/base.yaml`` sets ``data.dataloader_num_workers: 0`` (verl's
  default is 8). verl's ``RayPPOTrainer._create_dataloader`` passes that value to torchdata's
  ``StatefulDataLoader`` for the train and the validation loader, and with 0 it iterates in the calling
  process (``_StatefulSingleProcessDataLoaderIter``): no worker is forked, so none can be killed at
  teardown ("DataLoader worker (pid ...) is killed by signal: Killed"). The loaders are built here
  as verl builds them (``create_rl_dataset``, ``create_rl_sampler``, ``collate_fn``, ``StatefulDataLoader``
  with the same arguments), from the recipe config composed with Hydra, and the test counts the child
  processes of this process after the first batch of each loader is read (the train loader keeps its
  iterator, as in training). A row with 2 workers shows that the count sees workers. Every recipe
  config under recipes/ composes to 0 workers.
* Fail-fast on a silent judge: when ``ray.get`` raises the Ray task error whose cause is
  ``scripts.train.watches.JudgeSilentError``, ``python -m scripts.train`` prints that message as its last
  line and exits with status 3; any other error is left to Hydra (status 1).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("verl")
psutil = pytest.importorskip("psutil")
ray = pytest.importorskip("ray")

import scripts  # noqa: E402
from scripts.train import trainer as train  # noqa: E402
from scripts.train.watches import FailFast, JudgeSilentError  # noqa: E402

ROOT = scripts.ROOT
RECIPES = os.path.join(ROOT, "recipes")
DATA = os.path.join(ROOT, "tests", "fixtures", "eval", "pointwise.parquet")  # 60 pointwise judge rows
RECIPE = "judge_pointwise"


# ------------------------------------------------------------------------------------------ dataloaders
def compose_recipe(recipe: str, overrides: list[str]):
    """The recipe's config as ``python -m scripts.train --config-path recipes/<recipe> --config-name config``
    composes it: verl's ppo_trainer, recipes/base.yaml, the recipe, then the overrides."""
    from scripts.launch import config_compose

    return config_compose.compose(overrides, recipe)


def build_loaders(config):
    """verl 0.9.1's train and validation loaders, built as its legacy TaskRunner and
    ``RayPPOTrainer._create_dataloader`` build them."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.dataset.rl_dataset import collate_fn

    model = omega_conf_to_dataclass(config.actor_rollout_ref.model)
    tokenizer, processor = model.tokenizer, model.processor
    train_ds = create_rl_dataset(
        config.data.train_files,
        config.data,
        tokenizer,
        processor,
        is_train=True,
        max_samples=config.data.get("train_max_samples", -1),
    )
    val_ds = create_rl_dataset(
        config.data.val_files,
        config.data,
        tokenizer,
        processor,
        is_train=False,
        max_samples=config.data.get("val_max_samples", -1),
    )
    num_workers = config.data["dataloader_num_workers"]
    train_loader = StatefulDataLoader(
        dataset=train_ds,
        batch_size=config.data.get("gen_batch_size", None) or config.data.train_batch_size,
        num_workers=num_workers,
        drop_last=True,
        collate_fn=collate_fn,
        sampler=create_rl_sampler(config.data, train_ds),
    )
    val_batch_size = config.data.val_batch_size
    if val_batch_size is None:
        val_batch_size = len(val_ds)
    val_loader = StatefulDataLoader(
        dataset=val_ds,
        batch_size=val_batch_size,
        num_workers=num_workers,
        shuffle=config.data.get("validation_shuffle", True),
        drop_last=False,
        collate_fn=collate_fn,
    )
    return train_loader, val_loader


def new_children(before: set[int]) -> list[int]:
    return sorted(p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before)


# every recipe config that `python -m scripts.train --config-path recipes/<name>` runs
RECIPE_CONFIGS = sorted(d for d in os.listdir(RECIPES) if os.path.isfile(os.path.join(RECIPES, d, "config.yaml")))


def test_recipe_configs_found():
    assert {"judge_pointwise", "judge_pairwise", "gsm8k_local_judge"} <= set(RECIPE_CONFIGS)


@pytest.mark.parametrize("recipe", RECIPE_CONFIGS)
def test_recipe_config_loads_rows_in_process(recipe):
    config = compose_recipe(recipe, ["data.train_files=a.parquet", "data.val_files=b.parquet"])
    assert config.data.dataloader_num_workers == 0


# overrides on top of the recipe -> (data.dataloader_num_workers,
#   {loader: (rows in its first batch, child processes alive after reading it)})
# 60 rows: train batches of 16 (data.train_batch_size), one validation batch of all rows (val_batch_size null).
# The train loader keeps its iterator (and so its workers) for its checkpoint state, as in a training run.
LOADER_CASES = {
    "recipe defaults (base.yaml)": ([], 0, {"train": (16, 0), "val": (60, 0)}),
    "2 workers (control: the count sees workers)": (
        ["data.dataloader_num_workers=2"],
        2,
        {"train": (16, 2), "val": (60, 4)},
    ),
}


@pytest.mark.parametrize("case", list(LOADER_CASES))
def test_dataloaders_fork_no_worker_processes(case, model_path):
    overrides, want_workers_cfg, want = LOADER_CASES[case]
    config = compose_recipe(
        RECIPE,
        [
            f"data.train_files={DATA}",
            f"data.val_files={DATA}",
            "data.train_batch_size=16",
            f"actor_rollout_ref.model.path={model_path}",
            *overrides,
        ],
    )
    assert config.data.dataloader_num_workers == want_workers_cfg
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    train_loader, val_loader = build_loaders(config)
    assert new_children(before) == []  # building a loader starts nothing

    seen = {}
    try:
        for name, loader in (("train", train_loader), ("val", val_loader)):
            it = iter(loader)
            batch = next(it)  # workers, if any, are alive while the iterator is
            seen[name] = (len(batch["raw_prompt"]), len(new_children(before)))
            del it, batch
    finally:
        for loader in (train_loader, val_loader):
            shutdown = getattr(getattr(loader, "_iterator", None), "_shutdown_workers", None)
            if shutdown:
                shutdown()
        psutil.wait_procs([p for p in psutil.Process().children(recursive=True) if p.pid not in before], timeout=30)
    assert seen == want
    assert new_children(before) == []


# ------------------------------------------------------------------------------------------ fail-fast exit
def silent_error() -> JudgeSilentError:
    """The error FailFast raises after 3 steps with every judge request failing."""
    ff = FailFast(threshold=0.5, steps=3)
    health = {"judge_health/error_rate": 1.0, "judge_health/parse_fail_rate": 0.0}
    with pytest.raises(JudgeSilentError) as e:
        for _ in range(3):
            ff.update(health)
    return e.value


def ray_task_error(cause: BaseException, dual: bool = True):
    """What ``ray.get`` raises when the remote task raised ``cause`` (Ray subclasses the cause's type)."""
    err = ray.exceptions.RayTaskError(
        "JudgeTaskRunner.run",
        "Traceback (most recent call last):\n  (remote)\n",
        cause,
        proctitle="ray::JudgeTaskRunner.run",
        pid=4242,
        ip="127.0.0.1",
    )
    return err.as_instanceof_cause() if dual else err


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as e:
            raise outer from e
    except BaseException as e:
        return e


SILENT = silent_error()
# exception raised by run_ppo -> whether it ends the run with the fail-fast message and status 3
EXIT_CASES = {
    "RayTaskError(JudgeSilentError) from ray.get": (ray_task_error(SILENT), True),
    "RayTaskError whose cause is JudgeSilentError": (ray_task_error(SILENT, dual=False), True),
    "JudgeSilentError raised in this process": (SILENT, True),
    "RuntimeError raised from RayTaskError(JudgeSilentError)": (
        chained(RuntimeError("wrapped"), ray_task_error(SILENT)),
        True,
    ),
    "RayTaskError(ValueError)": (ray_task_error(ValueError("bad batch")), False),
    "RayTaskError(RuntimeError) worker killed": (
        ray_task_error(RuntimeError("DataLoader worker (pid 1) is killed")),
        False,
    ),
    "KeyError": (KeyError("reward"), False),
}


@pytest.mark.parametrize("case", list(EXIT_CASES))
def test_exit_on_silent_judge(case, capsys):
    exc, exits = EXIT_CASES[case]
    if exits:
        with pytest.raises(SystemExit) as e:
            train.exit_on_silent_judge(exc)
        assert e.value.code == train.SILENT_JUDGE_EXIT == 3
        assert capsys.readouterr().err == f"\nerror: {SILENT}\n"
        assert str(SILENT).startswith("stopping: judge requests failed for 100% of samples")
    else:
        assert train.exit_on_silent_judge(exc) is None
        assert capsys.readouterr().err == ""
    assert (train.silent_judge(exc) is SILENT) == exits


ENTRY = """
import sys, ray
import verl.trainer.main_ppo as main_ppo
from scripts.train.watches import JudgeSilentError

message = sys.argv.pop()
cause = JudgeSilentError(message) if message.startswith("stopping:") else ValueError(message)

def run_ppo(config, task_runner_class):  # what ray.get raises when the task runner's fit() raised `cause`
    raise ray.exceptions.RayTaskError("JudgeTaskRunner.run", "Traceback (remote)", cause).as_instanceof_cause()

main_ppo.run_ppo = run_ppo
from scripts.train import trainer as train
train.main()
"""

# the remote error -> (exit status, last stderr line)
ENTRY_CASES = {
    "silent judge": (
        "stopping: the judge answered without a valid verdict for 90% of samples",
        3,
        "error: stopping: the judge answered without a valid verdict for 90% of samples",
    ),
    "other error": ("bad batch", 1, "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(ENTRY_CASES))
def test_entry_point_exit_status(case, model_path, tmp_path):
    """The real ``scripts.train.trainer.main()`` under Hydra (config composed and validated), with verl's run_ppo
    replaced by one that raises what ``ray.get`` raises for a failing task runner."""
    message, want_rc, want_last = ENTRY_CASES[case]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PYTHONPATH"] = ROOT
    argv = [
        "--config-path",
        os.path.join(RECIPES, RECIPE),
        "--config-name",
        "config",
        f"data.train_files={DATA}",
        f"data.val_files={DATA}",
        f"actor_rollout_ref.model.path={model_path}",
        f"hydra.run.dir={tmp_path}",
        message,
    ]
    r = subprocess.run(
        [sys.executable, "-c", ENTRY, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert (r.returncode, lines[-1]) == (want_rc, want_last), r.stderr[-3000:]
