"""Hydra override strings (``KEY=VALUE``): their key, a value that parses back as the string, later-wins merging.

The shell scripts use the command line; the launcher and the pipeline import it:

    python -m scripts.launch.overrides merge a=1 b=2 a=3       # one per line, a later key wins: b=2, a=3
    python -m scripts.launch.overrides value trainer.test_freq a=1 trainer.test_freq=5   # 5 (empty: not set)
"""

from __future__ import annotations

import re
import sys

_SAFE = re.compile(r"^[A-Za-z0-9_./@:+~-]+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def key(override: str) -> str:
    """The Hydra key of ``KEY=VALUE``, without a leading ``~``, ``+`` or ``++``."""
    return override.split("=", 1)[0].lstrip("~+")


def hydra_str(v: str) -> str:
    """A Hydra override value that always parses back to the string ``v``."""
    if (
        _SAFE.match(v)
        and not _NUMBER.match(v)
        and v.lower() not in ("true", "false", "null", "none", "nan", "inf", "-inf")
    ):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def merge(*groups: list[str]) -> list[str]:
    """The overrides in order, less each one whose key a later one sets again (Hydra refuses a second '+key')."""
    flat = [o for g in groups for o in g]
    return [o for i, o in enumerate(flat) if key(o) not in {key(later) for later in flat[i + 1 :]}]


def value(name: str, overrides: list[str]) -> str | None:
    """What the last override of key ``name`` sets (None: none does)."""
    found = [o.split("=", 1)[1] for o in overrides if "=" in o and key(o) == name]
    return found[-1] if found else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["merge"]:
        for o in merge(argv[1:]):
            print(o)
        return 0
    if argv[:1] == ["value"] and len(argv) >= 2:
        print(value(argv[1], argv[2:]) or "")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
