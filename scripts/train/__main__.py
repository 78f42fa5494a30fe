"""``python -m scripts.train``: the trainer (scripts/train/trainer.py); the launcher and Ray jobs run this. Without
``--config-path``, ``--help`` says how recipes call it, before verl and Ray are imported."""

import sys

USAGE = """usage: python -m scripts.train --config-path RECIPE_DIR --config-name config [hydra overrides ...]

verl 0.9.1's PPO trainer plus the verl_judge hooks (scripts/train/hooks.py). Recipes call it through the launcher,
which composes and checks the config first:

    bash recipes/gsm8k_rule/run.sh trainer.total_training_steps=50    # a recipe, with Hydra overrides
    DRY_RUN=1 bash recipes/gsm8k_rule/run.sh                          # check only; CPU is fine
    python -m scripts.launch --knobs                                  # the environment variables

With --config-path, --help is Hydra's own (the composed config)."""

if {"-h", "--help"} & set(sys.argv[1:]) and not any(a.startswith("--config-path") for a in sys.argv[1:]):
    print(USAGE)
    sys.exit(0)

from scripts.train.trainer import main  # noqa: E402  (verl and Ray: imported only to train)

main()
