"""The generated models' ONNX files, written once into a cache directory.

A file is named ``<name>-<key>.onnx``, ``key`` a digest of the model's config and of the
source of the builders, so a changed builder writes a new file rather than serving a stale
one (the older files of that name are then removed). Files are written to a temporary name
and renamed into place, so a reader never sees half a file, even with several writers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from autoplace.zoo.configs import MODELS

#: Where the generated ONNX files go unless a ``cache_dir`` is given.
DEFAULT_CACHE = Path.home() / ".cache" / "autoplace" / "models"

#: The modules whose source decides a generated model's bytes.
_BUILDERS = ("configs.py", "layers.py", "attention.py", "nets.py")


def model_key(name: str) -> str:
    """A 12-hex-digit digest of ``MODELS[name]`` and of the builders' source."""
    digest = hashlib.sha256(repr(MODELS[name]).encode())
    here = Path(__file__).resolve().parent
    for module in _BUILDERS:
        digest.update((here / module).read_bytes())
    return digest.hexdigest()[:12]


def _write_atomically(data: bytes, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it private; the cache is not
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def model_path(name: str, cache_dir: str | Path | None = None) -> Path:
    """Path of generated model ``name``'s ONNX file in ``cache_dir`` (default
    :data:`DEFAULT_CACHE`), built and written there first if it is missing."""
    if name not in MODELS:
        raise KeyError(f"{name!r} is not a generated model; they are: {', '.join(MODELS)}")
    folder = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE
    path = folder / f"{name}-{model_key(name)}.onnx"
    if path.is_file():
        return path
    from autoplace.zoo.nets import build  # imports onnx: only when a file is written

    folder.mkdir(parents=True, exist_ok=True)
    _write_atomically(build(MODELS[name], name).SerializeToString(), path)
    for old in folder.glob(f"{name}-*.onnx"):
        if old != path:
            with contextlib.suppress(OSError):
                old.unlink()
    return path
