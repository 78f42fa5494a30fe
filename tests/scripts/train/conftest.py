"""Every test here starts and ends with verl's own trainer functions: what ``scripts.train.hooks.install`` and
``scripts.train.deferred_reward.install`` replace (their ``PATCHED``) is put back after each test, so that no test's
hooks wrap another's."""

from __future__ import annotations

import importlib

import pytest

from scripts.train import deferred_reward, hooks


def patched_attributes():
    """``(owner, name)`` of everything the two installs replace."""
    out = []
    for table in (hooks.PATCHED, deferred_reward.PATCHED):
        for module, paths in table.items():
            for path in paths:
                owner = importlib.import_module(module)
                *parents, name = path.split(".")
                for parent in parents:
                    owner = getattr(owner, parent)
                out.append((owner, name))
    return out


@pytest.fixture(autouse=True)
def _verls_own_trainer(monkeypatch):
    for owner, name in patched_attributes():
        monkeypatch.setattr(owner, name, getattr(owner, name))
