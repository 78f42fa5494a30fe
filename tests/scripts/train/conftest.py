"""Every test here starts and ends with verl's own trainer: what ``scripts.train.seam.install`` replaces (its
``PATCHED`` table) is put back after each test, so that no test's hooks wrap another's."""

from __future__ import annotations

import importlib

import pytest

from scripts.train import seam


def patched_attributes():
    """``(module, name)`` of every verl name the table lists."""
    return [(importlib.import_module(module), name) for module, names in seam.PATCHED.items() for name in names]


@pytest.fixture(autouse=True)
def _verls_own_trainer(monkeypatch):
    for owner, name in patched_attributes():
        monkeypatch.setattr(owner, name, getattr(owner, name))
