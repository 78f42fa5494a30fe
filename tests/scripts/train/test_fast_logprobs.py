"""scripts/train/fast_logprobs.py: the same log-probabilities (and gradients) as verl's row loop, in a few kernels.

Drives verl's own functions: the original ``verl.utils.torch_functional.logprobs_from_logits_v2`` (kept by the
module before it replaces it) is the reference, and ``logprobs_from_logits`` (what verl's FSDP engine calls) is
checked to reach the chunked version where flash-attn is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import verl.utils.torch_functional as verl_F
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

import scripts
from scripts.train import fast_logprobs
from scripts.train.fast_logprobs import CHUNK_ROWS, logprobs_from_logits_chunked

ROOT = scripts.ROOT
VERL_ROW_LOOP = fast_logprobs._VERL_ROW_LOOP


class CountOps(TorchDispatchMode):
    """Counts aten calls by name (the kernels a CUDA run would launch one by one)."""

    def __init__(self):
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def case(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(*shape, generator=g) * 3).to(dtype).requires_grad_(True)
    labels = torch.randint(0, shape[-1], shape[:-1], generator=g)
    return logits, labels


# shape of the logits, dtype: verl's engine passes (tokens, vocab) without remove-padding, (batch, seq, vocab) elsewhere
CASES = [
    ((5, 7), torch.float32),
    ((2, 3, 7), torch.float32),
    ((CHUNK_ROWS * 2 + 3, 11), torch.float32),  # three chunks, the last one partial
    ((CHUNK_ROWS + 1, 11), torch.bfloat16),  # verl's bf16 branch: log_softmax then gather
    ((4, 9), torch.float64),
    ((1, 2), torch.float16),
]


@pytest.mark.parametrize("shape,dtype", CASES)
def test_same_values_and_gradients_as_verls_row_loop(shape, dtype):
    logits, labels = case(shape, dtype)
    want = VERL_ROW_LOOP(logits, labels)
    (want.float() * torch.arange(want.numel()).reshape(want.shape)).sum().backward()
    want_grad, logits.grad = logits.grad.clone(), None
    got = logprobs_from_logits_chunked(logits, labels)
    (got.float() * torch.arange(got.numel()).reshape(got.shape)).sum().backward()
    assert got.shape == labels.shape and got.dtype == dtype
    assert torch.equal(got, want)
    assert torch.equal(logits.grad, want_grad)


def test_no_rows():
    logits, labels = torch.zeros(0, 7), torch.zeros(0, dtype=torch.long)
    assert logprobs_from_logits_chunked(logits, labels).shape == (0,)


def test_verls_entry_point_reaches_the_chunked_version():
    """What verl's engine calls (``logprobs_from_logits``) lands here when flash-attn is not importable."""
    assert verl_F.logprobs_from_logits_v2 is logprobs_from_logits_chunked
    if verl_F.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE:
        pytest.skip("flash-attn installed: verl uses its Triton cross-entropy and never calls the fallback")
    logits, labels = case((CHUNK_ROWS + 5, 13), torch.float32)
    assert torch.equal(verl_F.logprobs_from_logits(logits, labels), VERL_ROW_LOOP(logits, labels))


@pytest.mark.parametrize(
    "rows,verl_calls,chunked_calls",
    [
        (1, 1, 1),
        (CHUNK_ROWS, CHUNK_ROWS, 1),
        (3 * CHUNK_ROWS + 1, 3 * CHUNK_ROWS + 1, 4),
    ],
)
def test_kernel_count_is_per_chunk_not_per_token(rows, verl_calls, chunked_calls):
    """The cause of the slow step: verl's loop runs one logsumexp per row (per token), forward and backward."""
    logits, labels = case((rows, 5), torch.float32)
    for fn, want in ((VERL_ROW_LOOP, verl_calls), (logprobs_from_logits_chunked, chunked_calls)):
        with CountOps() as ops:
            fn(logits, labels).sum().backward()
        assert ops.counts["logsumexp"] == want, fn


def test_loaded_by_verls_external_lib_hook_in_grpo_and_sft():
    base = yaml.safe_load(open(os.path.join(ROOT, "recipes", "base.yaml")))
    assert base["actor_rollout_ref"]["model"]["external_lib"] == "scripts.train.fast_logprobs"
    pipeline = open(os.path.join(ROOT, "scripts", "workflows", "pipeline.py")).read()
    assert '"model.external_lib=scripts.train.fast_logprobs"' in pipeline
    # a fresh process, as a verl worker is: verl's own hook imports the module, which installs itself
    code = (
        "import verl.utils.torch_functional as F; before = F.logprobs_from_logits_v2.__module__; "
        "from verl.utils.import_utils import import_external_libs; "
        "import_external_libs('scripts.train.fast_logprobs'); "
        "print(before, F.logprobs_from_logits_v2.__module__)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["verl.utils.torch_functional", "scripts.train.fast_logprobs"]
