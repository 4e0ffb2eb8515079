"""The transformer stacks: BERT encoder, ViT classifier, GPT-2 decoder, as ONNX models.

BERT and GPT-2 take the float hidden states ``[1, seq, hidden]`` as input, without the
token embeddings: an embedding is a Gather of int64 token ids from a ``vocab x hidden``
table (94 MB for BERT-base, 154 MB for GPT-2), almost free to compute but the largest
weight by far, and the random integer inputs a build check feeds (``[0, 10)``) would
exercise ten rows of it. What placement decides about, the layers, is unchanged. For the
same reason GPT-2 ends at its final layer norm, without the tied LM head. The ViT keeps
its whole front end (patch Conv, class token, position embeddings) as its input is an
image.
"""

from __future__ import annotations

import onnx

from autoplace.zoo.attention import attention, causal_mask
from autoplace.zoo.configs import Transformer
from autoplace.zoo.layers import Builder, layer_norm, linear, mlp, tensor


def _bert_layer(b: Builder, x: str, cfg: Transformer, prefix: str) -> str:
    """Post-LN encoder layer: ``x = LN(x + attn(x)); x = LN(x + mlp(x))``."""
    h = cfg.hidden
    x = b.node("Add", [x, attention(b, x, cfg, f"{prefix}.attention")])
    x = layer_norm(b, x, h, cfg.eps, f"{prefix}.attention.norm")
    x = b.node("Add", [x, mlp(b, x, h, cfg.intermediate, f"{prefix}.mlp")])
    return layer_norm(b, x, h, cfg.eps, f"{prefix}.mlp.norm")


def _pre_ln_layer(b: Builder, x: str, cfg: Transformer, prefix: str,
                  mask: str | None = None) -> str:
    """Pre-LN layer (ViT, GPT-2): ``x += attn(LN(x)); x += mlp(LN(x))``; GPT-2 (with a
    ``mask``) has a fused QKV projection and the tanh GELU."""
    h, gpt = cfg.hidden, mask is not None
    a = layer_norm(b, x, h, cfg.eps, f"{prefix}.ln_1")
    x = b.node("Add", [x, attention(b, a, cfg, f"{prefix}.attn", mask=mask, fused=gpt)])
    m = layer_norm(b, x, h, cfg.eps, f"{prefix}.ln_2")
    approx = "tanh" if gpt else "none"
    return b.node("Add", [x, mlp(b, m, h, cfg.intermediate, f"{prefix}.mlp", approx)])


def bert(cfg: Transformer, name: str) -> onnx.ModelProto:
    """A BERT encoder: hidden states in, last hidden states out."""
    b = Builder(cfg.seed)
    x = "hidden_states"
    for i in range(cfg.layers):
        x = _bert_layer(b, x, cfg, f"layer{i}")
    shape = [1, cfg.seq, cfg.hidden]
    return b.model(name, [tensor("hidden_states", shape)], [tensor(x, shape)])


def gpt2(cfg: Transformer, name: str) -> onnx.ModelProto:
    """A GPT-2 decoder stack with a constant causal mask, then the final layer norm."""
    b = Builder(cfg.seed)
    mask = causal_mask(b, cfg.tokens)
    x = "hidden_states"
    for i in range(cfg.layers):
        x = _pre_ln_layer(b, x, cfg, f"h{i}", mask=mask)
    x = layer_norm(b, x, cfg.hidden, cfg.eps, "ln_f")
    shape = [1, cfg.seq, cfg.hidden]
    return b.model(name, [tensor("hidden_states", shape)], [tensor(x, shape)])


def _patches(b: Builder, cfg: Transformer) -> str:
    """Patch embedding (Conv, kernel = stride = patch), class token and position
    embeddings: ``[1, tokens, hidden]``."""
    h, grid = cfg.hidden, cfg.image // cfg.patch
    w = b.weight("patch.weight", (h, cfg.channels, cfg.patch, cfg.patch))
    conv = b.node("Conv", ["pixel_values", w, b.weight("patch.bias", (h,))],
                  kernel_shape=[cfg.patch] * 2, strides=[cfg.patch] * 2)
    flat = b.node("Reshape", [conv, b.ints([1, h, grid * grid])])
    tokens = b.node("Concat", [b.weight("cls_token", (1, 1, h)),
                               b.node("Transpose", [flat], perm=[0, 2, 1])], axis=1)
    return b.node("Add", [tokens, b.weight("pos_embed", (1, cfg.tokens, h))])


def vit(cfg: Transformer, name: str) -> onnx.ModelProto:
    """A ViT classifier: image in, class logits (of the class token) out."""
    b = Builder(cfg.seed)
    x = _patches(b, cfg)
    for i in range(cfg.layers):
        x = _pre_ln_layer(b, x, cfg, f"blocks{i}")
    x = layer_norm(b, x, cfg.hidden, cfg.eps, "norm")
    # x[:, 0]: a Slice, not a Gather, which TVM imports as an opaque take kernel
    cls = b.node("Slice", [x, b.ints([0]), b.ints([1]), b.ints([1])])
    cls = b.node("Reshape", [cls, b.ints([1, cfg.hidden])])
    logits = linear(b, cls, cfg.hidden, cfg.classes, "head")
    image = [1, cfg.channels, cfg.image, cfg.image]
    return b.model(name, [tensor("pixel_values", image)], [tensor(logits, [1, cfg.classes])])


_ARCHS = {"bert": bert, "vit": vit, "gpt2": gpt2}


def build(cfg: Transformer, name: str) -> onnx.ModelProto:
    """The ONNX model of ``cfg``, its graph called ``name``; same config, same bytes."""
    return _ARCHS[cfg.arch](cfg, name)
