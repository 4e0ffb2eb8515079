"""Kernels compiled once per (kernel, unit target), one shared library per target.

A candidate placement only changes which unit runs each kernel, so the runtime compiles
every kernel a unit may run (the kinds it accepts) for that unit's target once, into one
library, and assembles candidates from those libraries without compiling anything. Units
that share a target share its library. Libraries are cached on disk under ``cache_dir`` by
the graph's fingerprint, the target, the PrimFuncs' structural hashes and the source of the
default schedule's rules: a second job on the same model and profile compiles nothing, a
job after the rules changed compiles again. Each kernel is scheduled by the best record
of a MetaSchedule database (``kernels``, from ``autoplace tune-kernels``) when it has one,
else by the default schedule (:func:`autoplace.deploy.kernel_db.scheduled`); which record
was used is part of the cache key, so a kernel tuned since is compiled again.

On a target of several cores each kernel's parallel loops run in chunks its threads claim
as they get to them (:mod:`autoplace.deploy.dynamic_chunks`, tuned kernels too), and the
library links the claim functions in.

A unit whose target kind has no code generator here is built for the host target
(:func:`autoplace.deploy.targets.unit_target` says so once); a unit whose kernels need a
device this TVM cannot open (``cuda``, ``opencl`` without their runtime) is refused with a
:class:`~autoplace.deploy.targets.BuildError` naming it. A unit whose ``mtriple`` names
another architecture is linked by its cross compiler
(:func:`autoplace.deploy.toolchain.compiler_for`): its library is built, never loaded here.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import tvm

from autoplace.deploy import (
    channel_pairs,
    cpu_rules,
    dynamic_chunks,
    fast_math,
    nest_rules,
    prepack,
    row_reduction,
    schedule,
    tile_plan,
    tir_facts,
    weight_order,
)
from autoplace.deploy.kernel_db import KernelDatabase, schedule_tag, scheduled
from autoplace.deploy.prepack import mark_weights, split_packs
from autoplace.deploy.schedule import cores
from autoplace.deploy.targets import BuildError, target_key, unit_target
from autoplace.deploy.toolchain import compiler_for, export_library, host_arch, target_arch
from autoplace.graph import OpGraph
from autoplace.hardware.profile import Profile
from autoplace.runtime.packed_weights import (
    PackSpec,
    pack_symbol,
    read_table,
    table_path,
    write_table,
)
from autoplace.runtime.program import Program
from autoplace.space.capability import capable

#: bumped when what goes into a library changes (its pack table), so old caches are not used
LIBRARY_VERSION = 6
#: the modules whose rules make the default schedules (and every module of autoplace they
#: import): their source is part of the cache key, so a library made by earlier rules is
#: compiled again
SCHEDULE_RULES = (cpu_rules, nest_rules, tile_plan, schedule, prepack, channel_pairs,
                  tir_facts, weight_order, dynamic_chunks, row_reduction, fast_math)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@functools.cache
def rules_digest() -> str:
    """The digest of the source of :data:`SCHEDULE_RULES` and of the chunk claims linked
    into each library (:data:`~autoplace.deploy.dynamic_chunks.CLAIM_SOURCE`)."""
    return _digest(*(Path(m.__file__).read_text() for m in SCHEDULE_RULES),
                   dynamic_chunks.CLAIM_SOURCE.read_text())


def kernel_func(program: Program, name: str):
    """PrimFunc ``name`` of ``program`` as a library compiles it, before its schedule: its
    weights marked layout free (:func:`~autoplace.deploy.prepack.mark_weights`): what
    ``tune-kernels`` tunes and a kernel database looks it up by, so that MetaSchedule packs
    the weights its schedule reads once, as the default schedule does."""
    return mark_weights(program.funcs[name], program.weight_params(name))


def kernel_funcs(program: Program) -> dict:
    """Every kernel of ``program`` by name, as :func:`kernel_func` gives it."""
    return {name: kernel_func(program, name) for name in program.funcs}


def split_kernel(program: Program, name: str, target: tvm.target.Target,
                 kernels: KernelDatabase | None = None, schedule=None) -> tuple:
    """Kernel ``name`` of ``program`` as a library holds it for ``target``
    (:func:`kernel_func`), scheduled (by ``kernels``' record, else the default schedule; by
    ``schedule(func, target)`` where given), its packs split off: ``(compute, packs)``
    (:func:`~autoplace.deploy.prepack.split_packs`)."""
    func = kernel_func(program, name)
    func = scheduled(func, target, kernels) if schedule is None else schedule(func, target)
    outputs = next(len(k.outputs) for k in program.kernels if k.func == name)
    return split_packs(func, outputs)


def _symbol(func, name: str, target: tvm.target.Target):
    return func.with_attr("global_symbol", name).with_attr("target", target)


def _runnable(target: tvm.target.Target, unit: str) -> None:
    """Refuse a target whose device this process cannot open (before anything compiles)."""
    dev = tvm.device(int(target.get_target_device_type()), 0)
    if not dev.exist:
        raise BuildError(f"unit {unit!r}: target kind {target.kind.name!r}: no such device "
                         "here (its device API is not enabled in this TVM, or the machine "
                         "has none)")


class KernelLibraries:
    """The libraries of one program's kernels for a profile's units (compiled or cached).

    ``compiled`` lists the libraries this object compiled (paths); it stays empty when every
    library came from the cache. ``cross_compiler`` links the libraries of units of another
    architecture that name no ``cross_compiler`` of their own; ``kernels`` holds tuned
    schedules.
    """

    def __init__(self, program: Program, graph: OpGraph, profile: Profile, cache_dir: Path,
                 *, files: dict[str, Path] | None = None, cross_compiler: str | None = None,
                 kernels: KernelDatabase | None = None):
        self.program, self.graph, self.profile = program, graph, profile
        self.cache_dir = Path(cache_dir)
        #: unit -> its library, given (an artefact's): nothing is compiled or looked up
        self.files = files
        self.compiled: list[str] = []
        self._targets: dict[str, tvm.target.Target] = {}
        self._funcs: dict[str, set[str]] = {}  # target key -> PrimFunc names
        self._unit_key: dict[str, str] = {}
        #: target key -> the compiler that links its library (None: the host's)
        self.compilers: dict[str, str | None] = {}
        self.cross_compiler = cross_compiler
        self.kernels = kernels
        #: unit -> why its kernels cannot be built (an invalid target)
        self.broken: dict[str, BuildError] = {}
        for unit in profile.units:
            try:
                self._add_unit(unit.name)
            except BuildError as exc:
                self.broken[unit.name] = exc
        self._libs: dict[str, tvm.runtime.Module] = {}
        self._paths: dict[str, Path] = {}
        self._calls: dict[tuple[str, str], object] = {}
        self._packs: dict[Path, dict[str, tuple[PackSpec, ...]]] = {}
        self._packed: dict[tuple, tvm.runtime.Tensor] = {}

    def _add_unit(self, name: str) -> None:
        unit = self.profile.unit(name)
        target = unit_target(unit, self.profile)
        key = target_key(target)
        if self.files is None:  # (an artefact's libraries are built already)
            self.compilers.setdefault(key, compiler_for(unit, dict(target.export()),
                                                        self.profile, self.cross_compiler))
        self._unit_key[name] = key
        self._targets.setdefault(key, target)
        funcs = self._funcs.setdefault(key, set())
        runs = capable(self.graph, self.profile)[:, self.profile.unit_index[name]]
        for ok, kernel in zip(runs, self.program.kernels):
            if ok:
                funcs.add(kernel.func)

    def path(self, unit: str) -> Path:
        """Where the library of ``unit``'s target is (cached, or given)."""
        if self.files is not None:
            if unit not in self.files:
                raise BuildError(f"unit {unit!r}: no kernel library was given for it")
            return self.files[unit]
        return self._path(self._unit_key[unit])

    def _path(self, key: str) -> Path:
        """The cache path of ``key``'s library (worked out once: it reads the database)."""
        if key not in self._paths:
            self._paths[key] = self._cache_path(key)
        return self._paths[key]

    def _cache_path(self, key: str) -> Path:
        funcs, target = sorted(self._funcs[key]), self._targets[key]
        hashes = [f"{f}:{self.program.func_hashes[f]}" for f in funcs]
        if self.program.funcs:  # (a program read from an artefact has none: untuned)
            hashes += [schedule_tag(kernel_func(self.program, f), target, self.kernels)
                       for f in funcs]
        compiler = [f"cc:{self.compilers[key]}"] if self.compilers.get(key) else []
        digest = _digest(str(LIBRARY_VERSION), rules_digest(), tvm.__version__, key, *compiler,
                         *hashes)
        return self.cache_dir / f"{self.graph.name}-{self.graph.fingerprint[:12]}-{digest}.so"

    def arch(self, unit: str) -> str:
        """The architecture ``unit``'s library is built for."""
        if unit in self.broken:
            raise self.broken[unit]
        return target_arch(dict(self._targets[self._unit_key[unit]].export()))

    def library(self, unit: str) -> tvm.runtime.Module:
        """The library of ``unit``'s target: loaded from the cache, or compiled into it."""
        if self.arch(unit) != host_arch():
            raise BuildError(f"unit {unit!r}: its kernels are built for {self.arch(unit)}; "
                             f"this host ({host_arch()}) cannot run them (run on the board)")
        self.build(unit)
        path = str(self.path(unit))
        if path not in self._libs:
            self._libs[path] = tvm.runtime.load_module(path)
        return self._libs[path]

    def build(self, unit: str) -> str:
        """Compile ``unit``'s library into the cache unless it is there; its target key."""
        if unit in self.broken:
            raise self.broken[unit]
        key = self._unit_key[unit]
        _runnable(self._targets[key], unit)
        if self.files is not None:
            return key
        path = self._path(key)
        if not path.is_file() or not table_path(path).is_file():  # (a table lost: again)
            if not self.program.funcs:
                raise BuildError(f"unit {unit!r}: its kernel library {path.name} is not in "
                                 f"{self.cache_dir}, and this program has no PrimFuncs to "
                                 "compile it from")
            self._compile(key, path)
        return key

    def function(self, unit: str, func: str):
        """The compiled PrimFunc ``func`` for ``unit`` (looked up once)."""
        if (unit, func) not in self._calls:
            self._calls[unit, func] = self.library(unit).get_function(func)
        return self._calls[unit, func]

    def packs(self, unit: str) -> dict[str, tuple[PackSpec, ...]]:
        """The kernels of ``unit``'s library that read a weight packed, and how."""
        path = self.path(unit)
        if path not in self._packs:
            self._packs[path] = read_table(path)
        return self._packs[path]

    def packed(self, unit: str, func: str, spec: PackSpec, weight: int):
        """The program's weight ``weight`` packed as kernel ``func`` reads it on ``unit``:
        made once per library, kernel, parameter and weight, and kept."""
        key = (self.path(unit), func, spec.param, weight)
        if key not in self._packed:
            value = self.program.weight_values[weight]
            packed = tvm.runtime.empty(spec.shape, spec.dtype, value.device)
            self.function(unit, pack_symbol(func, spec.param))(value, packed)
            self._packed[key] = packed
        return self._packed[key]

    def _compile(self, key: str, path: Path) -> None:
        target, funcs, table = self._targets[key], {}, {}
        threads = cores(target) if target.kind.name == "llvm" else 1
        for name in sorted(self._funcs[key]):
            compute, packs = split_kernel(self.program, name, target, self.kernels)
            compute = dynamic_chunks.dynamic_chunks(compute, threads)
            funcs[name] = _symbol(compute, name, target)
            funcs.update({pack_symbol(name, p.param): _symbol(p.func, pack_symbol(name, p.param),
                                                              target) for p in packs})
            table[name] = tuple(PackSpec(p.param, p.shape, p.dtype) for p in packs)
        lib = tvm.compile(tvm.IRModule(funcs), target=target)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(fd)
        try:
            export_library(lib, tmp, self.compilers[key], f"kernel library {path.name}",
                           [dynamic_chunks.CLAIM_SOURCE] if threads > 1 else [])
            write_table(path, table)  # (before the library: a library found has its table)
            os.replace(tmp, path)  # whole or absent: a killed compile leaves no library
        finally:
            Path(tmp).unlink(missing_ok=True)
        self.compiled.append(str(path))

    def load_all(self, units) -> None:
        """Load (compile if needed) the libraries of ``units``."""
        for unit in units:
            self.library(unit)
