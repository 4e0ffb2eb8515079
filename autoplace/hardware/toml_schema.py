"""The shape of a profile's TOML, declared as msgspec structs: its tables, their keys, each
key's type and range, and the defaults (docs/profile.md lists the same keys).

:func:`read` converts the parsed document to :class:`ProfileSpec` (``msgspec.convert``): an
unknown key, a missing one, a wrong type, a non-finite or out-of-range number is
msgspec's error, reworded here as one line naming the file and the dotted key
(``hw.toml: units.npu.gflops.conv2d: must be a number > 0, got a string 'fast'``). What a
type cannot say (names that must be defined elsewhere, keys that exclude each other, unit
conversions, the mesh's expansion) is checked by :mod:`autoplace.hardware.toml_tables`.
"""

from __future__ import annotations

import difflib
import math
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from autoplace.graph import OP_KINDS
from autoplace.hardware.profile import COPY_MODES, EXECUTIONS, WEIGHT_MODES, ProfileError

#: the largest number a profile may hold (1e12 MiB, GB/s, GFLOP/s or us: far past any
#: hardware, and small enough that bytes and seconds derived from it stay finite)
MAX_NUMBER = 1e12

Number = Annotated[float, msgspec.Meta(ge=0, le=MAX_NUMBER)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=MAX_NUMBER)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Names = Annotated[list[str], msgspec.Meta(min_length=1)]
Kinds = Annotated[list[Literal[("*", *OP_KINDS)]], msgspec.Meta(min_length=1)]
Modes = Annotated[list[Literal[COPY_MODES]], msgspec.Meta(min_length=1)]
Weights = Annotated[list[Literal[WEIGHT_MODES]], msgspec.Meta(min_length=1)]


class _Table(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A TOML table: every key declared, any other an error."""


class UnitSpec(_Table, kw_only=True):
    """``[units.<name>]`` (and a mesh's unit template): ``accepts`` or ``patterns``."""

    target: dict[str, Any]
    accepts: Kinds | None = None
    patterns: Names | None = None
    gflops: dict[str, Positive]
    launch_overhead_us: Number = 0.0
    handover_us: Number = 0.0
    power_w: Number = 0.0
    idle_w: Number = 0.0
    pj_per_flop: dict[str, Number] | None = None
    rpc_key: str | None = None
    kernel_us: dict[str, Positive] = {}
    weights: Weights = msgspec.field(default_factory=lambda: list(WEIGHT_MODES))
    class_name: str = msgspec.field(name="class", default="")
    execution: Literal[EXECUTIONS] = "stream"
    cores: Count = 0
    cpus: list[Count] = []
    cross_compiler: str | None = None
    codegen: str | None = None


class ScopeSpec(_Table, kw_only=True):
    """``[scopes.<name>]`` (and a mesh's scope template)."""

    capacity_mib: Positive
    bandwidth_gbps: Positive
    access: Names
    read_pj_per_byte: Number = 0.0
    write_pj_per_byte: Number = 0.0


class PathSpec(_Table, kw_only=True):
    """What every copy path has: ``[[copies]]``, ``[mesh.link]``, ``[mesh.uplink]``."""

    bandwidth_gbps: Positive
    latency_us: Number = 0.0
    modes: Modes = msgspec.field(default_factory=lambda: ["sync"])
    pj_per_byte: Number = 0.0


class CopySpec(PathSpec, kw_only=True):
    """``[[copies]]``: a path between two scopes (engine ``dma``, default ``dma:src->dst``)."""

    src: str
    dst: str
    dma: str | None = None
    bidirectional: bool = False


class LinkSpec(PathSpec, kw_only=True):
    """``[mesh.link]``: paths between 4-neighbour PEs' local scopes (``scope``: all)."""

    dma: str = "dma"
    scope: str | None = None


class UplinkSpec(LinkSpec, kw_only=True):
    """``[mesh.uplink]``: paths between each PE's local scopes and the top-level ``to``."""

    to: str
    total_gbps: Positive | None = None


class MeshSpec(_Table, kw_only=True):
    """``[mesh]``: a ``rows`` x ``cols`` grid of PEs made from templates."""

    rows: Annotated[int, msgspec.Meta(ge=1)]
    cols: Annotated[int, msgspec.Meta(ge=1)]
    units_overlap: bool = False
    units: dict[str, UnitSpec]
    scopes: dict[str, ScopeSpec] = {}
    link: LinkSpec | None = None
    uplink: UplinkSpec | None = None


class ProfileSpec(_Table, kw_only=True):
    """The document (``units`` and ``scopes`` are required without a ``[mesh]``)."""

    name: str | None = None
    description: str = ""
    host: str
    default_scope: str
    units: dict[str, UnitSpec] | None = None
    scopes: dict[str, ScopeSpec] | None = None
    copies: list[CopySpec] = []
    mesh: MeshSpec | None = None


#: every table of the schema (docs/profile.md names each of their keys: tests/test_docs.py)
TABLES = (ProfileSpec, UnitSpec, ScopeSpec, PathSpec, CopySpec, LinkSpec, UplinkSpec, MeshSpec)


def read(data: dict[str, Any], source: str) -> ProfileSpec:
    """``data`` (a parsed TOML document) as a :class:`ProfileSpec`; ProfileError naming
    ``source`` and the key otherwise."""
    try:
        return msgspec.convert(data, ProfileSpec)
    except msgspec.ValidationError as exc:
        what, _, where = str(exc).partition(" - at `")
        key, value, typ = _locate(data, ProfileSpec, where.rstrip("`") or "$")
        raise ProfileError(f"{source}: {_say(what, key, value, typ)}") from None


# -- wording msgspec's errors ---------------------------------------------------------------
_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a float",
               dict: "a table", list: "an array"}
_BOUNDS = {"ge": ">=", "gt": ">"}


def _type_name(value: object) -> str:
    """What a TOML value is, as an error says it."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _say(what: str, key: str, value: Any, typ: Any) -> str:
    """``key: what is wrong``, from msgspec's ``what`` and the ``value`` it is about."""
    field = re.fullmatch(r"Object (missing required|contains unknown) field `(.+)`", what)
    if field:
        key = f"{key}.{field[2]}" if key else field[2]
        if field[1] == "missing required":
            return f"{key}: missing required key"
        return f"{key}: unknown key{_near(field[2], typ, value)}"
    bound = re.fullmatch(r"Expected `(\w+)` (>=|>|<=|<) (\S+)", what)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key}: must be a finite number, got {value!r}"
    if bound:
        op = "at most" if bound[2] == "<=" else bound[2]
        kind = "an integer " if bound[1] == "int" else ""
        return f"{key}: must be {kind}{op} {float(bound[3]):g}, got {value!r}"
    if what.startswith("Expected `array` of length >= 1"):
        return f"{key}: must not be empty"
    if what.startswith(("Expected `", "Invalid enum value")):
        shown = "" if isinstance(value, (dict, list)) else f" {value!r}"  # (not a whole table)
        return f"{key}: must be {_describe(typ)}, got {_type_name(value)}{shown}"
    return f"{key}: {what}"


def _describe(typ: Any) -> str:
    """What a value of type ``typ`` is: ``a number > 0``, ``one of 'sync', 'async'``."""
    base, metas = _unwrap(typ)
    if get_origin(base) is Literal:
        return "one of " + ", ".join(map(repr, get_args(base)))
    if get_origin(base) is list:
        item = _describe(get_args(base)[0])
        return "an array of " + ("strings" if item.startswith(("a string", "one of"))
                                 else "integers" if item.startswith("an integer") else "tables")
    bounds = [f"{_BOUNDS[k]} {getattr(m, k):g}" for m in metas for k in ("gt", "ge")
              if getattr(m, k) is not None]
    name = {float: "a number", int: "an integer", str: "a string",
            bool: "a boolean"}.get(base, "a table")
    return " ".join([name, *bounds])


def _near(name: str, typ: Any, table: dict[str, Any]) -> str:
    """A declared key of ``typ`` the table lacks that ``name`` may be a misspelling of."""
    fields = msgspec.structs.fields(_unwrap(typ)[0])
    keys = [f.encode_name for f in fields if f.encode_name not in table]
    near = difflib.get_close_matches(name, keys, n=1, cutoff=0.6)
    return f" (misspelt {near[0]!r}?)" if near else ""


# -- where in the document an error is ------------------------------------------------------
def _locate(data: Any, typ: Any, where: str) -> tuple[str, Any, Any]:
    """The dotted key, value and declared type at msgspec's path ``where`` (``$.units[...]
    .gflops[...]``: a table's entry, ``[...]``, is the first that does not convert, as
    msgspec stops at the first error)."""
    key, value = "", data
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]", where):
        base = _unwrap(typ)[0]
        if name:
            typ = next(f.type for f in msgspec.structs.fields(base) if f.encode_name == name)
            value, step = value.get(name), f".{name}"
        elif index == "...":
            typ = get_args(base)[1]
            entry = next((k for k, v in value.items() if not _converts(v, typ)), "...")
            value, step = value.get(entry), f".{entry}"
        else:
            typ, value, step = get_args(base)[0], value[int(index)], f"[{index}]"
        key += step
    return key.lstrip("."), value, typ


def _converts(value: Any, typ: Any) -> bool:
    try:
        msgspec.convert(value, typ)
    except msgspec.ValidationError:
        return False
    return True


def _unwrap(typ: Any) -> tuple[Any, list[msgspec.Meta]]:
    """``typ`` without ``| None`` and ``Annotated``, and the latter's constraints."""
    if get_origin(typ) in (Union, types.UnionType):
        typ = next(t for t in get_args(typ) if t is not type(None))
    if get_origin(typ) is Annotated:
        base, *metas = get_args(typ)
        return base, metas
    return typ, []
