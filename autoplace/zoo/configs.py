"""Configurations of the generated transformer models (no onnx import: a light leaf).

Each bundled transformer is one frozen config; :mod:`autoplace.zoo.nets` builds its ONNX
model from it. Widths follow the published models (BERT-base: Devlin et al. 2019; BERT-tiny:
Turc et al. 2019; ViT-Ti: Touvron et al. 2021; GPT-2 small: Radford et al. 2019); the ViT
has 4 of ViT-Ti's 12 layers and ``gpt2_block`` 2 of GPT-2's 12, so that they compile and run
in seconds. Every shape is static (a fixed sequence length, batch 1).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Transformer:
    """A transformer encoder/decoder stack.

    ``arch`` is ``"bert"`` (post-LN encoder on hidden states), ``"vit"`` (patch embedding,
    class token, pre-LN encoder, classifier) or ``"gpt2"`` (pre-LN causal decoder on hidden
    states). ``seq`` is the number of tokens (for a ViT it follows from ``image`` and
    ``patch``); ``seed`` seeds the weights.
    """

    arch: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    seq: int = 0
    eps: float = 1e-5
    image: int = 0
    patch: int = 0
    channels: int = 3
    classes: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.arch not in ("bert", "vit", "gpt2"):
            raise ValueError(f"arch must be bert, vit or gpt2, got arch={self.arch!r}")
        for name in ("layers", "hidden", "heads", "intermediate"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} > 0 must hold, got {name}={getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden % heads == 0 must hold, got hidden={self.hidden}, "
                             f"heads={self.heads}")
        if self.arch == "vit" and (self.patch <= 0 or self.image % self.patch or self.classes <= 0):
            raise ValueError(f"a vit needs patch > 0 dividing image and classes > 0, got "
                             f"image={self.image}, patch={self.patch}, classes={self.classes}")
        if self.arch != "vit" and self.seq <= 0:
            raise ValueError(f"seq > 0 must hold, got seq={self.seq}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def tokens(self) -> int:
        """Sequence length seen by the attention: patches plus the class token for a ViT."""
        if self.arch == "vit":
            return (self.image // self.patch) ** 2 + 1
        return self.seq


#: The bundled transformers by name.
MODELS: dict[str, Transformer] = {
    "bert_tiny": Transformer(arch="bert", layers=2, hidden=128, heads=2, intermediate=512,
                             seq=128, eps=1e-12),
    "bert_base": Transformer(arch="bert", layers=12, hidden=768, heads=12, intermediate=3072,
                             seq=128, eps=1e-12),
    "vit_tiny": Transformer(arch="vit", layers=4, hidden=192, heads=3, intermediate=768,
                            eps=1e-6, image=224, patch=16, classes=1000),
    "gpt2_block": Transformer(arch="gpt2", layers=2, hidden=768, heads=12, intermediate=3072,
                              seq=128),
}
