"""The lab: does a policy learn from the judge it helped train? The experiment and its instruments.

    python -m scripts.lab.policy_learns --out runs/pl          # rule and judge runs side by side (bash scripts/main.sh)
    python -m scripts.lab.scorecard runs/card                     # gain / rule gain over instances, seeds, questions
    python -m scripts.lab.ledger pool docs/results/<a> docs/results/<b>   # instances pooled across kept runs
    python -m scripts.lab.bench.judge_cost --help                 # what a judge adds to a GRPO step

``policy_learns`` (the experiment; its ``arms``, ``instances``, ``reuse`` and ``report``), ``scorecard`` and
``scorecard_stats`` (the interval that resamples instances, then seeds, then questions), ``ledger`` (instances kept
across runs), ``disagreements`` (where judge and rule differ in the training rollouts), ``bench`` (benchmarks). The lab
imports the product (``reward_fns``, ``data_prep``, the rest of ``scripts``); nothing in the product imports the lab.
"""
