"""``python -m scripts.launch``: the launcher (scripts/launch/launcher.py)."""

import sys

from scripts.launch.launcher import main
from scripts.launch.services import as_command

sys.exit(as_command(lambda: main(sys.argv[1:])))
