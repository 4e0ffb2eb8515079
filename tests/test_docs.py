"""The profile reference (docs/profile.md) names every key of the profile schema: the keys
are the fields of the msgspec structs that declare it (autoplace.hardware.toml_schema), so a
key added without its documentation fails here."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from autoplace.hardware.toml_schema import TABLES, _Table

ROOT = Path(__file__).resolve().parents[1]


def schema_tables() -> set[type]:
    """Every struct of the schema module (so a new table left out of TABLES fails too)."""
    import autoplace.hardware.toml_schema as schema

    return {v for v in vars(schema).values()
            if isinstance(v, type) and issubclass(v, _Table) and v is not _Table}


def test_every_profile_key_of_the_schema_is_documented():
    assert schema_tables() == set(TABLES)
    keys = {f.encode_name for t in TABLES for f in msgspec.structs.fields(t)}
    assert {"capacity_mib", "patterns", "codegen", "rows", "total_gbps", "class"} <= keys
    doc = (ROOT / "docs" / "profile.md").read_text()
    quoted = " ".join(re.findall(r"`([^`]*)`", doc))
    missing = sorted(k for k in keys if not re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])",
                                                      quoted))
    assert not missing, f"docs/profile.md does not name {missing}"
