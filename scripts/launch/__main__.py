"""``python -m scripts.launch``: the launcher (scripts/launch/launcher.py)."""

import sys

from scripts.launch.launcher import as_command, main

sys.exit(as_command(lambda: main(sys.argv[1:])))
