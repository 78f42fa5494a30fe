"""``python -m scripts.launch``: the launcher (scripts/launch/launcher.py)."""

import sys

from scripts.launch.launcher import main

sys.exit(main(sys.argv[1:]))
