"""Workflows: stages wired into experiments, resumable, each stage a command with its log.

    python -m scripts.pipeline judge_to_reward --out runs/j2r        # train a judge, then reuse it as the reward
    python -m scripts.policy_learns --out runs/pl                    # the policy trained by the rule and by the judge

``stages`` (resumable stages, background chains), ``pipeline`` (the judge's stages and the judge pipelines),
``policy_learns`` (the side-by-side experiment).
"""
