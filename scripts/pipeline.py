"""``python -m scripts.pipeline``, the documented command of the judge pipelines: scripts/workflows/pipeline.py."""

import sys

from scripts.launch.services import as_command
from scripts.workflows.pipeline import main

if __name__ == "__main__":
    sys.exit(as_command(main))
