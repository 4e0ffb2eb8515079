"""Bundled transformer models, generated offline: BERT, ViT and GPT-2 stacks as ONNX.

The models are built with ``onnx.helper`` and seeded random weights (no download), one per
config in :data:`MODELS`; :func:`model_path` writes each once into a cache directory so
that every code path that takes an ONNX file takes them. Importing this package (or
:mod:`autoplace.zoo.configs`) does not import onnx; :mod:`autoplace.zoo.nets` does.
"""

from autoplace.zoo.cache import DEFAULT_CACHE, model_path
from autoplace.zoo.configs import MODELS, Transformer

__all__ = ["DEFAULT_CACHE", "MODELS", "Transformer", "model_path"]
