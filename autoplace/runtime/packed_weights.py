"""Weights a kernel library reads packed: which ones, and in what shape.

A kernel whose default schedule packs a constant weight (:mod:`autoplace.deploy.prepack`)
is compiled as its compute, named as the kernel, which takes that weight packed, and a
function ``KERNEL__packP`` that packs its parameter *P* (:func:`pack_symbol`). The table of
a library's packs is a JSON file beside it (``X.so``: ``X.packs.json``, :func:`table_path`)
that goes where the library goes (:func:`copy_library`: an artefact, an RPC job); a library
without one packs nothing (a library in the runtime's cache without its table is compiled
again). The runtime packs each weight once per library and kernel, when the first placement
that calls the kernel there is assembled (``KernelLibraries.packed``), from the program's
weight: an op that keeps a packed weight resident in its own scope reads the packed copy, which is
in the host's memory, not that scope's (its pool still holds the resident copy).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from autoplace.deploy.targets import BuildError

SUFFIX = ".packs.json"
TABLE_FORMAT = "autoplace-packs"


@dataclass(frozen=True)
class PackSpec:
    """Parameter ``param`` of a kernel, read packed in ``shape``."""

    param: int
    shape: tuple[int, ...]
    dtype: str

    def to_dict(self) -> dict:
        return {"param": self.param, "shape": list(self.shape), "dtype": self.dtype}


def pack_symbol(func: str, param: int) -> str:
    """The name of the function that packs parameter ``param`` of kernel ``func``."""
    return f"{func}__pack{param}"


def table_path(library: Path) -> Path:
    """Where the pack table of the library at ``library`` is."""
    return Path(library).with_suffix(SUFFIX)


def write_table(library: Path, table: dict[str, tuple[PackSpec, ...]]) -> None:
    """Write the pack table of the library that will be at ``library`` (before it)."""
    packs = {f: [p.to_dict() for p in specs] for f, specs in sorted(table.items()) if specs}
    table_path(library).write_text(json.dumps({"format": TABLE_FORMAT, "packs": packs}) + "\n")


def read_table(library: Path) -> dict[str, tuple[PackSpec, ...]]:
    """The pack table beside ``library`` (empty when there is none); a table that is not
    one is a one-line BuildError naming its file."""
    path = table_path(library)
    if not path.is_file():
        return {}
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        if d.get("format") != TABLE_FORMAT:
            raise ValueError(f"format {d.get('format')!r}, not {TABLE_FORMAT!r}")
        return {str(f): tuple(_spec(p) for p in specs) for f, specs in d["packs"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BuildError(f"pack table {path}: not one ({exc})"[:300]) from None


def _spec(d: dict) -> PackSpec:
    shape = tuple(d["shape"])
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in shape) or \
            not isinstance(d["param"], int) or isinstance(d["param"], bool) or d["param"] < 0:
        raise ValueError(f"param {d['param']!r} shape {list(shape)}")
    return PackSpec(param=d["param"], shape=shape, dtype=str(d["dtype"]))


def copy_library(src: Path, dst: Path) -> None:
    """Copy the library at ``src`` to ``dst``, with its pack table when it has one."""
    shutil.copyfile(src, dst)
    if table_path(src).is_file():
        shutil.copyfile(table_path(src), table_path(dst))

