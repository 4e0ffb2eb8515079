"""A profile as TOML, in the schema :func:`autoplace.hardware.load.load_profile` reads.

The profile is built as the tables of that schema and ``tomlkit`` writes them (quoting,
escapes, inline ``target`` tables, header comments); this module only chooses what to
write: each number in the unit its key names, in the fewest digits that read back exactly,
and a mesh as its templates.

What it writes reads back as an equal profile (the same :attr:`Profile.hash`), or it raises
ValueError: a mesh profile is written with its ``[mesh]`` table (unit and scope templates,
links and uplinks), not PE by PE, so that it is still a mesh, with what only that table
says (``units_overlap``, ``[mesh.uplink] total_gbps``); its PEs must then be alike.
"""

from __future__ import annotations

import dataclasses

import tomlkit

from autoplace.hardware.load import profile_from_toml
from autoplace.hardware.profile import WEIGHT_MODES, CopyPath, MeshGrid, Profile, Scope, Unit

#: integral numbers below this are written as TOML integers (``2``, not ``2.0``)
_EXACT_INT = 2**53


def to_toml(profile: Profile, header: str = "") -> str:
    """``profile`` as TOML (``header``: comment lines at the top); ValueError if it cannot
    be written so that it reads back equal (PEs of a mesh that differ)."""
    doc = tomlkit.document()
    for line in header.splitlines():
        doc.add(tomlkit.comment(line))
    doc.update(profile_tables(profile))
    text = tomlkit.dumps(doc)
    if profile_from_toml(text, profile.source or "<profile>").to_dict() != profile.to_dict():
        raise ValueError(f"profile {profile.name!r}: its PEs differ from one another, so it "
                         "cannot be written as a [mesh] table")  # (each number reads back)
    return text


def profile_tables(profile: Profile) -> dict:
    """The TOML tables of ``profile`` as plain values (a mesh's PEs as its ``[mesh]``)."""
    mesh = profile.mesh
    pe_units, pe_scopes = _pe_names(profile.units, mesh), _pe_names(profile.scopes, mesh)
    copies = profile.copies[mesh.generated_copies:] if mesh is not None else profile.copies
    out = {"name": profile.name, "description": profile.description, "host": profile.host,
           "default_scope": profile.default_scope,
           "units": {u.name: _unit_table(u) for u in profile.units if u.name not in pe_units},
           "scopes": {s.name: _scope_table(s) for s in profile.scopes
                      if s.name not in pe_scopes}}
    out["copies"] = [{"src": c.src, "dst": c.dst, **_copy_table(c), "dma": c.engine}
                     for c in copies]
    if mesh is not None:
        out["mesh"] = _mesh_table(profile)
    return {k: v for k, v in out.items() if v != [] and v != {}}


def _pe_names(items, mesh: MeshGrid | None) -> set[str]:
    """The names of ``items`` (units or scopes) the mesh made: ``pe<k>.<suffix>``."""
    if mesh is None:
        return set()
    return {x.name for x in items if mesh.pe_of(x.name) is not None}


def _unit_table(u: Unit) -> dict:
    target = tomlkit.inline_table()
    target.update(u.target)
    out = {"target": target,
           **({"patterns": sorted(u.patterns)} if u.patterns else {"accepts": sorted(u.accepts)}),
           "launch_overhead_us": _number(u.launch_overhead_s, 1e-6),
           "power_w": _number(u.power_w)}
    optional = {"handover_us": u.handover_s and _number(u.handover_s, 1e-6),
                "idle_w": u.idle_w and _number(u.idle_w), "rpc_key": u.rpc_key,
                "weights": sorted(u.weights) if u.weights != set(WEIGHT_MODES) else None,
                "class": u.class_name, "execution": u.execution != "stream" and u.execution,
                "cores": u.cores, "cpus": list(u.cpus), "cross_compiler": u.cross_compiler,
                "codegen": u.codegen}
    out.update({k: v for k, v in optional.items() if v})
    out["gflops"] = {k: _number(v) for k, v in sorted(u.gflops.items())}
    if u.j_per_flop:
        out["pj_per_flop"] = {k: _number(v, 1e-12) for k, v in sorted(u.j_per_flop.items())}
    if u.kernel_s:
        out["kernel_us"] = {k: _number(v, 1e-6) for k, v in u.kernel_s.items()}
    return out


def _scope_table(s: Scope, access: list[str] | None = None) -> dict:
    out = {"capacity_mib": _number(s.capacity_bytes / (1 << 20)),
           "bandwidth_gbps": _number(s.bandwidth_bps, 1e9),
           "access": sorted(s.access) if access is None else access}
    if s.read_j_per_byte:
        out["read_pj_per_byte"] = _number(s.read_j_per_byte, 1e-12)
    if s.write_j_per_byte:
        out["write_pj_per_byte"] = _number(s.write_j_per_byte, 1e-12)
    return out


def _copy_table(c: CopyPath) -> dict:
    out = {"bandwidth_gbps": _number(c.bandwidth_bps, 1e9),
           "latency_us": _number(c.latency_s, 1e-6), "modes": list(c.modes)}
    return out | ({"pj_per_byte": _number(c.j_per_byte, 1e-12)} if c.j_per_byte else {})


def _mesh_table(profile: Profile) -> dict:
    """The ``[mesh]`` table: PE 0's units and scopes as the templates of every PE's."""
    mesh = profile.mesh
    out = {"rows": mesh.rows, "cols": mesh.cols}
    out |= {"units_overlap": True} if mesh.units_overlap else {}
    suffixes = [u.name[len("pe0."):] for u in profile.units if u.name.startswith("pe0.")]
    out["units"] = {x: _unit_table(dataclasses.replace(profile.unit(f"pe0.{x}"), name=x,
                                                       rpc_key=_rpc_template(profile, x)))
                    for x in suffixes}
    out["scopes"] = {x: _scope_table(s, sorted(a[len("pe0."):] for a in s.access))
                     for x in mesh.scopes for s in [profile.scope(f"pe0.{x}")]}
    generated = profile.copies[:mesh.generated_copies]
    links = [c for c in generated if mesh.pe_of(c.src) is not None
             and mesh.pe_of(c.dst) is not None]
    uplinks = [c for c in generated if c.dst == mesh.uplink_to]
    if mesh.link_scopes and links:
        out["link"] = _template(links[0], mesh, mesh.link_scopes)
    if mesh.uplink_to is not None and uplinks:
        out["uplink"] = {"to": mesh.uplink_to,
                         **_template(uplinks[0], mesh, mesh.uplink_scopes)}
        if mesh.uplink_total_bps is not None:
            out["uplink"]["total_gbps"] = _number(mesh.uplink_total_bps, 1e9)
    return {k: v for k, v in out.items() if v != {}}


def _template(c: CopyPath, mesh: MeshGrid, scopes: tuple[str, ...]) -> dict:
    """A link or uplink template's keys, from one of the copies it made."""
    out = {**_copy_table(c), "dma": c.engine.partition(".")[2]}
    return out | ({"scope": scopes[0]} if len(scopes) < len(mesh.scopes) else {})


def _rpc_template(profile: Profile, suffix: str) -> str | None:
    """The ``rpc_key`` template of the PE unit ``suffix``: ``{pe}`` where the keys of the
    PEs' units have the PE's index (read off the last PE's, checked when read back)."""
    last = profile.mesh.size - 1
    key = profile.unit(f"pe{last}.{suffix}").rpc_key
    if key is None or key == profile.unit(f"pe0.{suffix}").rpc_key:
        return key
    return key.replace(str(last), "{pe}")


def _number(value: float, unit: float = 1.0) -> float | int:
    """``value`` in ``unit``s with the fewest digits that the loader, which multiplies by
    ``unit``, reads back exactly (2e-6 s as ``2`` us, not ``1.9999999999999998``); an
    integral one as an integer. (TOML writes a float as its shortest ``repr``, which has
    no more digits than the form found here.)"""
    for digits in range(1, 18):
        scaled = float(f"{value / unit:.{digits}g}")
        if unit * scaled == value:
            return int(scaled) if scaled.is_integer() and abs(scaled) < _EXACT_INT else scaled
    raise ValueError(f"{value!r} has no decimal form in units of {unit!r} that reads back "
                     "as itself")
