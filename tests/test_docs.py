"""The profile reference (docs/profile.md) names every key the profile loader reads: the
keys are collected from the loader's source (each Table getter called with a key), so a key
added without its documentation fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GETTERS = {"string", "number", "strings", "get", "table"}


def keys_read(path: Path) -> set[str]:
    """The string keys ``path`` passes to a Table getter (or ``_dimension``)."""
    keys = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f, args = node.func, node.args
        if isinstance(f, ast.Attribute) and f.attr in GETTERS and args:
            arg = args[0]
        elif isinstance(f, ast.Name) and f.id == "_dimension" and len(args) > 1:
            arg = args[1]
        else:
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            keys.add(arg.value)
    return keys


def test_every_profile_key_the_loader_reads_is_documented():
    hardware = ROOT / "autoplace" / "hardware"
    keys = set().union(*(keys_read(p) for p in hardware.glob("*.py")))
    assert {"capacity_mib", "patterns", "codegen", "rows", "total_gbps"} <= keys  # (found)
    doc = (ROOT / "docs" / "profile.md").read_text()
    quoted = " ".join(re.findall(r"`([^`]*)`", doc))
    missing = sorted(k for k in keys if not re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])",
                                                      quoted))
    assert not missing, f"docs/profile.md does not name {missing}"
