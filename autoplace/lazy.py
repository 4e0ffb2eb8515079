"""Names a package loads on first use (PEP 562), so importing it stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(package: str, homes: dict[str, str], namespace: dict) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``homes`` maps each public name to the module that
    defines it (absolute, or relative to ``package`` with a leading dot); a name loaded is
    kept in ``namespace`` (the package's globals), so its module is imported once."""
    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name], package), name)
        namespace[name] = value
        return value
    return __getattr__
