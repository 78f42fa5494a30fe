"""Workflows: stages wired into experiments, resumable, each stage a command with its log.

    python -m scripts.pipeline judge_to_reward --out runs/j2r        # train a judge, then reuse it as the reward

``stages`` (one run: folder, environment, resumable stages, background chains), ``steps`` (the stage bodies, plain
functions of their inputs and outputs), ``cli`` (the options both commands share), ``pipeline`` (``judge`` and
``judge_to_reward``); the lab's ``scripts.lab.policy_learns`` is a side-by-side experiment over them. A new experiment
is a short function over these (``flow.stage(name, flow.path(name), run)`` per step, run by ``flow.guarded``), not a
subclass.
"""
