"""A model's inputs from an ``.npz`` file and its outputs into one, as ``tvmc run`` takes and
writes them (``--inputs``, ``--outputs``, ``--print-top``). No TVM.

Inputs are arrays named after the model's inputs, of its shapes and dtypes, finite where
they are floats; each refusal is a ValueError naming the file and the key. Outputs are
written as ``output_0``, ``output_1``, ... in the model's order.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def output_name(i: int) -> str:
    """The key of the ``i``-th output in an outputs file (tvmc's)."""
    return f"output_{i}"


def _arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path`` (no pickled objects)."""
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{path}: not an .npz file ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: a single array, not an .npz of arrays named after the "
                         "model's inputs")
    with data:
        return {key: _array(path, data, key) for key in data.files}


def _array(path: Path, data, key: str) -> np.ndarray:
    try:
        return data[key]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{path}: {key}: cannot read it ({str(exc).splitlines()[0]})") from None


def read_inputs(path: str | Path, names: Sequence[str],
                specs: Sequence[tuple[tuple[int, ...], str]]) -> list[np.ndarray]:
    """The arrays of ``path`` for inputs ``names`` (in that order), each of its (shape,
    dtype) in ``specs``; ValueError naming the file and key of the first that is not."""
    path = Path(path)
    arrays = _arrays(path)
    for key in arrays:
        if key not in names:
            raise ValueError(f"{path}: {key!r} is not an input of the model (its inputs: "
                             f"{', '.join(names)})")
    for name in names:
        if name not in arrays:
            raise ValueError(f"{path}: no array {name!r} (the model's inputs: "
                             f"{', '.join(names)}; the file has: "
                             f"{', '.join(arrays) or 'nothing'})")
    return [_checked(path, arrays[name], name, shape, dtype)
            for name, (shape, dtype) in zip(names, specs)]


def _checked(path: Path, a: np.ndarray, name: str, shape: tuple[int, ...],
             dtype: str) -> np.ndarray:
    if tuple(a.shape) != tuple(shape) or str(a.dtype) != dtype:
        raise ValueError(f"{path}: {name}: {tuple(a.shape)} {a.dtype}, the model takes "
                         f"{tuple(shape)} {dtype}")
    if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
        bad = int(a.size - np.isfinite(a).sum())
        raise ValueError(f"{path}: {name}: {bad} of {a.size} values are NaN or infinite")
    return np.ascontiguousarray(a)


def write_outputs(path: str | Path, outputs: Sequence[np.ndarray]) -> Path:
    """``outputs`` into the ``.npz`` at ``path`` as ``output_<i>``; the path written."""
    path = Path(path)
    with open(path, "wb") as f:  # (np.savez would add .npz to a name without it)
        np.savez(f, **{output_name(i): np.asarray(o) for i, o in enumerate(outputs)})
    return path


def top(output: np.ndarray, n: int) -> list[tuple[int, list[tuple[int, float]]]]:
    """Per row of ``output`` (its first axis; one row if it has one axis), the ``n``
    largest values as (index, value), largest first (the lower index first on ties)."""
    rows = output.reshape(output.shape[0], -1) if output.ndim > 1 else output.reshape(1, -1)
    out = []
    for r, row in enumerate(rows):
        order = np.argsort(-row, kind="stable")[:n]
        out.append((r, [(int(i), float(row[i])) for i in order]))
    return out
