"""Which C++ compiler links a unit's kernel libraries, and exporting a library with it.

TVM's LLVM emits object code for the target's ``mtriple``; linking it into a shared library
takes a compiler for that architecture. A unit whose ``mtriple`` names another architecture
than this host's needs a cross compiler: its profile key ``cross_compiler``, else the one
given to the command (``--cross-compiler``); without either it is refused in one line
naming the unit and what to set. Imports TVM.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from tvm.support import cc

from autoplace.deploy.targets import BuildError
from autoplace.hardware.profile import Profile, Unit

#: ``platform.machine()`` and triple spellings of one architecture
_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def host_arch() -> str:
    """This machine's architecture (``x86_64``, ``aarch64``, ...)."""
    arch = platform.machine().lower()
    return _ALIASES.get(arch, arch)


def target_arch(target: Mapping[str, object]) -> str:
    """The architecture a target dict builds for: its ``mtriple``'s, else this host's."""
    triple = str(target.get("mtriple", "") or "")
    arch = triple.split("-", 1)[0].lower() if triple else host_arch()
    return _ALIASES.get(arch, arch)


def compiler_for(unit: Unit, target: Mapping[str, object], profile: Profile,
                 default: str | None = None) -> str | None:
    """The compiler that links ``unit``'s kernels built for ``target`` (a dict): None (the
    host's) when the target is of this host's architecture (a profile for a board also
    builds on the board itself), else the unit's ``cross_compiler``, else ``default``.
    BuildError when one is needed and none is set or found."""
    arch = target_arch(target)
    if arch == host_arch():
        return None
    chosen = unit.cross_compiler or default
    if chosen is None:
        raise BuildError(
            f"unit {unit.name!r}: its target's mtriple {target.get('mtriple')!r} is not this "
            f"host's architecture ({host_arch()}): set cross_compiler = "
            f"\"{target.get('mtriple')}-g++\" on the unit in {profile.source}, or give "
            "--cross-compiler")
    if shutil.which(chosen) is None:
        raise BuildError(f"unit {unit.name!r}: cross compiler {chosen!r} not found on PATH "
                         f"(Debian: apt-get install g++-{arch.replace('_', '-')}-linux-gnu)")
    return chosen


def export_library(lib, path: str | Path, compiler: str | None, where: str,
                   addons: Sequence[Path] = ()) -> None:
    """``lib.export_library(path)``, linked by ``compiler`` (None: the host's) with the
    C sources ``addons`` compiled in; a failed link is a BuildError naming ``where`` and the
    compiler's first error line."""
    extra = {"addons": [str(a) for a in addons]} if addons else {}
    try:
        if compiler is None:
            lib.export_library(str(path), **extra)
        else:
            lib.export_library(str(path), fcompile=cc.cross_compiler(compiler), **extra)
    except (RuntimeError, OSError) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        raise BuildError(f"{where}: linking with {compiler or 'the host compiler'} failed: "
                         f"{first}"[:400]) from None


def llvm_for(units: Sequence[Unit], profile: Profile, default: str | None = None,
             where: str = "") -> tuple[dict, str | None]:
    """The llvm target dict and the compiler of one library whose ops run on ``units`` (a
    pipeline stage's): for their architecture, which they must share."""
    archs = {target_arch(u.target): u for u in units}
    if len(archs) != 1:
        raise BuildError(f"{where}: its ops run on units of {len(archs)} architectures "
                         f"({', '.join(sorted(archs))}); one library cannot serve them")
    unit = next(iter(archs.values()))
    foreign = target_arch(unit.target) != host_arch()
    target = {"kind": "llvm", **({"mtriple": unit.target["mtriple"]} if foreign else {})}
    return target, compiler_for(unit, target, profile, default)
