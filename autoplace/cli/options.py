"""Value types of command-line options: a bad value is argparse's one-line error naming the
option (exit 2)."""

from __future__ import annotations

import argparse
import math
import re


def _integer(text: str, low: int, high: int | None, bound: str) -> int:
    """``text`` as an integer in [low, high) (no upper bound when ``high`` is None)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low or (high is not None and value >= high):
        raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1, None, "> 0")


def seed_arg(text: str) -> int:
    return _integer(text, 0, 2**32, "in [0, 2**32)")


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _number_in(text: str, interval: str, low: float, high: float, *, low_in: bool) -> float:
    """``text`` as a finite number in ``interval`` (from ``low``, in it when ``low_in``, to
    ``high``, in it)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in {interval}, got {text!r}") \
            from None
    above = low <= value if low_in else low < value
    if not (above and value <= high):  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"must be in {interval}, got {text!r}")
    return value


def share(text: str) -> float:
    """A share: a finite number in [0, 1]."""
    return _number_in(text, "[0, 1]", 0.0, 1.0, low_in=True)


def part_of_one(text: str) -> float:
    """A part of a whole: a finite number in (0, 1] (none of it is nothing to do)."""
    return _number_in(text, "(0, 1]", 0.0, 1.0, low_in=False)


def cache_arg(p: argparse.ArgumentParser) -> None:
    """``--cache-dir``: where the runtime's compiled kernel libraries are kept."""
    from pathlib import Path

    p.add_argument("--cache-dir", type=Path, default=None,
                   help="directory of compiled kernel libraries, reused by every job on "
                        "the same model and unit targets (default ~/.cache/autoplace/kernels)")


#: one ``NAME:[D1,D2,...]`` of ``--input-shapes`` (a name may hold ``:``, ``/`` and ``.``)
_SHAPE = re.compile(r"\s*([^\s\[\]]+?):\s*\[([^\]]*)\]\s*,?")


def input_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``--input-shapes "data:[1,3,224,224] mask:[1,8]"`` (as tvmc spells it): input name
    -> shape, every dimension an integer > 0."""
    out: dict[str, tuple[int, ...]] = {}
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _SHAPE.match(text, pos)
        if m is None:
            raise argparse.ArgumentTypeError(
                f"expected NAME:[D1,D2,...] separated by spaces, got {text[pos:]!r}")
        name, dims = m.group(1), [d.strip() for d in m.group(2).split(",") if d.strip()]
        if any(not d.isdigit() or int(d) < 1 for d in dims):
            raise argparse.ArgumentTypeError(f"{name}: every dimension must be an integer "
                                             f"> 0, got [{m.group(2)}]")
        if name in out:
            raise argparse.ArgumentTypeError(f"{name}: given twice")
        out[name], pos = tuple(int(d) for d in dims), m.end()
    if not out:
        raise argparse.ArgumentTypeError("expected NAME:[D1,D2,...], got nothing")
    return out


def input_shapes_arg(p: argparse.ArgumentParser) -> None:
    """``--input-shapes``: the shapes of a model's inputs with symbolic dimensions."""
    p.add_argument("--input-shapes", type=input_shapes, default=None,
                   metavar='"NAME:[D1,D2,...] ..."',
                   help="shapes of the model's inputs, as tvmc takes them; needed for an "
                        "input with a symbolic dimension (e.g. \"data:[1,3,224,224]\")")


def cross_compiler_arg(p: argparse.ArgumentParser) -> None:
    """``--cross-compiler``: links the kernel libraries of units of another architecture."""
    p.add_argument("--cross-compiler", default=None, metavar="CXX",
                   help="C++ compiler that links the libraries of units whose target's "
                        "mtriple is another architecture than this host's and that set no "
                        "cross_compiler in the profile (e.g. aarch64-linux-gnu-g++)")


def kernel_db_arg(p: argparse.ArgumentParser) -> None:
    """``--kernel-db``: a MetaSchedule database of tuned kernels (``autoplace tune-kernels``)."""
    from pathlib import Path

    p.add_argument("--kernel-db", type=Path, default=None, metavar="DIR",
                   help="tuned kernels (MetaSchedule's JSON records, from `autoplace "
                        "tune-kernels`): a kernel with a record for its unit's target is "
                        "built as the record schedules it, others get the default schedule")


def choice_args(p: argparse.ArgumentParser) -> None:
    """``--pick`` and the bounds a chosen record keeps (:mod:`autoplace.records.front`)."""
    from autoplace.measure.objective import CRITERIA
    from autoplace.records.front import KNEE

    p.add_argument("--pick", choices=(*CRITERIA, KNEE), default=None,
                   help="the record to choose: the best by one figure, or the knee of the "
                        "front over --criteria (docs/pareto.md); default: by --objective")
    p.add_argument("--criteria", default=None, metavar="A,B[,C]",
                   help="the figures a front weighs (of: " + ", ".join(CRITERIA) + "); "
                        "default: the objectives of a job that searched several (its "
                        "records say), else latency,energy")
    limit_args(p, "choose only records")


def limit_args(p: argparse.ArgumentParser, what: str) -> None:
    """``--max-latency``, ``--max-energy``, ``--max-memory`` (:func:`limits_of`)."""
    p.add_argument("--max-latency", type=positive_seconds, default=None, metavar="S",
                   help=f"{what} of at most S seconds of latency")
    p.add_argument("--max-energy", type=_positive_float, default=None, metavar="J",
                   help=f"{what} of at most J joules per inference")
    p.add_argument("--max-memory", action="append", default=[], metavar="SCOPE=BYTES",
                   help=f"{what} holding at most BYTES in SCOPE at the peak (4MiB, 512KiB "
                        "or bytes; repeat for several scopes)")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def objective_arg(text: str) -> str:
    """``--objective``: one objective's name, or several's (``latency,energy``)."""
    from autoplace.measure.objective import objective_named

    try:
        objective_named(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def limits_of(args):
    """The :class:`~autoplace.measure.limits.Limits` of :func:`limit_args`' options."""
    from autoplace.measure.limits import Limits

    return Limits.parse(args.max_latency, args.max_energy, args.max_memory)
