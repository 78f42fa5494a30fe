"""Helpers the layout tests share: the absolute imports of a Python module, read with ``ast``."""

from __future__ import annotations

import ast


def imports(tree: ast.AST) -> list[str]:
    """Every absolute module a tree imports (``import a.b`` -> ``a.b``; ``from a import b`` -> ``a``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.append(node.module or "")
    return out
