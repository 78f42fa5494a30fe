"""``python -m scripts.policy_learns``, the documented command of the side-by-side experiment:
scripts/workflows/policy_learns.py."""

import sys

from scripts.launch.services import as_command
from scripts.workflows.policy_learns import main

if __name__ == "__main__":
    sys.exit(as_command(main))
