"""The build a user deploys: per-unit kernel libraries and the schedule, in one directory.

``autoplace compile`` writes it, ``autoplace run DIR`` runs it (docs/runtime.md, "The
artefact"). The directory holds ``manifest.json`` (format ``autoplace-placed``), the kernel
library of each unit the placement uses (units of one target share one), the weights, the
profile as TOML and the op graph as JSON. The manifest also records the program (each
kernel's arguments and outputs) and the schedule with its simulated timing, so that a
board's own runtime can follow it without autoplace. Loading checks every file as
:mod:`autoplace.deploy.artefact` says before anything is mapped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import tvm

from autoplace.deploy.artefact import (
    MANIFEST,
    PLACED_FORMAT,
    PLACED_VERSION,
    ArtefactError,
    field,
    file_entry,
    loadable,
    manifest_format,
    member,
    read_manifest,
)
from autoplace.graph import GraphError, OpGraph
from autoplace.hardware.load import profile_from_toml
from autoplace.hardware.profile import ProfileError
from autoplace.hardware.write import to_toml
from autoplace.runtime import Runtime
from autoplace.runtime.packed_weights import copy_library, table_path
from autoplace.runtime.program import WEIGHTS_FILE, Program
from autoplace.space import Placement, PlacementError

FORMAT, VERSION = PLACED_FORMAT, PLACED_VERSION


def write_artefact(directory: str | Path, rt: Runtime, placement: Placement, *,
                   model: str | None = None, input_shapes: dict | None = None,
                   record: dict | None = None) -> Path:
    """Write ``placement`` of ``rt``'s model as an artefact into ``directory``; the
    manifest's path. ``model`` names the model and ``input_shapes`` gives its inputs'
    shapes (``--input-shapes``), so that ``run --check`` can build it again."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    libraries, copied = {}, {}
    for unit in rt.kernel_units(placement):
        rt.libraries.build(unit)
        src = rt.libraries.path(unit)
        if src not in copied:
            copied[src] = out / f"kernels-{len(copied)}.so"
            copy_library(src, copied[src])
        packs = table_path(copied[src])
        libraries[unit] = {**file_entry(out, copied[src]), "arch": rt.libraries.arch(unit),
                           **({"packs": file_entry(out, packs)} if packs.is_file() else {})}
    weights = out / WEIGHTS_FILE
    weights.write_bytes(tvm.runtime.save_param_dict(
        {f"w{i}": v for i, v in enumerate(rt.program.weight_values)}))
    (out / "profile.toml").write_text(to_toml(rt.profile, "the profile this build runs on"))
    (out / "graph.json").write_text(json.dumps(rt.graph.to_dict()))
    timing = rt.timing(placement)
    regions = rt.regions(placement)
    manifest = {
        "format": FORMAT, "version": VERSION,
        "graph": {"name": rt.graph.name, "fingerprint": rt.graph.fingerprint,
                  **({"model": model} if model else {}),
                  **({"input_shapes": {k: list(v) for k, v in input_shapes.items()}}
                     if input_shapes else {}),
                  **file_entry(out, out / "graph.json")},
        "profile": {"name": rt.profile.name, "hash": rt.profile.hash,
                    **file_entry(out, out / "profile.toml")},
        "placement": placement.to_dict(), "record": record or {},
        "libraries": libraries, "weights": file_entry(out, weights),
        "program": rt.program.to_dict(), "schedule": timing.to_dict(),
        **({"regions": [c.to_dict() for c in regions]} if regions else {}),
    }
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path


@dataclass(frozen=True)
class Artefact:
    """A loaded artefact: its runtime (libraries from the directory), placement, manifest."""

    runtime: Runtime
    placement: Placement
    manifest: dict


def is_artefact(directory: str | Path) -> bool:
    """Whether ``directory`` holds a manifest of this format (whatever its version)."""
    return manifest_format(Path(directory) / MANIFEST) == FORMAT


def load_artefact(directory: str | Path) -> Artefact:
    """The artefact in ``directory``, every file checked before it is read or loaded."""
    root = Path(directory)
    path = root / MANIFEST
    m = read_manifest(path, FORMAT, (VERSION,))
    graph_entry, profile_entry = field(m, "graph", dict, path), field(m, "profile", dict, path)
    try:
        graph = OpGraph.from_dict(json.loads(member(root, graph_entry, "graph").read_text()),
                                  source=str(root / "graph.json"))
        profile = profile_from_toml(member(root, profile_entry, "profile").read_text(),
                                    str(root / "profile.toml"))
        placement = Placement.from_dict(field(m, "placement", dict, path))
        program = Program.from_dict(field(m, "program", dict, path))
    except (GraphError, ProfileError, PlacementError, KeyError, TypeError, ValueError) as exc:
        raise ArtefactError(f"{path}: {exc}"[:400]) from None
    if graph.fingerprint != graph_entry.get("fingerprint") or \
            profile.hash != profile_entry.get("hash"):
        raise ArtefactError(f"{path}: the graph or profile is not the one it was built for")
    files = {str(u): _library(root, u, e) for u, e in field(m, "libraries", dict, path).items()}
    weights = tvm.runtime.load_param_dict(member(root, m.get("weights"), "weights").read_bytes())
    if sorted(weights) != sorted(f"w{i}" for i in range(len(program.weights))):
        raise ArtefactError(f"{path}: weights: {len(weights)} tensors, the program reads "
                            f"{len(program.weights)}")
    program = Program.from_dict(m["program"], tuple(weights[f"w{i}"]
                                                   for i in range(len(weights))))
    rt = Runtime(program, graph, profile, cache_dir=root, files=files,
                 source=_source(m, path) if m.get("regions") else None)
    if m.get("regions") and [c.to_dict() for c in rt.regions(placement)] != m["regions"]:
        raise ArtefactError(f"{path}: regions: the model's BYOC build today is not the one "
                            "this artefact was built with")
    return Artefact(runtime=rt, placement=placement, manifest=m)


def _library(root: Path, unit: str, entry) -> Path:
    """Unit ``unit``'s library (checked, loadable here), and its pack table checked when
    the manifest lists one (the runtime reads it beside the library)."""
    library = loadable(root, member(root, entry, f"libraries.{unit}"), f"libraries.{unit}")
    if "packs" in entry:
        table = member(root, entry["packs"], f"libraries.{unit}.packs")
        if table != table_path(library):
            raise ArtefactError(f"{root / MANIFEST}: libraries.{unit}.packs: {table.name} is "
                                f"not beside its library as {table_path(library).name}")
    return library


def _source(m: dict, path: Path):
    """The model as imported, whose offloaded regions an artefact's code generators build
    again where it runs (their output is not stored in the artefact)."""
    from autoplace.models import import_model

    graph = m["graph"]
    if "model" not in graph:
        raise ArtefactError(f"{path}: regions: the build names no model to build them from")
    shapes = {k: tuple(v) for k, v in graph.get("input_shapes", {}).items()} or None
    return import_model(graph["model"], shapes)
