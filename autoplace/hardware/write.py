"""A profile as TOML, in the schema :func:`autoplace.hardware.load.load_profile` reads.

What it writes reads back as an equal profile (the same :attr:`Profile.hash`), or it raises
ValueError: a mesh profile is written with its ``[mesh]`` table (unit and scope templates,
links and uplinks), not PE by PE, so that it is still a mesh, with what only that table
says (``units_overlap``, ``[mesh.uplink] total_gbps``); its PEs must then be alike.
"""

from __future__ import annotations

import dataclasses
import json

from autoplace.hardware.load import profile_from_toml
from autoplace.hardware.profile import WEIGHT_MODES, CopyPath, MeshGrid, Profile, Scope, Unit


def to_toml(profile: Profile, header: str = "") -> str:
    """``profile`` as TOML (``header``: comment lines at the top); ValueError if it cannot
    be written so that it reads back equal (PEs of a mesh that differ)."""
    mesh = profile.mesh
    pe_units = _pe_names(profile.units, mesh)
    pe_scopes = _pe_names(profile.scopes, mesh)
    copies = profile.copies[mesh.generated_copies:] if mesh is not None else profile.copies
    out = [f"# {line}" for line in header.splitlines()]
    out += [f"name = {_value(profile.name)}", f"description = {_value(profile.description)}",
            f"host = {_value(profile.host)}", f"default_scope = {_value(profile.default_scope)}"]
    for u in profile.units:
        out += [] if u.name in pe_units else _unit_lines(f"units.{json.dumps(u.name)}", u)
    for s in profile.scopes:
        out += [] if s.name in pe_scopes else _scope_lines(f"scopes.{json.dumps(s.name)}", s)
    for c in copies:
        out += ["", "[[copies]]", f"src = {_value(c.src)}", f"dst = {_value(c.dst)}",
                *_copy_lines(c), f"dma = {_value(c.engine)}"]
    out += _mesh_lines(profile) if mesh is not None else []
    text = "\n".join(out) + "\n"
    if profile_from_toml(text, profile.source or "<profile>").to_dict() != profile.to_dict():
        raise ValueError(f"profile {profile.name!r}: its PEs differ from one another, so it "
                         "cannot be written as a [mesh] table")  # (each number reads back)
    return text


def _pe_names(items, mesh: MeshGrid | None) -> set[str]:
    """The names of ``items`` (units or scopes) the mesh made: ``pe<k>.<suffix>``."""
    if mesh is None:
        return set()
    return {x.name for x in items if mesh.pe_of(x.name) is not None}


def _unit_lines(table: str, u: Unit) -> list[str]:
    out = ["", f"[{table}]", f"target = {_value(dict(u.target))}",
           f"patterns = {_value(sorted(u.patterns))}" if u.patterns else
           f"accepts = {_value(sorted(u.accepts))}",
           f"launch_overhead_us = {_number(u.launch_overhead_s, 1e-6)}",
           f"power_w = {_value(u.power_w)}"]
    out += [f"handover_us = {_number(u.handover_s, 1e-6)}"] if u.handover_s else []
    out += [f"idle_w = {_value(u.idle_w)}"] if u.idle_w else []
    out += [f"rpc_key = {_value(u.rpc_key)}"] if u.rpc_key else []
    out += [f"weights = {_value(sorted(u.weights))}"] if u.weights != set(WEIGHT_MODES) else []
    out += [f"class = {_value(u.class_name)}"] if u.class_name else []
    out += [f"execution = {_value(u.execution)}"] if u.execution != "stream" else []
    out += [f"cores = {_value(u.cores)}"] if u.cores else []
    out += [f"cpus = {_value(list(u.cpus))}"] if u.cpus else []
    out += [f"cross_compiler = {_value(u.cross_compiler)}"] if u.cross_compiler else []
    out += [f"codegen = {_value(u.codegen)}"] if u.codegen else []
    out += [f"[{table}.gflops]"]
    out += [f"{json.dumps(k)} = {_value(float(v))}" for k, v in sorted(u.gflops.items())]
    if u.j_per_flop:
        out += [f"[{table}.pj_per_flop]"]
        out += [f"{json.dumps(k)} = {_number(v, 1e-12)}" for k, v in sorted(u.j_per_flop.items())]
    if u.kernel_s:
        out += [f"[{table}.kernel_us]"]
        out += [f"{json.dumps(k)} = {_number(v, 1e-6)}" for k, v in u.kernel_s.items()]
    return out


def _scope_lines(table: str, s: Scope, access: list[str] | None = None) -> list[str]:
    return ["", f"[{table}]", f"capacity_mib = {_value(s.capacity_bytes / (1 << 20))}",
            f"bandwidth_gbps = {_number(s.bandwidth_bps, 1e9)}",
            f"access = {_value(sorted(s.access) if access is None else access)}"] + \
        ([f"read_pj_per_byte = {_number(s.read_j_per_byte, 1e-12)}"] if s.read_j_per_byte
         else []) + \
        ([f"write_pj_per_byte = {_number(s.write_j_per_byte, 1e-12)}"] if s.write_j_per_byte
         else [])


def _copy_lines(c: CopyPath) -> list[str]:
    return [f"bandwidth_gbps = {_number(c.bandwidth_bps, 1e9)}",
            f"latency_us = {_number(c.latency_s, 1e-6)}", f"modes = {_value(list(c.modes))}"] \
        + ([f"pj_per_byte = {_number(c.j_per_byte, 1e-12)}"] if c.j_per_byte else [])


def _mesh_lines(profile: Profile) -> list[str]:
    """The ``[mesh]`` table: PE 0's units and scopes as the templates of every PE's."""
    mesh = profile.mesh
    out = ["", "[mesh]", f"rows = {mesh.rows}", f"cols = {mesh.cols}"]
    out += ["units_overlap = true"] if mesh.units_overlap else []
    for u in profile.units:
        if u.name.startswith("pe0."):
            suffix = u.name[len("pe0."):]
            key = _rpc_template(profile, suffix)
            out += _unit_lines(f"mesh.units.{json.dumps(suffix)}",
                               dataclasses.replace(u, name=suffix, rpc_key=key))
    for suffix in mesh.scopes:
        s = profile.scope(f"pe0.{suffix}")
        access = sorted(a[len("pe0."):] for a in s.access)
        out += _scope_lines(f"mesh.scopes.{json.dumps(suffix)}", s, access)
    generated = profile.copies[:mesh.generated_copies]
    links = [c for c in generated if mesh.pe_of(c.src) is not None
             and mesh.pe_of(c.dst) is not None]
    uplinks = [c for c in generated if c.dst == mesh.uplink_to]
    if mesh.link_scopes and links:
        out += ["", "[mesh.link]", *_template_lines(links[0], mesh, mesh.link_scopes)]
    if mesh.uplink_to is not None and uplinks:
        out += ["", "[mesh.uplink]", f"to = {_value(mesh.uplink_to)}",
                *_template_lines(uplinks[0], mesh, mesh.uplink_scopes)]
        out += [f"total_gbps = {_number(mesh.uplink_total_bps, 1e9)}"] \
            if mesh.uplink_total_bps is not None else []
    return out


def _template_lines(c: CopyPath, mesh: MeshGrid, scopes: tuple[str, ...]) -> list[str]:
    """A link or uplink template's keys, from one of the copies it made."""
    out = [*_copy_lines(c), f"dma = {_value(c.engine.partition('.')[2])}"]
    return out + ([f"scope = {_value(scopes[0])}"] if len(scopes) < len(mesh.scopes) else [])


def _rpc_template(profile: Profile, suffix: str) -> str | None:
    """The ``rpc_key`` template of the PE unit ``suffix``: ``{pe}`` where the keys of the
    PEs' units have the PE's index (read off the last PE's, checked when read back)."""
    last = profile.mesh.size - 1
    key = profile.unit(f"pe{last}.{suffix}").rpc_key
    if key is None or key == profile.unit(f"pe0.{suffix}").rpc_key:
        return key
    return key.replace(str(last), "{pe}")


def _number(value: float, unit: float = 1.0) -> str:
    """``value`` in ``unit``s with the fewest digits that the loader, which multiplies by
    ``unit``, reads back exactly (2e-6 s as ``2`` us, not ``1.9999999999999998``)."""
    for digits in range(1, 18):
        text = f"{value / unit:.{digits}g}"
        if unit * float(text) == value:
            return text
    raise ValueError(f"{value!r} has no decimal form in units of {unit!r} that reads back "
                     "as itself")


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        return _number(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")
