"""TVM targets of profile units: which have a code generator here, and the host fallback."""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping

import tvm

from autoplace.hardware.profile import Profile, Unit

#: The target used when neither the unit nor the profile's host unit can be compiled here.
DEFAULT_HOST = {"kind": "llvm"}


class BuildError(ValueError):
    """A placement cannot be built: the message names the op, unit or target at fault."""


class InvalidTarget(BuildError):
    """A profile's target dict that TVM refuses (an unknown key, a bad value): an error of
    the profile, not of a placement."""


def has_codegen(kind: str) -> bool:
    """Whether this TVM build can generate code for target kind ``kind``."""
    return kind in tvm.target.Target.list_kinds() and (
        tvm.get_global_func(f"target.build.{kind}", allow_missing=True) is not None)


def make_target(spec: Mapping[str, object], where: str) -> tvm.target.Target:
    """``tvm.target.Target`` of a profile target dict; a bad dict is a :class:`BuildError`."""
    try:
        return tvm.target.Target(dict(spec))
    except (ValueError, TypeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidTarget(f"{where}: invalid TVM target {dict(spec)!r}: {first}") from None


def check_targets(profile: Profile) -> None:
    """Raise :class:`InvalidTarget` for the first unit whose target dict TVM refuses (of
    those with a code generator here), before any unit's build says anything else."""
    for unit in profile.units:
        if has_codegen(str(unit.target.get("kind"))):
            make_target(unit.target, f"{profile.source}: unit {unit.name!r}")


def host_target(profile: Profile) -> tvm.target.Target:
    """The host unit's target when it has a code generator here, else plain ``llvm``."""
    unit = profile.unit(profile.host)
    if has_codegen(str(unit.target.get("kind"))):
        return runnable_here(make_target(unit.target, f"{profile.source}: unit {unit.name!r}"),
                             unit.name)
    return tvm.target.Target(DEFAULT_HOST)


def unit_target(unit: Unit, profile: Profile) -> tvm.target.Target:
    """The target a unit's kernels are built for.

    A unit whose target kind has no code generator in this TVM build (an NPU reached through
    a vendor runtime, say) is built for the host target instead; a warning says so, once
    per unit and process.
    """
    kind = str(unit.target.get("kind"))
    if has_codegen(kind):
        return runnable_here(make_target(unit.target, f"{profile.source}: unit {unit.name!r}"),
                             unit.name)
    host = host_target(profile)
    warnings.warn(f"unit {unit.name!r}: target kind {kind!r} has no code generator here; "
                  f"its kernels are built for the host target {host.kind.name!r} "
                  "(placement, copies and scopes are kept)", stacklevel=3)
    return host


#: LLVM CPU feature names that are instruction sets (the others tune code, e.g. ``slow-3ops-lea``)
ISA_PREFIXES = ("avx", "sse", "ssse", "fma", "f16c", "bmi", "amx")


def missing_isa(target: tvm.target.Target) -> list[str]:
    """The instruction sets an LLVM target for this host's architecture (no ``mtriple``)
    uses that this CPU lacks (empty for any other target)."""
    if target.kind.name != "llvm" or target.attrs.get("mtriple") or not target.attrs.get("mcpu"):
        return []
    from tvm.target import codegen

    wanted = codegen.llvm_get_cpu_features(target) - _this_cpu_features()
    return sorted(f for f in wanted if f.startswith(ISA_PREFIXES))


@functools.cache
def _this_cpu_features() -> frozenset:
    from tvm.target import codegen

    cpu = codegen.llvm_get_system_cpu()
    return frozenset(codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm",
                                                                       "mcpu": cpu})))


def runnable_here(target: tvm.target.Target, unit: str) -> tvm.target.Target:
    """``target``, or, where it is for this host's architecture and uses instruction sets
    this CPU lacks (a profile calibrated on an AVX-512 host, run on one without), the same
    target for this CPU (``mcpu`` = LLVM's name of it): its kernels would die of an illegal
    instruction here. A warning says so, once per unit and process."""
    missing = missing_isa(target)
    if not missing:
        return target
    from tvm.target import codegen

    cpu = codegen.llvm_get_system_cpu()
    warnings.warn(f"unit {unit!r}: mcpu {target.attrs['mcpu']!r} uses {', '.join(missing)}, "
                  f"which this CPU ({cpu}) lacks; its kernels are built for {cpu}",
                  stacklevel=3)
    return tvm.target.Target({**dict(target.export()), "mcpu": cpu})


def host_stand_ins(profile: Profile, units) -> dict[str, str]:
    """Of ``units``, those built for the host because this TVM has no code generator for
    their target kind: unit -> that kind."""
    kinds = {u: str(profile.unit(u).target.get("kind")) for u in sorted(units)}
    return {u: kind for u, kind in kinds.items() if not has_codegen(kind)}


def target_key(target: tvm.target.Target) -> str:
    """A stable string identifying a target (TVM compares targets structurally)."""
    return json.dumps(dict(target.export()), sort_keys=True, default=str)
