"""``autoplace tune-kernels``: a model's kernels tuned per unit target by MetaSchedule.

TVM is imported inside the handler only.
"""

from __future__ import annotations

import argparse

from autoplace.cli.options import (
    cross_compiler_arg,
    input_shapes_arg,
    part_of_one,
    positive_int,
    positive_seconds,
    seed_arg,
)

#: trials per kernel unless told otherwise (MetaSchedule's examples tune with 64 and more)
DEFAULT_TRIALS = 64


def register(sub) -> None:
    """Add ``tune-kernels`` to the ``autoplace`` parser."""
    k = sub.add_parser("tune-kernels",
                       help="tune the model's kernels for each unit's target with "
                            "MetaSchedule, into a kernel database builds then use")
    k.add_argument("model", help="bundled model name, .onnx or .pt2 (torch.export) path")
    input_shapes_arg(k)
    k.add_argument("--hw", required=True, help="bundled profile name or .toml path")
    k.add_argument("--kernel-db", required=True, metavar="DIR",
                   help="the database (a directory; made if missing): MetaSchedule's JSON "
                        "records, one sub-directory per unit target; a second job on it "
                        "tunes only what the first left")
    k.add_argument("--trials", type=positive_int, default=DEFAULT_TRIALS,
                   help=f"measured candidates per kernel and target (default "
                        f"{DEFAULT_TRIALS})")
    k.add_argument("--flops-share", type=part_of_one, default=1.0, metavar="FRACTION",
                   help="tune only the heaviest kernels that hold this share of each "
                        "target's flops (0.95: a big model's few kernels that weigh most); "
                        "the others keep their default schedules")
    k.add_argument("--unit", action="append", default=None,
                   help="tune for this unit's target only (repeatable; default: every unit)")
    k.add_argument("--rpc-tracker", default=None, metavar="HOST:PORT",
                   help="measure on the boards a TVM RPC tracker has under --rpc-key")
    k.add_argument("--rpc-key", default=None, help="device key on the tracker")
    cross_compiler_arg(k)
    k.add_argument("--build-timeout", type=positive_seconds, default=120.0,
                   metavar="SECONDS", help="one candidate's build (MetaSchedule's builder)")
    k.add_argument("--run-timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                   help="one candidate's run (MetaSchedule's runner)")
    k.add_argument("--seed", type=seed_arg, default=0, help="MetaSchedule's seed")
    k.add_argument("--retime", action="store_true",
                   help="time every kernel's finalists again, even those timed since their "
                        "last trial (a database tuned on a busy machine, on a quiet one)")
    k.set_defaults(run=cmd_tune_kernels)


def cmd_tune_kernels(args: argparse.Namespace) -> int:
    from autoplace.deploy.kernel_db import KernelDatabase
    from autoplace.deploy.kernel_tuning import (
        KernelTuner,
        KernelTuning,
        flops_share,
        heaviest,
        kernel_tasks,
    )
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_module
    from autoplace.runtime.layout import runtime_program
    from autoplace.runtime.libraries import kernel_funcs

    if bool(args.rpc_tracker) != bool(args.rpc_key):
        raise ValueError("--rpc-tracker and --rpc-key go together")
    tuning = KernelTuning(trials=args.trials, seed=args.seed, build_timeout=args.build_timeout,
                          run_timeout=args.run_timeout, tracker=args.rpc_tracker,
                          key=args.rpc_key, retime=args.retime)
    profile = load_profile(args.hw)
    names = [u.name for u in profile.units]
    for unit in args.unit or []:
        if unit not in names:
            raise ValueError(f"--unit {unit!r}: profile {profile.name!r} has no such unit "
                             f"(its units: {', '.join(names)})")
    if args.rpc_tracker:
        _board_is_there(args.rpc_tracker, args.rpc_key)
    mod, graph = load_module(args.model, args.input_shapes)
    program = runtime_program(mod, graph, profile)
    every = kernel_tasks(kernel_funcs(program), graph, profile, args.unit,
                         on_board=args.rpc_tracker is not None,
                         cross_compiler=args.cross_compiler)
    tasks = heaviest(every, args.flops_share)
    db = KernelDatabase(args.kernel_db, create=True)
    where = f"{args.rpc_tracker} key {args.rpc_key}" if args.rpc_tracker else "this host"
    which = (f"{len(tasks)} kernels" if len(tasks) == len(every) else
             f"the {len(tasks)} heaviest of {len(every)} kernels "
             f"({flops_share(tasks, every):.1%} of the flops)")
    print(f"tuning {which} of {graph.name} for {_targets(tasks)} on {where}, "
          f"{args.trials} trials each, into {db.directory}", flush=True)
    KernelTuner(db, tuning).tune_all(tasks, progress=lambda s: print(s, flush=True))
    print(f"next: autoplace calibrate --hw {args.hw} --model {args.model} --kernel-db "
          f"{args.kernel_db} (the profile's kernel times from these kernels), then "
          f"autoplace tune/compile ... --kernel-db {args.kernel_db}")
    return 0


def _board_is_there(tracker: str, key: str) -> None:
    """A one-line error unless the tracker answers and has a server under ``key``
    (MetaSchedule's RPC runner would retry a dead tracker for ever)."""
    from autoplace.measure.rpc import NoServerError, servers_under
    from autoplace.measure.server import parse_addr

    if servers_under(parse_addr(tracker, "--rpc-tracker"), key) == 0:
        raise NoServerError(f"--rpc-tracker {tracker}: no server is registered under key "
                            f"{key!r} (start one on the board: python -m tvm.exec.rpc_server "
                            f"--tracker {tracker} --key {key})")


def _targets(tasks) -> str:
    units = sorted({", ".join(t.units) for t in tasks})
    return f"{len(units)} target{'s' if len(units) != 1 else ''} ({'; '.join(units)})"

