"""Reading a compiled artefact's manifest safely: its files stay inside its directory.

An artefact is a directory: a ``manifest.json`` and the files it names (kernel libraries,
weights). Loading a library runs its constructors, so before anything is loaded:

- the manifest must be a JSON object of the expected ``format`` and a known ``version``;
- every file it names is a path *relative to the directory*, without ``..``, that resolves
  (symbolic links followed) to a regular file inside it;
- every file's SHA-256 must be the one the manifest records: a truncated or replaced
  library is refused by name instead of crashing the process when it is mapped;
- a library built for another architecture (cross-compiled for a board) is refused by
  :func:`loadable` before the loader's misleading "cannot open shared object file".

Each refusal is an :class:`ArtefactError` naming the file and the key.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePosixPath

from autoplace.deploy.elf import foreign, host_machine, machine_name

MANIFEST = "manifest.json"
#: a mesh pipeline's manifest (:mod:`autoplace.pipeline.manifest` writes it)
PIPELINE_FORMAT, PIPELINE_VERSION = "autoplace-pipeline", 1
#: a placed build's manifest (:mod:`autoplace.runtime.artefact` writes it)
PLACED_FORMAT, PLACED_VERSION = "autoplace-placed", 1
#: the largest manifest read (a manifest of a model with thousands of ops is a few MB)
MAX_MANIFEST_BYTES = 64 << 20


class ArtefactError(ValueError):
    """An artefact is malformed, of another format or version, or names a bad file."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_entry(directory: Path, path: Path) -> dict:
    """The manifest entry of a file written into ``directory``: its name and hash."""
    return {"file": path.relative_to(directory).as_posix(), "sha256": sha256_of(path)}


def manifest_format(path: Path) -> str | None:
    """The ``format`` a manifest says it has (None if it says none or is unreadable)."""
    try:
        data = json.loads(path.read_text()) if path.stat().st_size <= MAX_MANIFEST_BYTES \
            else None
    except (OSError, ValueError):
        return None
    return data.get("format") if isinstance(data, dict) else None


def read_manifest(path: Path, fmt: str, versions: tuple[int, ...]) -> dict:
    """The manifest at ``path``, checked to be of format ``fmt`` and a version in
    ``versions``."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ArtefactError(f"{path}: over {MAX_MANIFEST_BYTES >> 20} MiB; not a manifest")
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ArtefactError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ArtefactError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ArtefactError(f"{path}: must be a JSON object, got {type(data).__name__}")
    if data.get("format") != fmt:
        raise ArtefactError(f"{path}: format: must be {fmt!r}, got {data.get('format')!r}")
    if data.get("version") not in versions:
        raise ArtefactError(f"{path}: version: this autoplace reads "
                            f"{', '.join(map(str, versions))}, got {data.get('version')!r}")
    return data


def member(directory: Path, entry: object, key: str) -> Path:
    """The file a manifest ``entry`` (``{"file": name, "sha256": hex}``) names, checked:
    inside ``directory`` and of the recorded hash. ``key`` names the entry in errors."""
    where = f"{directory / MANIFEST}: {key}"
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) \
            or not isinstance(entry.get("sha256"), str):
        raise ArtefactError(f"{where}: must be an object with a string 'file' and 'sha256'")
    name = PurePosixPath(entry["file"])
    if name.is_absolute() or ".." in name.parts or not name.parts:
        raise ArtefactError(f"{where}: {entry['file']!r} is not a path inside the artefact's "
                            "directory")
    path = directory / Path(*name.parts)
    inside = directory.resolve()
    real = path.resolve()
    if not real.is_relative_to(inside):
        raise ArtefactError(f"{where}: {entry['file']!r} leads outside the artefact's "
                            f"directory (to {real})")
    if not real.is_file():
        raise ArtefactError(f"{where}: {entry['file']!r}: no such file")
    if sha256_of(real) != entry["sha256"]:
        raise ArtefactError(f"{where}: {entry['file']!r} is not the file the artefact was "
                            "built with (its SHA-256 differs: truncated or replaced)")
    return real


def loadable(directory: Path, path: Path, key: str) -> Path:
    """``path`` (a library :func:`member` checked) if this host can load it; else an
    ArtefactError saying it was built for another machine."""
    arch = foreign(path)
    if arch is not None:
        raise ArtefactError(f"{directory / MANIFEST}: {key}: {path.name} is built for {arch} "
                            f"(cross-compiled for a board); this host is "
                            f"{machine_name(host_machine())}: run it on the board")
    return path


def field(data: dict, key: str, kind: type | tuple[type, ...], where: Path):
    """``data[key]`` if it is of ``kind``; else an :class:`ArtefactError` naming it."""
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,)):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ArtefactError(f"{where}: {key}: must be {name}, got {value!r}"[:300])
    return value
