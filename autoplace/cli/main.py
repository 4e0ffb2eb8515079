"""The ``autoplace`` command line: the parser, ``tune``, ``profiles`` and ``graph``.

Bad input gives one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from autoplace.cli import tune_summary as summary
from autoplace.cli.options import (
    cache_arg,
    cross_compiler_arg,
    input_shapes_arg,
    kernel_db_arg,
    limit_args,
    limits_of,
    objective_arg,
    positive_int,
    positive_seconds,
    seed_arg,
    share,
)
from autoplace.graph import GraphError
from autoplace.hardware.profile import ProfileError
from autoplace.measure.base import MeasurementStopped
from autoplace.records.tuning_log import RecordError
from autoplace.space import PlacementError

DEFAULT_MODEL = "squeezenet"
DEFAULT_PROFILE = "soc"
USER_ERRORS = (GraphError, ProfileError, PlacementError, RecordError, MeasurementStopped,
               ValueError, OSError)


def _extensions() -> list:
    """Modules adding subcommands: ``register(subparsers)`` adds parsers with
    ``set_defaults(run=handler)``; a handler takes the parsed args and returns the exit code.
    They import TVM only inside their handlers."""
    from autoplace.cli import (
        best_command,
        calibrate_command,
        import_command,
        pipeline_commands,
        real_commands,
        report_command,
        tune_kernels_command,
    )

    return [best_command.register, real_commands.register, calibrate_command.register,
            tune_kernels_command.register, report_command.register, import_command.register,
            pipeline_commands.register]


class CliError(Exception):
    """A user error to report in one line."""


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """An option's help ends with its default where it has one to show (not None or
    False) and the help does not say it already."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text \
                or "(None:" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """One-line errors; an option's help ends with its default (:class:`_Help`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one line, not usage + error
        self.exit(2, f"{self.prog}: error: {message}\n")


DESCRIPTION = """\
Search where each op of a network runs on heterogeneous hardware (which unit, which memory
scope, sync or DMA copies; on a mesh, pipeline stages over PEs), measure candidates on a
simulator, this host or boards, and build the best."""
EXAMPLES = """examples:
  autoplace tune squeezenet --hw soc --trials 200      tune on the simulated soc profile
  autoplace best tune-squeezenet-soc.jsonl             the best placement, as a table
  autoplace best LOG --pareto                          the front over latency and energy
  autoplace compile squeezenet --hw soc --log LOG -o build   per-unit libraries and schedule
  autoplace run build                                  run the build on this host, timed
  autoplace pipeline resnet50 --hw mesh                stages over a mesh's PEs
  autoplace COMMAND --help                             each command's options"""


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="autoplace", description=DESCRIPTION, epilog=EXAMPLES,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=_version())
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    from autoplace.measure.objective import OBJECTIVES
    from autoplace.search.config import (
        COST_MODELS,
        COSTLY_BATCH,
        FREE_BATCH,
        SAMPLERS,
        STUDY_PARAMS,
        TuneConfig,
    )

    defaults = TuneConfig()  # of tune's options
    t = sub.add_parser("tune", help="search the best placement of a model on a profile")
    t.set_defaults(run=cmd_tune)
    t.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help="bundled model name, .onnx, .pt2 (torch.export) or graph .json")
    input_shapes_arg(t)
    t.add_argument("--hw", default=DEFAULT_PROFILE, help="bundled profile name or .toml path")
    t.add_argument("--trials", type=positive_int, default=defaults.trials,
                   help="search candidates to measure, after the baselines")
    t.add_argument("--objective", type=objective_arg, default=defaults.objective,
                   metavar="|".join(OBJECTIVES) + "|A,B[,C]",
                   help="minimise one inference's latency, the period of a stream of inputs "
                        "(throughput = 1 / period), or its energy; or search the front of two "
                        "or three of latency, energy, peak_memory (latency,energy: "
                        "docs/pareto.md); all are logged (docs/simulator.md)")
    limit_args(t, "the best is a placement")
    t.add_argument("--log", default=None,
                   help="tuning log, one JSON line per candidate (None: tune-MODEL-HW.jsonl)")
    t.add_argument("--seed", type=seed_arg, default=defaults.seed,
                   help="seed of every random choice: same seed, same records (simulator)")
    t.add_argument("--batch-size", type=positive_int, default=defaults.batch_size,
                   help=f"candidates measured per round (default: {FREE_BATCH} with the "
                        f"simulator, {COSTLY_BATCH} with a measurer that runs the model or "
                        "with several objectives)")
    t.add_argument("--sampler", choices=SAMPLERS, default=defaults.sampler,
                   help="evolve: model-guided evolution; tpe/random: Optuna's samplers; hill, "
                        "steepest: random-mutation hill climbing and steepest descent from "
                        "HEFT (yardsticks)")
    t.add_argument("--cost-model", choices=COST_MODELS, default=defaults.cost_model,
                   help="rank candidates with the simulator plus a residual learned by "
                        "XGBoost, the simulator alone, the analytic estimate, or not at all")
    t.add_argument("--candidates", type=positive_int, default=defaults.candidates,
                   help="candidates the cost model ranks per round (evolve)")
    t.add_argument("--descent", type=share, default=defaults.descent, metavar="SHARE",
                   help="share of --trials at the end (at least two rounds) in which the best "
                        "is first made a one-op local optimum (moves ranked by the simulator, "
                        "or by the cost model with a measurer other than the simulator); 0: "
                        "none")
    t.add_argument("--warm-start", nargs="+", default=[], metavar="FILE",
                   help="earlier tuning logs (.jsonl) of this profile, and/or one saved "
                        "cost model (.json/.ubj), to start the cost model from")
    t.add_argument("--save-model", default=None, metavar="FILE",
                   help="write the final cost model (.json or .ubj)")
    t.add_argument("--storage", default=None, help="Optuna storage URL, e.g. sqlite:///tune.db")
    t.add_argument("--study", default=None,
                   help="Optuna study name (None: autoplace-MODEL-HW-FINGERPRINT)")
    t.add_argument("--study-params", choices=STUDY_PARAMS, default=defaults.study_params,
                   help="the parameters of the study's trials, as optuna-dashboard shows "
                        "them: counts (ops per unit and per scope, copies per mode), ops (a "
                        "categorical per op and free edge: ~100 KB of storage per trial on "
                        "densenet121, docs/search.md) or none (default: ops for --sampler "
                        "tpe/random, which ask those, else counts)")
    t.add_argument("--resume", action="store_true",
                   help="continue the job in --log (and the study in --storage): "
                   "nothing logged is measured again")
    t.add_argument("--append", action="store_true",
                   help="add a new run to a --log that already holds records (of this job "
                        "or another); without it such a log is refused unless --resume")
    t.add_argument("--worker", action="store_true",
                   help="join the study in --storage (journal:PATH on one host, "
                        "postgresql://... across hosts) as one of several workers, each with "
                        "its own --log: no candidate is measured twice and --trials counts "
                        "the whole study")
    t.add_argument("--grace", type=positive_seconds, default=defaults.grace_s, metavar="SECONDS",
                   help="--worker: a worker silent this long is dead and its running trials "
                        "are measured again by others")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--measurer", choices=("simulator", "local", "rpc", "rpc-sim"),
                   default="simulator",
                   help="simulated hardware, this host, boards through TVM RPC, or simulated "
                        "boards through TVM RPC (autoplace serve)")
    t.add_argument("--rpc-tracker", default=None, help="HOST:PORT of the TVM RPC tracker")
    t.add_argument("--rpc-key", default=None, help="device key on the tracker")
    t.add_argument("--timeout", type=positive_seconds, default=60.0,
                   help="per-candidate measurement timeout in seconds (local, rpc, rpc-sim)")
    cache_arg(t)
    cross_compiler_arg(t)
    kernel_db_arg(t)
    t.add_argument("--rpc-mode", choices=("runtime", "vm"), default="runtime",
                   help="--measurer rpc: the board runs each placement with the runtime "
                        "(autoplace serve on the board; the kernels uploaded once per job), "
                        "or a Relax VM build of each candidate (any TVM RPC server)")
    sub.add_parser("profiles", help="bundled hardware profiles and their units").set_defaults(
        run=cmd_profiles)
    g = sub.add_parser("graph", help="ops of a model: kinds, FLOPs, bytes")
    g.add_argument("model")
    input_shapes_arg(g)
    g.set_defaults(run=cmd_graph)
    for register in _extensions():
        register(sub)
    return ap


#: a set-up phase that takes longer than this says what it does (and then how long it took)
SLOW_PHASE_S = 2.0


@contextlib.contextmanager
def phase(what: str):
    """Print ``what`` if the block is still running after :data:`SLOW_PHASE_S` seconds,
    and its time when it ends (quiet for quick phases)."""
    t0 = time.perf_counter()
    timer = threading.Timer(SLOW_PHASE_S, lambda: print(f"{what} ...", flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if time.perf_counter() - t0 >= SLOW_PHASE_S:
            print(f"{what}: {time.perf_counter() - t0:.1f} s", flush=True)


def _compile_kernels(space) -> None:
    """Run the simulator's and the featurizer's numba kernels on two random genomes: the
    first run after installing compiles them (which :func:`phase` then says), later runs
    load them from numba's on-disk cache."""
    import numpy as np

    from autoplace.cost_model import Featurizer
    from autoplace.measure.batch import simulate_batch

    choice, mode = space.random_genomes(2, np.random.default_rng(0))
    simulate_batch(space, choice, mode)
    Featurizer(space).transform(choice, mode)


def _load(model: str, hw: str, shapes=None):
    from autoplace.hardware.load import load_profile
    from autoplace.models import graph_for
    from autoplace.space import SearchSpace

    with phase(f"loading profile {hw}"):
        profile = load_profile(hw)
    with phase(f"loading model {model}"):
        graph = graph_for(model, profile, shapes)
    with phase(f"compiling the search space ({len(graph.ops)} ops x {len(profile.units)} units)"):
        return graph, profile, SearchSpace(graph, profile)


def make_measurer(args, graph, profile, space):
    """The measurer ``--measurer`` names (real ones live in :mod:`autoplace.cli.real_commands`)."""
    if args.measurer == "simulator":
        from autoplace.measure.simulator import Simulator

        return Simulator(space)
    from autoplace.cli.real_commands import real_measurer

    return real_measurer(args, graph, profile, space)


def cmd_tune(args) -> int:
    from autoplace.cli.pipeline_commands import is_pipeline_job, tune_pipeline
    from autoplace.records.tuning_log import TuningLog
    from autoplace.search import TuneConfig, tune

    if is_pipeline_job(args):
        return tune_pipeline(args)
    config = TuneConfig(trials=args.trials, seed=args.seed, batch_size=args.batch_size,
                        objective=args.objective, limits=limits_of(args),
                        sampler=args.sampler, storage=args.storage, study_name=args.study,
                        study_params=args.study_params,
                        resume=args.resume, append=args.append, worker=args.worker,
                        grace_s=args.grace,
                        progress=not args.no_progress,
                        cost_model=args.cost_model, candidates=args.candidates,
                        descent=args.descent,
                        warm_start=tuple(args.warm_start), save_model=args.save_model)
    for path in args.warm_start:
        if not Path(path).is_file():
            raise CliError(f"--warm-start: no such file: {path}")
    if args.objective == "throughput" and args.measurer in ("local", "rpc"):
        raise CliError(f"--objective throughput: the {args.measurer} measurer times one "
                       "inference, not a stream; use --measurer simulator or rpc-sim")
    graph, profile, space = _load(args.model, args.hw, args.input_shapes)
    log_path = args.log or f"tune-{graph.name}-{profile.name}.jsonl"
    print(f"tuning {graph.name} ({len(graph.ops)} ops) on {profile.name} "
          f"({len(profile.units)} units), space 10^{space.log10_size:.1f}, log {log_path}")
    if not profile.calibrated and not graph.profiled:
        print(f"note: profile {profile.name} is not calibrated: its times are estimates from "
              f"datasheet figures; `autoplace calibrate --hw {args.hw}` fits them to this "
              "host or a board")
    with phase("compiling the simulator's kernels (once after installing; numba caches them)"):
        _compile_kernels(space)
    with phase(f"starting the {args.measurer} measurer"):
        measurer = make_measurer(args, graph, profile, space)
    try:
        with TuningLog(log_path) as log:
            result = tune(space, measurer, log, config)
    finally:
        measurer.close()
    summary.report(result, log_path, config.goal, worker=args.worker)
    if result.best is not None:
        summary.next_steps(args, log_path)
    return 130 if result.interrupted else 0


def cmd_profiles(args) -> int:
    from autoplace.hardware.load import bundled_profiles, load_profile

    for name, path in sorted(bundled_profiles().items()):
        prof = load_profile(path)
        units = ", ".join(u.name for u in prof.units[:8])
        more = f" (+{len(prof.units) - 8} more)" if len(prof.units) > 8 else ""
        print(f"{name:<10} {len(prof.units):>3} units, {len(prof.scopes):>3} scopes, "
              f"{len(prof.copies):>3} copy paths: {units}{more}")
    return 0


def cmd_graph(args) -> int:
    from autoplace.models import load_graph

    g = load_graph(args.model, args.input_shapes)
    print(f"{g.name}: {len(g.ops)} ops, {len(g.edges)} edges, "
          f"{g.total_flops / 1e9:.3f} GFLOP, fingerprint {g.fingerprint}")
    print(f"{'op':<36} {'kind':<12} {'MFLOP':>10} {'read KiB':>10} {'out KiB':>10}")
    for op in g.ops:
        print(f"{op.name:<36} {op.kind:<12} {op.flops / 1e6:>10.3f} "
              f"{op.bytes_read / 1024:>10.1f} {op.output_bytes / 1024:>10.1f}")
    return 0


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"autoplace: warning: {message}", file=sys.stderr)


def _version() -> str:
    """``autoplace X (TVM Y)`` from package metadata (without importing TVM)."""
    from autoplace.records.tuning_log import versions

    v = versions()
    return f"autoplace {v['autoplace']} (TVM {v['tvm']})"


def _quiet_broken_pipe() -> int:
    """The reader went away (``autoplace best LOG | head``): stop quietly."""
    _to_devnull(sys.__stdout__)
    return 0


def _to_devnull(stream) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


class _StdoutUntilItsReaderLeaves:
    """Standard output whose reader may go away (``tune ... | head -1``): what is printed
    after that goes nowhere, and the command carries on (a tuning job's record is its log,
    not its output)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _to_devnull(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _to_devnull(self._stream)
            self._stream.flush()  # what it held, to the null device

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    before = sys.stdout
    if before is not None and hasattr(before, "fileno"):
        sys.stdout = _StdoutUntilItsReaderLeaves(before)
    try:
        args = build_parser().parse_args(argv)
        warnings.showwarning = _one_line_warning
        return _run(args)
    finally:
        sys.stdout = before


#: the longest error line printed (a value echoed back from a bad input may be megabytes)
MAX_ERROR_CHARS = 400


def _shortened(message: str) -> str:
    """``message`` on one line, cut to :data:`MAX_ERROR_CHARS` with the length said."""
    line = " ".join(message.split())
    if len(line) <= MAX_ERROR_CHARS:
        return line
    return f"{line[:MAX_ERROR_CHARS]}... ({len(line):,} characters in all)"


def _run(args) -> int:
    try:
        return args.run(args)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except (CliError, *USER_ERRORS) as exc:
        print(f"autoplace: error: {_shortened(str(exc))}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # (numpy's says what it could not allocate)
        print(f"autoplace: error: out of memory: {str(exc) or 'an allocation failed'}",
              file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemError) as exc:
        from autoplace.search.interrupt import from_ctrl_c

        if not from_ctrl_c(exc):  # a SystemError of its own: a bug, with its traceback
            raise
        print("autoplace: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
