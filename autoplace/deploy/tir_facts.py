"""Facts about a TensorIR block that the CPU rules read (:mod:`autoplace.deploy.cpu_rules`,
:mod:`autoplace.deploy.channel_pairs`): its iterators, what it reads, how an index uses an
iterator. Reads only; no schedule primitive."""

from __future__ import annotations

from tvm import tirx
from tvm.sym.pattern import detect_linear_equation


def data_parallel(stmt) -> list:
    """The data-parallel iterators of block ``stmt``, in order."""
    return [iv.var for iv in stmt.iter_vars if iv.iter_type == tirx.IterVar.DataPar]


def input_reads(stmt) -> list:
    """(position, region) of each read of block ``stmt`` of a buffer it does not write."""
    written = [w.source for w in stmt.writes]
    return [(i, r) for i, r in enumerate(stmt.reads)
            if not any(r.source.same_as(w) for w in written)]


def stride(expr, var) -> int:
    """The coefficient of ``var`` in ``expr`` (0 when ``expr`` is not linear in it)."""
    found = detect_linear_equation(expr, [var]) if uses_var(expr, var) else []
    return abs(int(found[0])) if found else 0


def param_of(sch, buffer) -> int | None:
    """The position of the parameter whose buffer is ``buffer`` (None: not a parameter)."""
    return next((k for k, p in enumerate(sch.mod["main"].params) if p.same_as(buffer)), None)


def uses_var(expr, var) -> bool:
    """Whether ``expr`` reads ``var``."""
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))
