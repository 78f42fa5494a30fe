"""A judge outage replayed on a run's rollouts: what fallback and abstain do to the GRPO signal.

    python -m scripts.lab.bench.abstain RUN_ROLLOUTS_DIR [--fail 0.2] [--seed 0] [--json OUT.json]

Each dumped step (``trainer.rollout_data_dir``: every sample's prompt, the reward it was paid and the rule's grade) is
grouped by prompt, as GRPO groups it. A share ``--fail`` of the samples' judge calls fails at random (the same draws
for every mode). The failed samples then get:

- ``fallback=rule``: the rule's grade (``llm_judge``'s default, ``judge_failure="fallback"``);
- ``fallback=0``: a constant 0 (``fallback=0.0``);
- ``abstain``: no reward (``judge_failure="abstain"``): each is put in a group of its own and its advantage zeroed,
  by the trainer's own ``train_hooks.leave_out`` and the same masking as ``train_hooks.mask_out``, which also zeroes
  a group's lone survivor (``train_hooks.lone_survivors``: fewer than two scored samples left, no baseline).

verl's ``compute_grpo_outcome_advantage`` gives every sample's advantage, and each mode is compared with the same
samples without failures: the share of samples that still carry gradient; of the samples with a reference advantage,
the share whose signal is lost (advantage 0) and the share whose advantage has the other sign; and the mean absolute
advantage error of the samples that carry gradient (the noise in the gradient that remains).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

import numpy as np

from data_prep.files.readers import read_jsonl
from scripts.lab.scorecard import dumped_steps

MODES = ("fallback=rule", "fallback=0", "abstain")


def load(folder: str) -> list[list[dict]]:
    """Every dumped step of ``folder`` (``<step>.jsonl``), in step order; each a list of samples."""
    steps = dumped_steps(folder)
    if not steps:
        raise ValueError(f"{folder}: no <step>.jsonl rollout dumps (verl's trainer.rollout_data_dir)")
    return [read_jsonl(os.path.join(folder, f"{s}.jsonl")) for s in steps]


def advantages(scores: np.ndarray, uids: np.ndarray) -> np.ndarray:
    """verl's GRPO outcome advantage of one-token responses."""
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    rewards = torch.tensor(scores, dtype=torch.float32).unsqueeze(-1)
    adv, _ = compute_grpo_outcome_advantage(rewards, torch.ones_like(rewards), uids)
    return adv.squeeze(-1).numpy()


def replay(step: list[dict], failed: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, reference advantages)`` of one step's samples when ``failed`` judge calls fail under ``mode``."""
    from scripts.train.hooks import leave_out, lone_survivors

    paid = np.array([float(s["score"]) for s in step])
    rule = np.array([float(s.get("rule_score", 0.0)) for s in step])
    uids = np.array([str(s["input"]) for s in step], dtype=object)
    reference = advantages(paid, uids)
    if mode == "abstain":
        adv = advantages(np.where(failed, 0.0, paid), leave_out(uids, failed))
        adv[failed | lone_survivors(uids, failed)] = 0.0  # train_hooks.mask_out, lone survivors too
    else:
        adv = advantages(np.where(failed, rule if mode == "fallback=rule" else 0.0, paid), uids)
    return adv, reference


def measure(steps: list[list[dict]], fail: float, seed: int = 0) -> dict:
    """Per mode, over every step: ``gradient`` (share of samples with a nonzero advantage); of the samples with a
    nonzero reference advantage, ``lost`` (now 0) and ``flipped`` (now of the other sign); ``abs_error`` (mean
    |advantage - reference| of the samples with a nonzero advantage)."""
    rng = np.random.default_rng(seed)
    draws = [rng.random(len(s)) < fail for s in steps]
    out = {}
    for mode in MODES:
        acc = defaultdict(list)
        for step, failed in zip(steps, draws):
            adv, ref = replay(step, failed, mode)
            acc["adv"].append(adv)
            acc["ref"].append(ref)
        adv, ref = np.concatenate(acc["adv"]), np.concatenate(acc["ref"])
        signed, live = np.abs(ref) > 1e-6, np.abs(adv) > 1e-6
        out[mode] = {
            "gradient": float(live.mean()),
            "lost": float((signed & ~live).sum() / max(signed.sum(), 1)),
            "flipped": float((signed & live & (np.sign(adv) != np.sign(ref))).sum() / max(signed.sum(), 1)),
            "abs_error": float(np.abs(adv - ref)[live].mean()) if live.any() else 0.0,
        }
    out["reference_gradient"] = float(
        (np.abs(np.concatenate([replay(s, np.zeros(len(s), bool), "abstain")[1] for s in steps])) > 1e-6).mean()
    )
    out["failed_share"] = float(np.concatenate(draws).mean())
    return out


def table(res: dict) -> str:
    rows = [
        f"| {m} | {res[m]['gradient']:.3f} | {res[m]['lost']:.3f} | {res[m]['flipped']:.3f} "
        f"| {res[m]['abs_error']:.3f} |"
        for m in MODES
    ]
    return "\n".join(
        [
            "| mode | samples with gradient | signal lost | sign flipped | mean abs advantage error (with gradient) |",
            "|---|---:|---:|---:|---:|",
            *rows,
            f"\nWithout failures {res['reference_gradient']:.3f} of the samples carry gradient; "
            f"{res['failed_share']:.3f} of the judge calls failed.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.abstain",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("rollouts", help="a run's rollout dumps (trainer.rollout_data_dir: <step>.jsonl)")
    p.add_argument("--fail", type=float, default=0.2, help="share of judge calls that fail, at random (default 0.2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers as JSON")
    a = p.parse_args(argv)
    if not 0 <= a.fail <= 1:
        p.error(f"--fail must be in [0, 1], got {a.fail}")
    if not os.path.isdir(a.rollouts):
        p.error(f"{a.rollouts}: no such folder")
    try:
        res = measure(load(a.rollouts), a.fail, a.seed)
    except (ValueError, KeyError) as e:
        p.error(str(e))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
