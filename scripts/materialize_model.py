#!/usr/bin/env python3
"""Materialise SmolLM2-135M-Instruct as a plain Hugging Face folder, offline, cached: the command line of
``data_prep.model`` (which does the work; installed with the project, ``pip install -e .``), kept as a
script path. Prints the folder on its last line.

    python scripts/materialize_model.py [--out DIR] [--force]      # the same as python -m data_prep.model
"""

from __future__ import annotations

import sys

from data_prep.model import main

if __name__ == "__main__":
    sys.exit(main())
