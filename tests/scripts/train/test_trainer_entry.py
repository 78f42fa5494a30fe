"""``python -m scripts.train --help`` without a recipe: how recipes call the trainer, printed before verl and Ray are
imported (not Hydra's empty config); with ``--config-path`` the help is Hydra's."""

from __future__ import annotations

import subprocess
import sys

import scripts


def test_help_without_a_recipe_says_how_recipes_call_it():
    r = subprocess.run(
        [sys.executable, "-m", "scripts.train", "--help"], cwd=scripts.ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage: python -m scripts.train --config-path RECIPE_DIR --config-name config")
    assert "bash recipes/gsm8k_rule/run.sh" in r.stdout


def test_the_help_imports_neither_verl_nor_ray():
    code = (
        "import runpy, sys\nsys.argv = ['x', '-h']\ntry:\n    runpy.run_module('scripts.train', run_name='__main__')\n"
        "except SystemExit:\n    pass\nprint(sorted(m for m in ('verl', 'ray') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=scripts.ROOT, capture_output=True, text=True, timeout=120)
    assert r.stdout.splitlines()[-1] == "[]", r.stdout + r.stderr[-2000:]
