"""verl-judge's commands and their library: ``launch/`` (the launcher and what it starts), ``train/`` (the trainer that
runs in the Ray job), ``workflows/`` (stages, the judge pipeline, the side-by-side experiment), ``eval/``, ``report/``,
``bench/``, ``serve/``. The layers: tests/scripts/test_scripts_layout.py.

    python -m scripts.launch <recipe> [overrides]     # what recipes/<recipe>/run.sh runs
"""

import os

#: the repository's root (recipes/, runtime_env.yaml, data/ and outputs/ defaults are found from it)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
