"""Subcommands and measurers of the real side: compile, run, serve (issue 3).

TVM is imported inside the handlers only, so ``autoplace tune`` with the simulator never
loads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autoplace.cli.options import (
    cache_arg,
    choice_args,
    cross_compiler_arg,
    input_shapes_arg,
    kernel_db_arg,
    limits_of,
    positive_int,
    positive_seconds,
    seed_arg,
)
from autoplace.measure.objective import OBJECTIVES
from autoplace.measure.server import HANDSHAKE_TIMEOUT_S, MAX_HANDSHAKE_TIMEOUT_S, MAX_UPLOAD_MIB


def _timing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeat", type=int, default=5, help="timed repeats; the median is kept")
    p.add_argument("--number", type=int, default=1, help="runs per repeat")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the random inputs")


def _cache(args) -> Path:
    from autoplace.runtime import DEFAULT_CACHE

    return args.cache_dir or DEFAULT_CACHE


def kernels(args):
    """The kernel database ``--kernel-db`` names (None: default schedules)."""
    from autoplace.deploy.kernel_db import KernelDatabase

    return KernelDatabase(args.kernel_db) if args.kernel_db else None


def register(sub) -> None:
    """Add the real-side subcommands to the ``autoplace`` parser."""
    c = sub.add_parser("compile", help="build the best placement of a log into a library, "
                                       "or a mesh's pipeline into stage libraries")
    c.add_argument("model", help="bundled model name, .onnx or .pt2 (torch.export) path")
    input_shapes_arg(c)
    c.add_argument("--hw", required=True, help="bundled profile name or .toml path")
    c.add_argument("--log", default=None,
                   help="tuning log (JSON lines); not needed for a mesh pipeline")
    c.add_argument("-o", "--output", required=True,
                   help="directory to write: the per-unit kernel libraries, the schedule and "
                        "manifest.json (docs/runtime.md); for a mesh pipeline, its stage "
                        "libraries and manifest.json")
    c.add_argument("--objective", choices=tuple(OBJECTIVES), default="latency",
                   help="build the best record by latency, or by a stream's period; "
                        "throughput on a mesh profile builds a pipeline (docs/pipeline.md)")
    choice_args(c)
    from autoplace.cli.pipeline_commands import plan_args

    plan_args(c)
    cache_arg(c)
    cross_compiler_arg(c)
    kernel_db_arg(c)
    c.set_defaults(run=cmd_compile)
    r = sub.add_parser("run", help="run a built library (or MODEL --log --hw) and time it; "
                                   "or stream inferences through a compiled pipeline")
    r.add_argument("target", help="a directory from `autoplace compile` (a placed build, or "
                                  "a pipeline's; or its manifest.json), or a model")
    r.add_argument("--hw", default=None, help="profile (with a model and --log)")
    r.add_argument("--log", default=None, help="tuning log (with a model and --hw)")
    input_shapes_arg(r)
    r.add_argument("--inputs", default=None, metavar="FILE.npz",
                   help="the inputs, an array per input name (default: seeded random)")
    r.add_argument("--outputs", default=None, metavar="FILE.npz",
                   help="write the outputs there (output_0, output_1, ...)")
    r.add_argument("--print-top", type=positive_int, default=None, metavar="N",
                   help="print the N largest values of the first output (per row) and "
                        "their indices")
    _timing_args(r)
    from autoplace.cli.pipeline_stages import run_args

    run_args(r)
    cache_arg(r)
    kernel_db_arg(r)
    r.set_defaults(run=cmd_run)
    s = sub.add_parser("serve", help="a TVM RPC server that also simulates a profile")
    s.add_argument("--hw", required=True, help="the profile the server simulates")
    s.add_argument("--rpc-tracker", "--tracker", required=True, metavar="HOST:PORT",
                   help="the TVM RPC tracker (--tracker: the same)")
    s.add_argument("--rpc-key", "--key", required=True, metavar="KEY",
                   help="device key to register under (--key: the same)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=9090, help="first port to try")
    s.add_argument("--port-end", type=int, default=9199, help="last port to try")
    s.add_argument("--handshake-timeout", type=positive_seconds, default=HANDSHAKE_TIMEOUT_S,
                   metavar="SECONDS", help="drop a connection whose handshake is not done "
                   "this long after it was accepted (meanwhile the server serves no one "
                   "else); at most "
                   f"{MAX_HANDSHAKE_TIMEOUT_S:g}")
    s.add_argument("--max-upload-mib", type=positive_int, default=MAX_UPLOAD_MIB,
                   metavar="MIB", help="refuse a larger upload (nothing is written)")
    s.set_defaults(run=cmd_serve)


def real_measurer(args, graph, profile, space):
    """The local or RPC measurer named by ``--measurer`` (``rpc-sim``: simulated boards)."""
    from autoplace.deploy.run import TimeSettings

    settings = TimeSettings()
    if args.measurer == "rpc-sim":
        from autoplace.measure.rpc import RPCMeasurer

        _need_rpc(args)
        return RPCMeasurer(None, graph, profile, space=space, tracker=args.rpc_tracker,
                           key=args.rpc_key, mode="simulate", timeout=args.timeout)
    from autoplace.models import load_module_for

    mod = load_module_for(args.model, graph, args.input_shapes)
    if args.measurer == "local":
        from autoplace.measure.local import LocalMeasurer

        return LocalMeasurer(mod, graph, profile, space=space, settings=settings,
                             timeout=args.timeout, cache_dir=_cache(args),
                             kernels=kernels(args))
    if args.measurer == "rpc":
        from autoplace.measure.rpc import RPCMeasurer

        _need_rpc(args)
        return RPCMeasurer(mod, graph, profile, space=space, tracker=args.rpc_tracker,
                           key=args.rpc_key, settings=settings, timeout=args.timeout,
                           mode="run" if args.rpc_mode == "vm" else "runtime",
                           cache_dir=_cache(args), cross_compiler=args.cross_compiler,
                           kernels=kernels(args))
    raise ValueError(f"--measurer {args.measurer!r}: unknown")


def _need_rpc(args) -> None:
    if not args.rpc_tracker or not args.rpc_key:
        raise ValueError(f"--measurer {args.measurer} needs --rpc-tracker HOST:PORT and "
                         "--rpc-key KEY")


def _best_record(model: str, hw: str, log: str, objective: str = "latency", shapes=None,
                 choice=None):
    """The model's module and graph (``shapes``: its symbolic input dimensions), the profile,
    and the placement record of ``log`` to build: the best by ``objective``, or, given
    ``choice`` (parsed :func:`choice_args`), the one its ``--pick`` and limits choose."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import entry_points, load_module
    from autoplace.records.front import Limits, criteria_of, pick
    from autoplace.records.tuning_log import read

    profile = load_profile(hw)
    mod, graph = load_module(model, shapes, entry_points(profile))
    records = read(log)
    limits = limits_of(choice) if choice is not None else None
    if limits is not None and (unknown := limits.unknown_scopes(profile.scope_index)):
        raise ValueError(f"--max-memory: profile {profile.name} has no scope "
                         f"{', '.join(map(repr, unknown))} (its scopes: "
                         f"{', '.join(profile.scope_index)})")
    ours = [r for r in records if r.graph_fp == graph.fingerprint
            and r.profile_hash == profile.hash and r.pipeline is None]
    how = (choice.pick if choice is not None else None) or objective
    rec = pick(ours, how, criteria_of(ours, choice.criteria) if choice is not None
               else (), limits or Limits())
    if rec is None:
        raise ValueError(f"{log}: no valid record for graph {graph.name} (fingerprint "
                         f"{graph.fingerprint}) on profile {profile.name} (hash "
                         f"{profile.hash}) among {len(records)} records"
                         f"{' within the limits given' if limits else ''}")
    return mod, graph, profile, rec


def cmd_compile(args) -> int:
    from autoplace.cli.pipeline_commands import is_pipeline_job
    from autoplace.cli.pipeline_stages import compile_pipeline

    if is_pipeline_job(args):
        return compile_pipeline(args)
    if not args.log:
        raise ValueError(f"compile {args.model}: --log LOG is needed (the placement to build "
                         "is its best record)")
    given = [o for o, v in (("--pes", args.pes), ("--max-split", args.max_split),
                            ("--plan", args.plan)) if v is not None]
    if given:
        raise ValueError(f"compile: {', '.join(given)} only go with --objective throughput on "
                         "a profile with a [mesh] (a pipeline)")
    from autoplace.deploy.targets import BuildError
    from autoplace.runtime import Runtime
    from autoplace.runtime.artefact import write_artefact

    mod, graph, profile, rec = _best_record(args.model, args.hw, args.log, args.objective,
                                            args.input_shapes, choice=args)
    with Runtime(mod, graph, profile, cache_dir=_cache(args),
                 cross_compiler=args.cross_compiler, kernels=kernels(args),
                 source=_source(args.model, args.input_shapes, profile)) as rt:
        try:
            rt.check(rec.placement)  # refused here, not on the board, if it cannot run
        except BuildError as exc:  # which placement, from where
            raise BuildError(f"{args.log}: the best record (trial {rec.trial}): "
                             f"{exc}") from None
        path = write_artefact(args.output, rt, rec.placement, model=args.model,
                              input_shapes=args.input_shapes,
                              record={"trial": rec.trial, "strategy": rec.strategy,
                                      "measurer": rec.measurer,
                                      "latency_s": rec.result.latency_s})
        archs = sorted({rt.libraries.arch(u) for u in rt.kernel_units(rec.placement)})
        offload = rt.offload(rec.placement)
    units = sorted(rec.placement.units_used())
    print(f"{rec.graph} on {rec.profile}: trial {rec.trial} ({rec.strategy}, "
          f"{rec.result.latency_s * 1e3:.4f} ms by {rec.measurer}), units {', '.join(units)}, "
          f"{len(rec.placement.copies)} copies, kernels for {', '.join(archs) or 'no unit'}"
          f" -> {path}")
    if offload is not None:
        _report_offload(profile, rec, offload)
    return 0


def _source(model: str, shapes, profile):
    """The model as imported, where a unit of ``profile`` has a code generator (the
    runtime runs the regions its BYOC build makes); else None."""
    from autoplace.deploy.offload import offload_units
    from autoplace.models import import_model

    return import_model(model, shapes) if offload_units(profile) else None


def _report_offload(profile, rec, offload) -> None:
    """For each unit with a code generator, what its BYOC build of the best placement
    offloads (:func:`autoplace.deploy.offload.partition`: matches, regions, groups the merge
    split), and, built by the reference accelerator, the unit's time as built (its regions'
    modelled calls) beside the simulator's."""
    from autoplace.deploy import reference_accelerator
    from autoplace.deploy.offload import offload_units

    for unit in offload_units(profile):
        name, split = unit.name, offload.split_of(unit.name)
        print(f"  {name} ({unit.codegen}): {len(offload.matches[name])} matches offloaded in "
              f"{offload.regions[name]} regions ({offload.groups[name]} placed groups"
              f"{f'; the merge split {split}' if split > 0 else ''})")
        if unit.codegen == reference_accelerator.NAME:
            built = sum(reference_accelerator.modelled_s(s) for s in offload.symbols[name])
            print(f"    as built: {built * 1e3:.4f} ms on {name} (the simulator's: "
                  f"{rec.result.unit_busy_s.get(name, 0.0) * 1e3:.4f} ms)")


def cmd_run(args) -> int:
    from autoplace.cli.pipeline_stages import is_pipeline_dir, run_pipeline
    from autoplace.runtime import RunError

    if is_pipeline_dir(args.target):
        given = [o for o, v in (("--inputs", args.inputs), ("--outputs", args.outputs),
                                ("--print-top", args.print_top)) if v is not None]
        if given:
            raise ValueError(f"run {args.target}: {', '.join(given)} only go with a placed "
                             "build (a pipeline streams random inputs)")
        return run_pipeline(args)
    given = [o for o, v in (("--inferences", args.inferences),
                            ("--rpc-tracker", args.rpc_tracker), ("--rpc-key", args.rpc_key))
             if v is not None]
    if given:
        raise ValueError(f"run {args.target}: {', '.join(given)} only go with a compiled "
                         "pipeline (a directory with manifest.json)")
    try:
        return _run_placed(args)
    except RunError as exc:
        raise ValueError(f"run {args.target}: {exc}") from None


def _run_placed(args) -> int:
    """Run a placed build (an artefact, or a model's best record compiled here) and time it."""
    from autoplace.deploy.run import TimeSettings, median

    rt, placement, graph = _placed(args)
    with rt:
        inputs = _inputs(args, rt.program)
        a = rt.assemble(placement)
        outputs = rt.run(a, inputs)
        times = rt.time(a, TimeSettings(number=args.number, repeat=args.repeat,
                                        warmup=args.warmup))
        shapes = ", ".join(str(tuple(o.shape)) for o in outputs)
        print(f"{args.target} ({rt.graph.name} on {rt.profile.name}, units "
              f"{', '.join(sorted(placement.units_used()))}): median "
              f"{median(times) * 1e3:.3f} ms over {len(times)} repeats (min "
              f"{min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f}); outputs {shapes}")
        _stand_ins(rt.profile, placement)
        _outputs(args, outputs)
        if args.check:
            from autoplace.cli.pipeline_stages import check_outputs

            check_outputs(graph, [dict(zip(rt.program.input_names, inputs))], [outputs],
                          "placed build")
    return 0


def _inputs(args, program) -> list:
    """``--inputs``' arrays, else seeded random ones."""
    from autoplace.deploy.npz import read_inputs
    from autoplace.deploy.run import random_inputs

    if args.inputs:
        return read_inputs(args.inputs, program.input_names,
                           [(s.shape, s.dtype) for s in program.inputs])
    return random_inputs({"inputs": [s.to_dict() for s in program.inputs]}, args.seed)


def _outputs(args, outputs: list) -> None:
    """``--outputs`` written, ``--print-top`` printed."""
    from autoplace.deploy.npz import output_name, top, write_outputs

    if args.outputs:
        print(f"outputs -> {write_outputs(args.outputs, outputs)}")
    if args.print_top:
        for row, best in top(outputs[0], args.print_top):
            print(f"{output_name(0)}[{row}] top {len(best)}: "
                  + ", ".join(f"{i} ({v:.6g})" for i, v in best))


def _stand_ins(profile, placement) -> None:
    """Say which units ran on this host's CPU in place of a device without a code
    generator here (the times are not that device's)."""
    from autoplace.deploy.targets import host_stand_ins

    units = host_stand_ins(profile, placement.units_used())
    if units:
        print(f"note: {', '.join(f'{u} ({k})' for u, k in units.items())} ran as host "
              "stand-ins: no code generator for that target kind here, so their kernels "
              "ran on this host's CPU and their times are not the device's")


def _placed(args):
    """(runtime, placement, the graph entry --check rebuilds the model from) of ``run``'s
    target."""
    from autoplace.runtime import Runtime
    from autoplace.runtime.artefact import is_artefact, load_artefact

    path = Path(args.target)
    if path.name == "manifest.json":
        path = path.parent
    if path.is_dir() and is_artefact(path):
        art = load_artefact(path)
        if args.input_shapes:
            raise ValueError(f"run {path}: --input-shapes: a build has its shapes already")
        return art.runtime, art.placement, art.manifest["graph"]
    if path.is_dir() or path.suffix in (".so", ".tar", ".json"):
        raise ValueError(f"{path}: not a build of `autoplace compile` (no manifest.json of "
                         "a placed build or a pipeline)")
    if not args.log or not args.hw:
        raise ValueError(f"{args.target}: a model needs --log LOG and --hw PROFILE "
                         "(or give a directory built by `autoplace compile`)")
    mod, graph, profile, rec = _best_record(args.target, args.hw, args.log,
                                            shapes=args.input_shapes)
    entry = {"model": args.target, "fingerprint": graph.fingerprint,
             "input_shapes": args.input_shapes}
    return (Runtime(mod, graph, profile, cache_dir=_cache(args), kernels=kernels(args),
                    source=_source(args.target, args.input_shapes, profile)),
            rec.placement, entry)


def cmd_serve(args) -> int:
    from autoplace.hardware.load import load_profile
    from autoplace.measure import server

    profile = load_profile(args.hw)
    server.parse_addr(args.rpc_tracker, "--rpc-tracker")
    srv = server.start(profile, args.rpc_tracker, args.rpc_key, host=args.host, port=args.port,
                       port_end=args.port_end, handshake_timeout=args.handshake_timeout,
                       max_upload_mib=args.max_upload_mib)
    print(f"READY port={srv.port} key={args.rpc_key} profile={profile.name} "
          f"tracker={args.rpc_tracker}", flush=True)
    server.serve_forever(srv)
    return 0
