"""The code's width and lint rules (pyproject.toml ``[tool.ruff]``): ``ruff check`` and ``ruff format --check`` pass on
the whole repository, as a contributor runs them:

    .venv/bin/ruff check . && .venv/bin/ruff format --check .
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import scripts


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff(args):
    r = subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=scripts.ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
