"""``autoplace calibrate``: a unit's numbers fitted to its kernels measured here or on a
board, or (``--handover``) the runtime's hand-over fitted to mixed placements timed here.

TVM is imported inside the handler only.
"""

from __future__ import annotations

import json
from pathlib import Path

from autoplace.cli.options import cache_arg, kernel_db_arg, positive_int, seed_arg


def register(sub) -> None:
    """Add ``calibrate`` to the ``autoplace`` parser."""
    k = sub.add_parser("calibrate", help="measure kernels and write a calibrated profile")
    k.add_argument("--hw", required=True, help="profile to calibrate")
    k.add_argument("--model", action="append", default=None,
                   help="model whose kernels are measured (repeatable; default squeezenet)")
    k.add_argument("--unit", default=None, help="unit to calibrate (default: the host unit)")
    k.add_argument("--handover", action="store_true",
                   help="fit the hand-over of the runtime's units instead (after each "
                        "unit's own calibration): random placements of the models over "
                        "the units, timed here")
    k.add_argument("--placements", type=positive_int, default=30,
                   help="with --handover: random placements per model (default 30)")
    k.add_argument("--rounds", type=positive_int, default=3,
                   help="with --handover: times each placement is timed, in turn; the "
                        "fastest is kept (default 3)")
    k.add_argument("--rpc-tracker", default=None, help="HOST:PORT: measure on a board")
    k.add_argument("--rpc-key", default=None, help="device key on the tracker")
    k.add_argument("-o", "--output", default=None,
                   help="profile to write (default HW-calibrated.toml)")
    k.add_argument("--repeat", type=positive_int, default=5,
                   help="timed repeats; the fastest is kept")
    k.add_argument("--number", type=positive_int, default=1, help="runs per repeat")
    k.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    k.add_argument("--powercap", default="/sys/class/powercap",
                   help="where Linux's RAPL counters are: the energy of the runs is measured "
                        "and idle_w and pj_per_flop fitted where they are readable (default "
                        "/sys/class/powercap)")
    k.add_argument("--seed", type=seed_arg, default=0,
                   help="seed of the random inputs and placements")
    cache_arg(k)
    kernel_db_arg(k)
    k.set_defaults(run=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from autoplace.calibrate.kernels import Session
    from autoplace.deploy.kernel_db import KernelDatabase
    from autoplace.deploy.run import TimeSettings
    from autoplace.hardware.load import load_profile

    if bool(args.rpc_tracker) != bool(args.rpc_key):
        raise ValueError("--rpc-tracker and --rpc-key go together")
    if args.handover and (args.rpc_tracker or args.unit):
        raise ValueError("--handover fits the runtime's units on this host: it takes no "
                         "--unit or --rpc-tracker")
    profile = load_profile(args.hw)
    settings = TimeSettings(number=args.number, repeat=args.repeat, warmup=args.warmup)
    kernels = KernelDatabase(args.kernel_db) if args.kernel_db else None
    path = Path(args.output or f"{profile.name}-calibrated.toml")
    if args.handover:
        return _handover(args, profile, settings, kernels, path)
    return _unit(args, profile, settings, kernels, path, Session(_remote(args)))


def _remote(args):
    """The RPC session ``--rpc-tracker`` grants (None: this host)."""
    if not args.rpc_tracker:
        return None
    from tvm import rpc

    from autoplace.deploy.pool import first_line
    from autoplace.measure.server import parse_addr

    host, port = parse_addr(args.rpc_tracker, "--rpc-tracker")
    try:
        return rpc.connect_tracker(host, port).request(args.rpc_key, priority=1)
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"--rpc-tracker {args.rpc_tracker}: {first_line(exc)}") from None


def _rapl(session, root: str):
    """RAPL's counters under ``root`` here, or why calibrate measures no energy (one
    line)."""
    from autoplace.calibrate.energy import open_rapl

    if session.remote is not None:
        return "the unit is timed on a board over RPC, and RAPL is read on this host only"
    rapl = open_rapl(Path(root))
    return rapl if not isinstance(rapl, str) else f"no RAPL counters readable here ({rapl})"


def _unit(args, profile, settings, kernels, path: Path, session) -> int:
    """Measure one unit's kernels (and their energy where RAPL is readable), fit, write the
    kernel table and the profile."""
    from autoplace.calibrate.energy import energy_line, fit_power
    from autoplace.calibrate.kernels import calibrated, fit, measure, report
    from autoplace.hardware.write import to_toml

    unit = args.unit or profile.host
    if unit not in profile.unit_index:
        raise ValueError(f"--unit {unit!r}: profile {profile.name!r} has no such unit (it has "
                         f"{', '.join(u.name for u in profile.units)})")
    models = args.model or ["squeezenet"]
    where = f"{args.rpc_tracker} key {args.rpc_key}" if args.rpc_tracker else "this host"
    print(f"calibrating unit {unit} of {profile.name} on {where} with {', '.join(models)}")
    rapl = _rapl(session, args.powercap)
    m = measure(models, profile, unit, session=session, settings=settings,
                progress=lambda s: print(s, flush=True), cache_dir=args.cache_dir,
                kernels=kernels, rapl=None if isinstance(rapl, str) else rapl)
    table = path.with_suffix(".kernels.json")
    table.write_text(json.dumps(m.to_dict(), indent=1) + "\n")
    f = fit(m, profile)
    power = fit_power(m.energy) if m.energy else None
    after = calibrated(profile, f, power=power)
    path.write_text(to_toml(after, f"calibrated from {profile.source} on {where}\n"
                                   f"models: {', '.join(models)}"))
    print("\n".join(report(m, profile, after, f)))
    print(energy_line(profile.unit(unit), power, rapl if isinstance(rapl, str) else ""))
    print(f"wrote {path} (with a latency table of {len(f.kernel_s)} kernels; every "
          f"measurement in {table})")
    return 0


def _handover(args, profile, settings, kernels, path: Path) -> int:
    """Time mixed placements, fit the hand-over, write the profile and the runs."""
    import dataclasses

    import numpy as np

    from autoplace.calibrate.handover import (
        fit_handover,
        handover_errors,
        time_mixed,
        with_handover,
    )
    from autoplace.hardware.write import to_toml
    from autoplace.runtime import DEFAULT_CACHE

    models = args.model or ["squeezenet"]
    print(f"fitting the hand-over of {profile.name}'s units on this host with "
          f"{args.placements} random placements of {', '.join(models)}", flush=True)
    runs = time_mixed(models, profile, placements=args.placements, rounds=args.rounds,
                      settings=settings, cache_dir=args.cache_dir or DEFAULT_CACHE,
                      kernels=kernels, seed=args.seed, progress=lambda s: print(s, flush=True))
    seconds, units = fit_handover(profile, runs)
    after = with_handover(profile, seconds, units)
    before_err, after_err = (abs(handover_errors(p, runs)) for p in (profile, after))
    path.write_text(to_toml(dataclasses.replace(after, name=f"{profile.name}-calibrated"),
                            f"hand-over fitted from {profile.source} on this host\n"
                            f"models: {', '.join(models)}"))
    table = path.with_suffix(".handover.json")
    table.write_text(json.dumps({"handover_s": seconds, "units": list(units),
                                 "runs": [dataclasses.asdict(r) for r in runs]}, indent=1)
                     + "\n")
    was = sorted({profile.unit(u).handover_s * 1e6 for u in units})
    print(f"hand-over of {', '.join(units)}: {'/'.join(f'{w:.2f}' for w in was)} -> "
          f"{seconds * 1e6:.2f} us; simulated against measured, {len(runs)} placements: "
          f"median error {np.median(before_err):.1%} -> {np.median(after_err):.1%}, worst "
          f"{before_err.max():.1%} -> {after_err.max():.1%}")
    print(f"wrote {path} (every placement and its time in {table})")
    return 0
