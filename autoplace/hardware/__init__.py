"""The hardware description: a profile's compute units, memory scopes and copy paths.

- :mod:`~autoplace.hardware.profile` — the profile's types (frozen dataclasses) and its TOML
  schema;
- :mod:`~autoplace.hardware.load` — a profile read from TOML and validated
  (:func:`~autoplace.hardware.load.load_profile`, the bundled profiles of ``hwprofiles/``);
- :mod:`~autoplace.hardware.toml_schema` — the TOML's shape as msgspec structs (keys, types,
  ranges, defaults), with errors naming the file and the key;
- :mod:`~autoplace.hardware.toml_tables` — its tables made units, scopes and copy paths, and
  what no type can say checked;
- :mod:`~autoplace.hardware.mesh_expansion` — a ``[mesh]`` table expanded into per-PE units,
  scopes and copy paths;
- :mod:`~autoplace.hardware.write` — a profile written back as TOML.
"""
