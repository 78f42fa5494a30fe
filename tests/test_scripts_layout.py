"""The evaluator / report / benchmark / server packages under scripts/: run as ``python -m
scripts.<group>.<name>``, no ``sys.path`` edits, one fake OpenAI server, nothing outside tests/ imports
tests/."""

from __future__ import annotations

import ast
import glob
import os

import pytest

from tests.layout_helpers import imports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = ("eval", "report", "bench", "serve")
PACKAGE_FILES = sorted(f for g in GROUPS for f in glob.glob(os.path.join(ROOT, "scripts", g, "*.py")))
OWN_FILES = PACKAGE_FILES + [os.path.join(ROOT, "scripts", "materialize_model.py")] + sorted(
    glob.glob(os.path.join(ROOT, "tests", "fixtures", "eval", "*.py")))
PRODUCT_FILES = sorted(f for d in ("scripts", "reward_fns", "data_prep")
                       for f in glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True))


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def _tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def test_the_groups_hold_these_modules():
    assert {g: sorted(os.path.basename(f) for f in PACKAGE_FILES if f.split(os.sep)[-2] == g) for g in GROUPS} == {
        "eval": ["__init__.py", "backends.py", "cli.py", "figures.py", "gsm8k.py", "judge.py", "predictions.py",
                 "rows.py"],
        "report": ["__init__.py", "compare_evals.py", "metrics.py", "plot_metrics.py", "render.py", "summarize_run.py"],
        "bench": ["__init__.py", "judge_reward.py", "random_model.py", "ray_cluster.py", "rewards.py"],
        "serve": ["__init__.py", "cpu_judge.py", "fake_openai.py"],
    }


@pytest.mark.parametrize("path", OWN_FILES, ids=[_rel(p) for p in OWN_FILES])
def test_no_sys_path_edits(path):
    tree = _tree(path)
    edits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "path"
             and isinstance(n.value, ast.Name) and n.value.id == "sys"]
    assert edits == []


@pytest.mark.parametrize("path", PRODUCT_FILES, ids=[_rel(p) for p in PRODUCT_FILES])
def test_nothing_outside_tests_imports_tests(path):
    assert [m for m in imports(_tree(path)) if m.split(".")[0] in ("tests", "conftest")] == []


def test_one_fake_server_class():
    tree = _tree(os.path.join(ROOT, "scripts", "serve", "fake_openai.py"))
    servers = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Server")]
    assert servers == ["FakeOpenAIServer"]
