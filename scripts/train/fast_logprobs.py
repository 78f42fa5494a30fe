"""Per-token log-probabilities over chunks of rows, for verl on machines without flash-attn.

Why: without flash-attn verl 0.9.1 falls back to ``verl.utils.torch_functional.logprobs_from_logits_v2``, which loops
over the first dimension one row at a time; with ``use_remove_padding=False`` (which torch SDPA needs) verl's FSDP
engine hands it logits of shape ``(tokens, vocab)`` (``workers/engine/fsdp/transformer_impl.py``, the ``NO_PADDING``
branch), so the loop runs once per token. Importing this module replaces that fallback with the same arithmetic over
``CHUNK_ROWS`` rows at a time (results match verl's loop; memory stays bounded). Loaded through verl's own hook, the
model config's ``external_lib`` (``recipes/base.yaml``); one row of ``scripts.train.seam.PATCHED``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import verl.utils.torch_functional as verl_F

CHUNK_ROWS = 1024  # rows of logits per kernel: 1024 x 49,152 fp32 logits = 201 MB at a time
_VERL_ROW_LOOP = verl_F.logprobs_from_logits_v2


def logprobs_from_logits_chunked(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)[label]`` for every row, ``CHUNK_ROWS`` rows at a time (verl's math)."""
    flat_logits = logits.reshape(-1, logits.shape[-1])
    flat_labels = labels.reshape(-1)
    parts = []
    for start in range(0, flat_logits.shape[0], CHUNK_ROWS):
        chunk = flat_logits[start : start + CHUNK_ROWS]
        index = flat_labels[start : start + CHUNK_ROWS].unsqueeze(-1)
        if chunk.dtype in (torch.float32, torch.float64):
            picked = torch.gather(chunk, dim=-1, index=index).squeeze(-1) - torch.logsumexp(chunk, dim=-1)
        else:  # verl: logsumexp is unstable in bf16, so log_softmax then gather
            picked = F.log_softmax(chunk, dim=-1).gather(dim=-1, index=index).squeeze(-1)
        parts.append(picked)
    if not parts:
        return flat_logits.new_empty(labels.shape)
    return torch.cat(parts).reshape(labels.shape)


verl_F.logprobs_from_logits_v2 = logprobs_from_logits_chunked  # verl's fallback: the chunked version
