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


def joined_lines(root: str) -> list[str]:
    """``file:line`` of every triple-quoted, non-raw string of the product (``reward_fns``, ``data_prep``, ``scripts``)
    with a backslash at a line's end: Python joins the two lines, so a ``--help`` example continued with ``\\``
    prints as one line with a run of spaces in it."""
    import glob
    import os
    import re
    import tokenize

    found = []
    for pkg in ("reward_fns", "data_prep", "scripts"):
        for f in sorted(glob.glob(os.path.join(root, pkg, "**", "*.py"), recursive=True)):
            with open(f, "rb") as fh:
                for tok in tokenize.tokenize(fh.readline):
                    text = tok.string
                    if tok.type == tokenize.STRING and text[:3] in ('"""', "'''"):
                        if re.search(r"(?<!\\)(\\\\)*\\\n", text):
                            found.append(f"{os.path.relpath(f, root)}:{tok.start[0]}")
    return found


def test_no_docstring_joins_its_lines(tmp_path):
    assert joined_lines(scripts.ROOT) == []
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "m.py").write_text(
        '"""Run:\n\n    python -m m --a 1 \\\n        --b 2\n"""\nX = """ok \\\\\n"""\n'
    )
    assert joined_lines(str(tmp_path)) == ["scripts/m.py:1"]
