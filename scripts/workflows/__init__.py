"""Workflows: stages wired into experiments, resumable, each stage a command with its log.

    python -m scripts.pipeline judge_to_reward --out runs/j2r        # train a judge, then reuse it as the reward

``stages`` (one run: folder, environment, resumable stages, background chains), ``steps`` (the stage bodies that read
no settings), ``cli`` (the options both commands share), ``pipeline`` (``judge`` and ``judge_to_reward``, and the
stage bodies that read the settings); the lab's ``scripts.lab.policy_learns`` is a side-by-side experiment over them.

A new experiment is a short function over these, not a subclass; e.g. a judge, then two policies it rewards, one
with the trained judge, the other with the same judge asked only where the rule cannot read the answer:

    import functools
    from scripts.workflows import cli, pipeline, steps

    ROUTE = "++reward.custom_reward_function.reward_kwargs.mode=route"

    def judge_then_two_policies(flow, cfg):
        base = steps.start_model(flow.env)
        pipeline.policy_data_stage(flow, base)
        judge = pipeline.judge(flow, cfg)
        for name, extra in (("policy", ()), ("policy_route", (ROUTE,))):
            run = functools.partial(pipeline.policy, flow, cfg, base, judge, name=name, extra=extra)
            flow.stage(name, flow.path(name), run)

    cfg = pipeline.parse_args(["judge_to_reward", "--out", "runs/x"])
    flow = cli.run_of(cfg)
    flow.guarded(lambda: judge_then_two_policies(flow, cfg))
"""
