"""Multi-head self-attention as ONNX nodes, the way PyTorch exporters write it.

Q, K and V are linear maps of the tokens (one fused ``[hidden, 3 hidden]`` MatMul and a
Split for GPT-2, three MatMuls otherwise), reshaped to ``[1, heads, tokens, head_dim]``;
the scores ``Q K^T / sqrt(head_dim)`` (plus a constant causal mask if given) go through
Softmax over the keys and weight V; the heads are merged and projected back.
"""

from __future__ import annotations

import numpy as np

from autoplace.zoo.configs import Transformer
from autoplace.zoo.layers import Builder, linear

#: Added to the scores of masked (future) positions: exp() of it is 0 in float32.
MASKED = -1e4


def causal_mask(b: Builder, tokens: int) -> str:
    """A constant ``[1, 1, tokens, tokens]`` bias: 0 where a query may see the key (key
    index <= query index), :data:`MASKED` above the diagonal."""
    mask = np.triu(np.full((tokens, tokens), MASKED, dtype=np.float32), k=1)
    return b.const("causal_mask", mask.reshape(1, 1, tokens, tokens))


def _heads(b: Builder, x: str, cfg: Transformer, perm: list[int]) -> str:
    """``[1, tokens, hidden]`` -> ``[1, tokens, heads, head_dim]``, transposed by ``perm``."""
    split = b.node("Reshape", [x, b.ints([1, cfg.tokens, cfg.heads, cfg.head_dim])])
    return b.node("Transpose", [split], perm=perm)


def _qkv(b: Builder, x: str, cfg: Transformer, prefix: str, fused: bool) -> list[str]:
    """The Q, K and V projections of ``x``."""
    h = cfg.hidden
    if not fused:
        return [linear(b, x, h, h, f"{prefix}.{n}") for n in ("query", "key", "value")]
    qkv = linear(b, x, h, 3 * h, f"{prefix}.qkv")
    return b.node("Split", [qkv, b.ints([h, h, h])], outputs=3, axis=-1)


def attention(b: Builder, x: str, cfg: Transformer, prefix: str, *, mask: str | None = None,
              fused: bool = False) -> str:
    """Self-attention of ``x`` (``[1, tokens, hidden]``); ``mask``: a score bias to add
    (see :func:`causal_mask`); ``fused``: one QKV MatMul and a Split (GPT-2's ``c_attn``)."""
    q, k, v = _qkv(b, x, cfg, prefix, fused)
    q = _heads(b, q, cfg, [0, 2, 1, 3])
    k = _heads(b, k, cfg, [0, 2, 3, 1])  # K transposed: [1, heads, head_dim, tokens]
    v = _heads(b, v, cfg, [0, 2, 1, 3])
    scale = b.const(f"{prefix}.scale", np.array(np.sqrt(cfg.head_dim), dtype=np.float32))
    scores = b.node("Div", [b.node("MatMul", [q, k]), scale])
    if mask is not None:
        scores = b.node("Add", [scores, mask])
    probs = b.node("Softmax", [scores], axis=-1)
    merged = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [merged, b.ints([1, cfg.tokens, cfg.hidden])])
    return linear(b, merged, cfg.hidden, cfg.hidden, f"{prefix}.out")
