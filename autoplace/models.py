"""Bundled models and graph loading by name or path.

The op graphs of the bundled models are shipped precomputed in ``autoplace/data/graphs``
so that :func:`load_graph` of a bundled name never imports TVM; regenerate them with
``python -m autoplace.models --regenerate``. TVM is only imported (via
:mod:`autoplace.frontend`) when a module is really needed.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autoplace.graph import GraphError, OpGraph

if TYPE_CHECKING:
    import tvm

#: input name -> shape: fixes a model's symbolic input dimensions (``--input-shapes``)
Shapes = Mapping[str, Sequence[int]]

#: Bundled graphs by short name: the ONNX file in ``onnx/backend/test/data/light``, or
#: ``None`` for the TE seed example.
BUNDLED: dict[str, str | None] = {
    "squeezenet": "light_squeezenet.onnx",
    "resnet50": "light_resnet50.onnx",
    "densenet121": "light_densenet121.onnx",
    "inception_v1": "light_inception_v1.onnx",
    "inception_v2": "light_inception_v2.onnx",
    "shufflenet": "light_shufflenet.onnx",
    "vgg19": "light_vgg19.onnx",
    "alexnet": "light_bvlc_alexnet.onnx",
    "zfnet512": "light_zfnet512.onnx",
    "seed_te": None,
}

#: Where the precomputed op graphs of the bundled models live.
GRAPH_DIR = Path(__file__).resolve().parent / "data" / "graphs"


def _unknown(spec: object, why: str) -> GraphError:
    return GraphError(f"{spec}: {why}; bundled graphs are: {', '.join(BUNDLED)}")


def onnx_model_dir() -> Path:
    """The directory of the light model-zoo ONNX files shipped in the ``onnx`` package."""
    spec = importlib.util.find_spec("onnx")
    if spec is None or spec.origin is None:
        raise GraphError("the onnx package is not installed; bundled ONNX models unavailable")
    return Path(spec.origin).parent / "backend" / "test" / "data" / "light"


def bundled_onnx_path(name: str) -> Path:
    """Path of the ONNX file of bundled model ``name``."""
    if BUNDLED.get(name) is None:
        raise _unknown(name, "not a bundled ONNX model")
    return onnx_model_dir() / BUNDLED[name]


def _resolve_path(spec: str | Path, suffixes: tuple[str, ...]) -> Path:
    path = Path(spec)
    if path.suffix.lower() not in suffixes:
        raise _unknown(spec, f"not a bundled name nor a {'/'.join(suffixes)} path")
    if not path.is_file():
        raise _unknown(spec, "no such file")
    return path


def load_module(spec: str | Path, shapes: Shapes | None = None
                ) -> tuple[tvm.IRModule, OpGraph]:
    """The Relax module (fused for ONNX, per-op for TE) and op graph of ``spec``.

    ``spec`` is a bundled name or the path of an ``.onnx`` file; ``shapes`` (input name ->
    shape) fixes an ONNX model's symbolic input dimensions. Imports TVM.
    """
    if str(spec) in BUNDLED and BUNDLED[str(spec)] is None:
        if shapes:
            raise GraphError(f"{spec}: --input-shapes: a TE graph has fixed shapes")
        from autoplace.frontend.te import from_te, seed_example

        return from_te(*seed_example(), str(spec))
    from autoplace.frontend.onnx import from_onnx

    if str(spec) in BUNDLED:
        return from_onnx(bundled_onnx_path(str(spec)), str(spec), shapes)
    path = _resolve_path(spec, (".onnx",))
    return from_onnx(path, path.stem, shapes)


def load_module_for(spec: str | Path, graph: OpGraph, shapes: Shapes | None = None
                    ) -> tvm.IRModule:
    """The fused module of ``spec`` (``shapes``: see :func:`load_module`), whose op graph
    must be ``graph`` (by fingerprint)."""
    mod, fresh = load_module(spec, shapes)
    if fresh.fingerprint != graph.fingerprint:
        raise GraphError(f"{spec}: the module's op graph (fingerprint {fresh.fingerprint}) "
                         f"differs from the graph planned ({graph.fingerprint}); regenerate "
                         "the shipped graphs (python -m autoplace.models --regenerate)")
    return mod


def load_graph(spec: str | Path, shapes: Shapes | None = None) -> OpGraph:
    """The op graph of ``spec``: a bundled name, an ``.onnx`` path or an ``OpGraph.save`` JSON;
    ``shapes``: see :func:`load_module`.

    Bundled names read the shipped JSON (no TVM import) and fall back to importing the
    model if that file is missing (or ``shapes`` are given).
    """
    if str(spec) in BUNDLED:
        shipped = GRAPH_DIR / f"{spec}.json"
        if shipped.is_file() and not shapes:
            return OpGraph.load(shipped)
        return load_module(spec, shapes)[1]
    path = _resolve_path(spec, (".onnx", ".json"))
    if path.suffix.lower() == ".json":
        if shapes:
            raise GraphError(f"{spec}: --input-shapes: an op graph (.json) has fixed shapes")
        return OpGraph.load(path)
    return load_module(path, shapes)[1]


def _summary(g: OpGraph) -> str:
    return (f"{g.name:13s} {len(g.ops):4d} ops {len(g.edges):4d} edges "
            f"{g.total_flops / 1e9:8.3f} GFLOP  {g.fingerprint}")


def regenerate(names: list[str] | None = None) -> list[Path]:
    """Re-import the bundled models and write their op graphs to :data:`GRAPH_DIR`."""
    GRAPH_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or list(BUNDLED):
        t0 = time.perf_counter()
        graph = load_module(name)[1]
        out = GRAPH_DIR / f"{name}.json"
        graph.save(out)
        written.append(out)
        print(f"{_summary(graph)}  ({time.perf_counter() - t0:.1f}s)", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m autoplace.models [--regenerate [NAME ...]]``: list or rebuild the graphs."""
    ap = argparse.ArgumentParser(prog="python -m autoplace.models", description=main.__doc__)
    ap.add_argument("--regenerate", nargs="*", metavar="NAME", default=None,
                    help="re-import bundled models (default: all) and rewrite their JSON")
    args = ap.parse_args(argv)
    if args.regenerate is not None:
        unknown = [n for n in args.regenerate if n not in BUNDLED]
        if unknown:
            ap.error(f"unknown bundled names {unknown}; choose from {', '.join(BUNDLED)}")
        regenerate(args.regenerate)
        return 0
    for name in BUNDLED:
        print(_summary(load_graph(name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
