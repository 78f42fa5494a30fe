"""What a judge reward adds to a GRPO step: the rule reward and the judge's placements run side by side in one
invocation, each stage's median time against the rule's.

    python -m scripts.lab.bench.judge_cost --gpus 0,1,2,3 --arms rule,resident,colocated,server  # an arm a GPU
    python -m scripts.lab.bench.judge_cost --interleave --gpus 0 --rounds 2     # every arm on GPU 0, one after another
    python -m scripts.lab.bench.judge_cost --steps 40 -- data.train_batch_size=32  # Hydra overrides for every arm
    python -m scripts.lab.bench.judge_cost --arms rule,colocated,tok128 \\
        --arm tok128=gsm8k_local_judge:++reward.custom_reward_function.reward_kwargs.max_tokens=128  # an arm of yours
    DRY_RUN=1 python -m scripts.lab.bench.judge_cost                           # check every arm's config on CPU, no GPU
    bash scripts/lab/bench/shapes.sh                    # random-weight SmolLM2-360M policy, 1.7B judge (see its header)

Arms (each is one launcher run, ``python -m scripts.launch <recipe> <overrides>``, as ``recipes/<recipe>/run.sh``):

* ``rule``: recipes/gsm8k_rule, the strict ``#### N`` rule (``reward_fns/gsm8k.py``), scored in the agent loop.
* ``resident``: recipes/gsm8k_local_judge with ``judge_placement=colocated`` (verl's reward model enabled: the judge's
  vLLM loaded on the policy's GPU, as in ``colocated``), but the custom reward is the rule (``pkg://reward_fns.gsm8k``):
  the judge is resident and never called. It separates the cost of a resident judge from the cost of its calls. As
  in ``colocated``, verl 0.9.1 then scores in a reward stage of its own after generation (with a colocated reward
  model it does not stream rewards from the agent loop), so its ``timing_s/reward`` is that stage's dispatch.
* ``colocated``: recipes/gsm8k_local_judge as it is (``judge_placement=colocated``, the default).
* ``colocated_deferred``: ``colocated`` with ``verl_judge.deferred_reward=true``: the judge's reward is computed beside
  the old and reference log-probs and joined just before the advantage (``scripts/train/deferred_reward.py``); its
  ``timing_s/reward`` is the start alone, ``timing_s/reward_join`` the wait at the join.
* ``server``: ``judge_placement=server``: the launcher serves the judge beside the policy on the same GPU.
* ``route``: ``server`` with ``reward_kwargs.mode=route`` (the rule decides the clear answers without a call).
* ``--arm NAME=RECIPE[:KEY=VALUE[,KEY=VALUE...]]`` (repeatable): an arm of yours, recipes/RECIPE with these Hydra
  overrides; a comma not followed by ``KEY=`` stays in the value (``trainer.logger=[console,file]``). A named arm's
  NAME replaces that arm, but for ``rule``, the base (name yours otherwise). ``--arms`` defaults to the named arms,
  then yours; ``--base`` names the arm the ratios are against (default ``rule`` when it runs, else none: no ratios).

Every arm gets the same overrides first: ``trainer.total_training_steps=STEPS trainer.n_gpus_per_node=1
actor_rollout_ref.rollout.gpu_memory_utilization=0.3 trainer.save_freq=-1 trainer.test_freq=-1
trainer.resume_mode=disable``, ``trainer.default_local_dir=<run>/checkpoints``,
``trainer.experiment_name=judge-cost-<arm>``; then the arm's, then the arguments after ``--`` (a later key wins).
The environment is passed to every run as it is (the launcher's variables: ``MODEL``, ``GSM8K_DIR``, ...), with
``OUTPUT_DIR=<run>`` and ``CUDA_VISIBLE_DEVICES``; a variable that looks like a knob (``JUDGE_*``, ...) but is none,
or one that would change what an arm is (``REWARD_FN``, ``REWARD_FN_NAME``, ``JUDGE_GPUS``), is refused.

Placement: ``--gpus 0,1,2,3`` starts one arm per GPU (``CUDA_VISIBLE_DEVICES`` of each child) at the same time, so
every arm shares the host alike; more arms than GPUs is refused. ``--gpus-per-arm N`` gives each run N GPUs of
``--gpus`` instead (``--gpus 0,1 --gpus-per-arm 2``: every run sees GPUs 0 and 1, for a judge on a GPU of its own).
``--interleave`` (implied by one GPU, or one group) runs the arms there one after another. ``--rounds R`` repeats
that R times, the arms' order rotated by one each round; an arm's medians pool its runs. ``DRY_RUN=1`` (the
launcher's dry-run mode) checks every arm's composed config on CPU, one after another, and makes no table.

Report (``OUT/cost.md`` and ``OUT/cost.json``, printed too; ``scripts/lab/bench/cost_report.py``): per arm, each
``timing_s/*`` stage's median over steps 2..N of its runs (``--skip-first``) and its ratio to the base arm's median
(no ratio where the base's median is under ``scripts.report.summarize_run.MIN_BASE_S``: the rule reward takes
microseconds), side by side; the runs (GPU, round, exit status, seconds, folder); each arm's recipe and overrides;
the machine, command and commit; every string of it masked (``scripts.console.masked``: URL credentials, inline
``api_key=...``, the values of secret variables), on screen and in both files. Each run's folder
``OUT/<arm>[/round-R]`` holds ``run.log``, the launcher's ``launch.log`` and verl's ``metrics.jsonl``.

Exit status: 0 when every run exited 0; 1 when one did not (the table holds the arms that finished); 2 for a bad
argument or environment (nothing is run; ``RAY_ADDRESS`` is refused: the runs are local, one per GPU); 130 when
stopped by SIGTERM or SIGHUP; after a Ctrl-C (SIGINT), with the children stopped and the report written, the command
line dies of SIGINT (a shell's ``$?``: 130; ``services.as_command``), so a script that ran it stops too. A run that
exits 0 but logs no step after ``--skip-first`` in its ``metrics.jsonl`` (``trainer.logger`` without ``file``)
counts as failed. Every child runs in a process group of its own and is stopped on every exit path (SIGTERM, then
SIGKILL of its group after ``--stop-grace`` s); a run still going after ``--run-timeout`` s is stopped and counted as
failed (exit 124).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass

import scripts
from data_prep.files.errors import DataError
from data_prep.files.outputs import check_output_folder, write_json, write_text
from reward_fns.judge_options import Mode
from scripts.console import masked, say
from scripts.eval.cli import from_args
from scripts.lab.arms import KWARGS
from scripts.lab.bench.children import Run, run_waves
from scripts.lab.bench.cost_report import gpu_names, markdown, report, train_steps
from scripts.launch import knobs, services
from scripts.launch import overrides as ov
from scripts.workflows.cli import add_options, option

ROOT = scripts.ROOT
WHO = "judge_cost"
RULE_REWARD = "reward.custom_reward_function.path=pkg://reward_fns.gsm8k"
#: the judge's placements the arms run (recipes/gsm8k_local_judge/judge_placement/<name>.yaml)
COLOCATED, SERVER = "judge_placement=colocated", "judge_placement=server"
#: arm -> (recipe, the arm's own Hydra overrides)
ARMS: dict[str, tuple[str, list[str]]] = {
    "rule": ("gsm8k_rule", []),
    "resident": ("gsm8k_local_judge", [COLOCATED, RULE_REWARD]),
    "colocated": ("gsm8k_local_judge", [COLOCATED]),
    "colocated_deferred": ("gsm8k_local_judge", [COLOCATED, "verl_judge.deferred_reward=true"]),
    "server": ("gsm8k_local_judge", [SERVER]),
    Mode.ROUTE: ("gsm8k_local_judge", [SERVER, f"{KWARGS}mode={Mode.ROUTE}"]),  # the rule decides the clear answers
}
BASE = "rule"
#: variables that would change what an arm is (its reward, its placement): refused rather than passed on
FIXED_BY_ARMS = ("REWARD_FN", "REWARD_FN_NAME", "JUDGE_GPUS")
NAME_RE = re.compile(r"^(?!\.+$)[A-Za-z0-9_.-]+$")  # not . or ..: a run's folder is OUT/<name>
KEY_RE = re.compile(r"^(~|\+\+?)?[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*=")  # a dotted key or a group
ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]*=")
GPU_RE = re.compile(r"^(\d+|(GPU|MIG)-[A-Za-z0-9/-]+)$")  # CUDA_VISIBLE_DEVICES: an index, or a GPU / MIG UUID
ARM_FORM = f"NAME=RECIPE[:KEY=VALUE[,KEY=VALUE...]], e.g. tok128=gsm8k_local_judge:{KWARGS}max_tokens=128"


def is_dry(env) -> bool:
    """DRY_RUN as the launcher reads it (``scripts.launch.launcher``): 1/true/yes/on check and stop, ``print`` prints
    the plan; anything else (unset, 0, false, no, off) runs for real."""
    v = env.get("DRY_RUN") or "0"
    return knobs.truthy(v) or v.strip().lower() == "print"


def shared(steps: int, folder: str, arm: str) -> list[str]:
    """The overrides every arm gets first."""
    return [
        f"trainer.total_training_steps={steps}",
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={ov.hydra_str(os.path.join(folder, 'checkpoints'))}",
        f"trainer.experiment_name=judge-cost-{arm}",
    ]


def arm_overrides(arm: str, steps: int, folder: str, extra: list[str], table=ARMS) -> list[str]:
    """An arm's Hydra overrides: the shared ones, the arm's (``table``: arm -> (recipe, overrides)), then ``extra``
    (a later key wins)."""
    return ov.merge(shared(steps, folder, arm), table[arm][1], list(extra))


def parse_arm(spec: str) -> tuple[str, str, list[str]]:
    """``NAME=RECIPE[:KEY=VALUE[,KEY=VALUE...]]`` as (name, recipe, overrides). A comma not followed by ``KEY=``
    stays in the value before it (``trainer.logger=[console,file]``). A ValueError says what is wrong."""
    head, _, rest = spec.partition(":")
    name, eq, recipe = head.partition("=")
    if not eq:
        raise ValueError("no '=' between the name and the recipe")
    if not NAME_RE.match(name):
        raise ValueError("the name may hold letters, digits, _ . - only")
    if not NAME_RE.match(recipe) or not os.path.isfile(os.path.join(knobs.RECIPES, recipe, "config.yaml")):
        raise ValueError(f"no recipe '{recipe}' (recipes/<RECIPE>/config.yaml)")
    items: list[str] = []
    for x in rest.split(",") if rest else []:
        if ENV_RE.match(x):
            raise ValueError(f"{x.split('=', 1)[0]} is an environment variable, give the Hydra override")
        if KEY_RE.match(x):
            items.append(x)
        elif items:
            items[-1] += "," + x  # a comma inside a value
        else:
            raise ValueError(f"'{x}' is not a Hydra override KEY=VALUE")
    return name, recipe, items


def plan_runs(
    arms: list[str], gpus: list[str], interleave: bool, rounds: int, steps: int, out: str, extra, launcher, table=ARMS
) -> list[list[Run]]:
    """The waves of runs: each wave starts together (one arm per entry of ``gpus``: a GPU id, or ids joined by commas)
    or, interleaved, one run a wave."""
    waves = []
    for r in range(rounds):
        order = arms[r % len(arms) :] + arms[: r % len(arms)]
        wave = []
        for i, arm in enumerate(order):
            folder = os.path.join(out, arm, f"round-{r + 1}") if rounds > 1 else os.path.join(out, arm)
            cmd = [*launcher, table[arm][0], *arm_overrides(arm, steps, folder, extra, table)]
            wave.append(Run(arm, r + 1, gpus[0] if interleave else gpus[i], folder, cmd))
        waves.extend([[run] for run in wave] if interleave else [wave])
    return waves


# ------------------------------------------------------------------------------------------------ entry
@dataclass(frozen=True, kw_only=True)
class Bench:
    """The bench's settings: its options, checked and resolved by ``parse`` (``arms``, ``gpus`` as lists, ``base``
    and ``interleave`` as they apply), the overrides after ``--``, the GPU groups (``slots``) and the arm table."""

    arms: list[str] = option(
        default=None,
        help=f"comma-separated, from {', '.join(ARMS)} and the --arm names (default: all, in that order)",
    )
    arm: list[str] = option(
        action="append", default=[], metavar="SPEC", help=f"an arm of yours (repeatable): {ARM_FORM}"
    )
    base: str | None = option(
        default=None,
        help=f"the arm the ratios are against (default {BASE} when it runs, else none: no ratios)",
    )
    gpus: list[str] = option(default="0", help="GPU ids (CUDA_VISIBLE_DEVICES values), one arm each (default 0)")
    gpus_per_arm: int = option(type=int, default=1, help="GPUs of --gpus each run sees (default 1)")
    interleave: bool = option(action="store_true", help="every arm on the one GPU (group) of --gpus, in turns")
    rounds: int = option(type=int, default=1, help="times every arm runs (default 1)")
    steps: int = option(type=int, default=40, help="training steps a run (default 40)")
    skip_first: int = option(type=int, default=1, help="steps of each run left out of the medians (default 1)")
    out: str | None = option(default=None, help="results folder (default outputs/judge_cost/<UTC date-time>)")
    run_timeout: float = option(type=float, default=7200, help="seconds a run may take (default 7200)")
    stop_grace: float = option(
        type=float,
        default=150,
        help="seconds from SIGTERM to SIGKILL (default 150: above the launcher's own worst-case teardown, ~110 s for "
        "the trainer, its Ray head and its judge server; a SIGKILL before that leaves the judge server running)",
    )
    launcher: str | None = option(
        default=None,
        help="the command that runs one recipe, given the recipe and its overrides (default: this interpreter "
        "-m scripts.launch); a custom one is trusted to find its GPUs",
    )
    overrides: list[str]  # Hydra overrides for every arm (after --)
    slots: list[str]  # the GPU ids each run sees, joined by commas
    table: dict[str, tuple[str, list[str]]]  # arm -> (recipe, overrides): ARMS and the --arm ones


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.judge_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(ap, Bench)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every arm (after --)")
    return ap


def _check_launcher(ap: argparse.ArgumentParser, launcher: str | None) -> None:
    """A ``--launcher`` must start with an executable."""
    if launcher is not None:
        first = (shlex.split(launcher) or [""])[0]
        if not first or not shutil.which(first):
            what = f"{first} is not an executable (a path, or a command on PATH)" if first else "no command"
            ap.error(f"--launcher {launcher!r}: {what}")


def _arm_table(ap: argparse.ArgumentParser, specs: list[str]) -> tuple[dict, list[str]]:
    """``ARMS`` with the ``--arm`` specs added: (arm -> (recipe, overrides), the names of yours)."""
    table, yours = dict(ARMS), []
    for spec in specs:
        try:
            name, recipe, own = parse_arm(spec)
        except ValueError as e:
            ap.error(f"--arm {spec!r}: {e} (want {ARM_FORM})")
        if name in yours:
            ap.error(f"--arm {spec!r}: the name '{name}' is given twice")
        if name == BASE:
            ap.error(
                f"--arm {spec!r}: '{BASE}' is the strict rule, the arm the ratios are against by default; give your "
                "arm another name (--base NAME takes the ratios against it)"
            )
        yours.append(name)
        table[name] = (recipe, own)
    return table, yours


def _chosen_arms(ap: argparse.ArgumentParser, given: str | None, base: str | None, table: dict, yours: list[str]):
    """The arms ``--arms`` (``given``) runs (default: every one, the named first), each known and named once;
    ``--base`` one of them."""
    every = list(ARMS) + [n for n in yours if n not in ARMS]
    arms = every if given is None else [a.strip() for a in given.split(",") if a.strip()]
    bad = [a for a in arms if a not in table]
    if bad or not arms:
        ap.error(f"--arms: unknown arm(s) {', '.join(bad) or '(none given)'}; the arms: {', '.join(every)}")
    if len(set(arms)) != len(arms):
        ap.error("--arms: an arm is named twice")
    if base is not None and base not in arms:
        ap.error(f"--base {base}: not one of the arms run ({', '.join(arms)})")
    return arms


def _placement(ap: argparse.ArgumentParser, ids: str, n: int, interleave: bool, arms: list[str]) -> tuple:
    """``(gpus, slots, interleave)``: the GPU ids of ``--gpus`` (``ids``) and their groups of ``--gpus-per-arm``
    (``n``), one arm's each; ``--interleave``, or true where the arms can only take turns (one slot)."""
    gpus = [g.strip() for g in ids.split(",") if g.strip()]
    if not gpus or len(set(gpus)) != len(gpus):
        ap.error(f"--gpus {ids!r}: give distinct GPU ids, e.g. 0,1,2,3")
    bad = [g for g in gpus if not GPU_RE.match(g)]
    if bad:
        ap.error(
            f"--gpus {ids!r}: {', '.join(bad)} is no GPU id (an index >= 0 as nvidia-smi lists it, or a "
            "GPU-/MIG- UUID), e.g. 0,1,2,3"
        )
    if n < 1 or len(gpus) % n:
        ap.error(f"--gpus-per-arm {n}: give a number >= 1 that divides the {len(gpus)} GPU id(s) of --gpus")
    slots = [",".join(gpus[i : i + n]) for i in range(0, len(gpus), n)]
    if interleave and len(slots) != 1:
        ap.error(f"--interleave runs every arm on one GPU: give one id with --gpus, not {ids!r}")
    interleave = interleave or len(slots) == 1  # one GPU (group): the arms can only take turns
    if not interleave and len(arms) > len(slots):
        unit = "GPU(s)" if n == 1 else f"groups of {n} GPUs"
        ap.error(
            f"{len(arms)} arms ({', '.join(arms)}) for {len(slots)} {unit} ({','.join(gpus)}): one arm per GPU; "
            "give more GPUs, fewer --arms, or --interleave"
        )
    return gpus, slots, interleave


def _check_rest(ap: argparse.ArgumentParser, cfg: Bench) -> None:
    """The counts, the seconds, the results folder and the overrides."""
    for name in ("rounds", "steps"):
        if getattr(cfg, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if cfg.skip_first < 0 or cfg.skip_first >= cfg.steps:
        ap.error(f"--skip-first must be in [0, --steps), got {cfg.skip_first} for {cfg.steps} steps")
    for name in ("run_timeout", "stop_grace"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            ap.error(f"--{name.replace('_', '-')} {value}: give a finite number of seconds > 0")
    if cfg.out is not None:
        try:
            check_output_folder(cfg.out, "--out")
        except DataError as e:
            ap.error(str(e))
    bad = [o for o in cfg.overrides if "=" not in o]
    if bad:
        ap.error(f"not a Hydra override KEY=VALUE: {' '.join(bad)}")


def parse(argv) -> Bench:
    """The command line as the bench's settings; ``ap.error`` (exit 2) for the first bad argument."""
    ap = _parser()
    ns = ap.parse_args(argv)
    _check_launcher(ap, ns.launcher)
    table, yours = _arm_table(ap, ns.arm)
    arms = _chosen_arms(ap, ns.arms, ns.base, table, yours)
    gpus, slots, interleave = _placement(ap, ns.gpus, ns.gpus_per_arm, ns.interleave, arms)
    base = BASE if ns.base is None and BASE in arms else ns.base  # else no base: no ratios
    cfg = from_args(Bench, ns, arms=arms, base=base, gpus=gpus, interleave=interleave, slots=slots, table=table)
    _check_rest(ap, cfg)
    return cfg


def env_errors(env) -> list[str]:
    """Why no run may start in this environment ([]: none): variables the launcher would refuse for every run, a Ray
    cluster, a variable that would change what an arm is."""
    unknown = knobs.unknown(env)  # the launcher would refuse every run for these: refused before any
    if unknown:
        return unknown
    if (env.get("RAY_ADDRESS") or "").strip():
        return [
            f"RAY_ADDRESS={env['RAY_ADDRESS']} is set: the bench runs local runs, one per GPU (a Ray job logs its "
            "metrics where the bench does not read them); unset it"
        ]
    fixed = [n for n in FIXED_BY_ARMS if (env.get(n) or "").strip()]
    if fixed:
        return [f"{', '.join(fixed)} set: each arm sets its reward and placement itself; unset them"]
    return []


def gpu_errors(gpus: list[str]) -> list[str]:
    """Why the runs cannot have these GPUs ([]: none): no GPU here, or an index nvidia-smi does not list."""
    seen = gpu_names()
    if seen is None:
        return ["no GPU (nvidia-smi fails or is missing); DRY_RUN=1 checks the arms' configs on CPU"]
    ids = {ln.split(",")[0].strip() for ln in seen}
    missing = [g for g in gpus if g.isdigit() and g not in ids]
    if missing:
        return [f"--gpus {','.join(missing)}: no such GPU; nvidia-smi lists {', '.join(sorted(ids))}"]
    return []


def settings_of(cfg: Bench, interleave: bool) -> dict:
    """The bench's settings as the report tells them."""
    unit = "GPU" if cfg.gpus_per_arm == 1 else f"group of {cfg.gpus_per_arm} GPUs"
    return {
        "arms": cfg.arms,
        "base": cfg.base,
        "definitions": {a: {"recipe": cfg.table[a][0], "overrides": cfg.table[a][1]} for a in cfg.arms},
        "placement": f"interleaved on GPU {cfg.slots[0]}" if interleave else f"one arm per {unit}, started together",
        "gpus": cfg.gpus,
        "steps": cfg.steps,
        "rounds": cfg.rounds,
        "overrides": cfg.overrides,
    }


def exit_status(interrupted: bool, terminated: list[int], failed: list[Run]) -> int:
    if interrupted and not terminated:
        raise services.Interrupted  # the command line then dies of SIGINT (services.as_command)
    return 130 if interrupted else (1 if failed else 0)


def write_report(rep: dict, failed: list[Run], out: str) -> None:
    """``OUT/cost.json`` and ``OUT/cost.md`` (printed too) of report ``rep``; then the runs that failed."""
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "cost.json"), rep)
    text = markdown(rep)
    write_text(os.path.join(out, "cost.md"), text)
    print(text, flush=True)
    for r in failed:
        what = "was not started" if r.rc is None else r.error or f"exited {r.rc}"
        say(WHO, f"{r.arm} (round {r.round}) {what}: {r.log}")
    say(WHO, f"report: {os.path.join(out, 'cost.md')} and cost.json")


def main(argv=None, env=None) -> int:
    env = dict(os.environ if env is None else env)
    cfg = parse(sys.argv[1:] if argv is None else argv)
    dry, custom = is_dry(env), cfg.launcher is not None
    errors = env_errors(env) or ([] if dry or custom else gpu_errors(cfg.gpus))
    for m in errors:
        say(WHO, f"ERROR: {m}")
    if errors:
        return 2
    launcher = shlex.split(cfg.launcher) if custom else [sys.executable, "-m", "scripts.launch"]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = os.path.abspath(cfg.out or os.path.join(ROOT, "outputs", "judge_cost", stamp))
    interleave = cfg.interleave or dry  # a dry run checks one arm after another (no GPU, a few seconds each)
    waves = plan_runs(cfg.arms, cfg.slots, interleave, cfg.rounds, cfg.steps, out, cfg.overrides, launcher, cfg.table)
    runs = [r for w in waves for r in w]
    settings = settings_of(cfg, interleave)
    checks = " (DRY_RUN: config checks only)" if dry else ""
    say(WHO, f"{len(runs)} run(s), {settings['placement']}{checks}; results: {out}")
    interrupted, terminated = run_waves(waves, env, cfg.run_timeout, cfg.stop_grace)
    for r in runs if not dry else []:  # a dry run logs no steps
        if r.rc == 0 and not train_steps(r.metrics)[cfg.skip_first :]:
            r.error = "finished but logged no steps"
            say(WHO, f"{r.arm} (round {r.round}): exit 0, but no step after the first {cfg.skip_first} in {r.metrics}")
    failed = [r for r in runs if r.rc != 0 or r.error]
    if dry:
        for r in runs:
            say(WHO, f"DRY_RUN {r.arm}: {'config OK' if r.rc == 0 else f'exit {r.rc}, see {r.log}'}")
    else:
        command = shlex.join(
            ["python", "-m", "scripts.lab.bench.judge_cost", *(sys.argv[1:] if argv is None else argv)]
        )
        rep = report(runs, settings, command, cfg.skip_first, cfg.table)
        write_report(masked(rep, env), failed, out)  # credentials in overrides
    return exit_status(interrupted, terminated, failed)


if __name__ == "__main__":
    sys.exit(services.as_command(main))
