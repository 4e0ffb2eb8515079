"""Core benchmark: set-up, memory, batched simulator, tuner overhead, against a reference.

    python experiments/bench_core.py [--cases ...] [--trials 1000] [--runs 3]
                                     [--ref experiments/results/bench_core_fa7bb04.json]

prints one markdown table, each figure beside the reference's (``--ref``, named by its file:
``bench_core_<rev>.json``) and their ratio, then the goals met or not. ``--tree DIR --out
FILE`` measures another checkout of the current API (``git archive fa7bb04`` extracted in
DIR) and writes a --ref JSON; ``--legacy-tree DIR`` measures 440fede's API instead.

Each case runs in a fresh subprocess on one core (``taskset -c 0``), killed past 8 GiB RSS
(sampled), 900 s of set-up or 1,800 s more. Figures, each with the 1-minute load average:
set-up s (load_profile + SearchSpace + Simulator; each also alone) and peak RSS after it; the
first batch apart (numba JIT compile or cache load), then placements/s of the batched simulator
(batches of 256 random placements made untimed, >= 2 s of simulator time per run, median of
--runs); tuner overhead per measured trial ((wall - measure) / measured), wall s of --trials
trials, the tune's CPU ms per trial (measuring too) and how many times another process took
the core meanwhile (``preempted``, in the load column: the wall figures' noise on a shared
machine, whose other tenants run on the same cores). A set-up over 300 s or 8 GiB skips the
rest. The meshes NxM are the measured tree's hwprofiles/mesh.toml (the bundled 4x4
``mesh``) with rows and cols changed. ``@10k`` tunes 10,000 trials only (the goals divide
its wall by the 1,000-trial one's); ``cli`` runs ``autoplace tune`` as a user would: wall s
and the child's peak RSS (``wait4``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCH, MIB = 256, 1 << 20
SETUP_TIMEOUT_S, RUN_TIMEOUT_S, SKIP_SETUP_S, RSS_LIMIT_MIB = 900.0, 1800.0, 300.0, 8192.0
CASES = {  # name -> (model, bundled profile name or (rows, cols) of a generated mesh)
    "resnet50/soc": ("resnet50", "soc"), "densenet121/soc": ("densenet121", "soc"),
    "densenet121/mesh": ("densenet121", "mesh"), "resnet50/mesh8x8": ("resnet50", (8, 8)),
    "resnet50/mesh32x32": ("resnet50", (32, 32)), "resnet50/mesh96x76": ("resnet50", (96, 76)),
    "densenet121/soc@10k": ("densenet121", "soc"), "resnet50/mesh96x76 cli": ("resnet50", (96, 76)),
}
ONLY_TUNE = {"densenet121/soc@10k": 10_000}  # case -> its trials (no set-up or sim figures)
CLI = {"resnet50/mesh96x76 cli": 20}  # case -> trials of `autoplace tune`
GOALS = (  # text, case, field, limit, higher is better
    ("batched sim >= 68,000 placements/s (resnet50/soc)", "resnet50/soc", "sim_per_s",
     68_000, True),
    ("overhead <= 2 ms per trial (densenet121/soc)", "densenet121/soc", "overhead_ms", 2, False),
    ("overhead <= 2 ms per trial (resnet50/soc)", "resnet50/soc", "overhead_ms", 2, False),
    ("1,000 trials in <= 8 s wall (densenet121/soc)", "densenet121/soc", "wall_s", 8, False),
    ("10,000 trials <= 10.5x the wall of 1,000 (densenet121/soc)", "densenet121/soc@10k",
     "wall_ratio", 10.5, False),
    ("set-up <= 10 s (resnet50, 7,296-PE mesh)", "resnet50/mesh96x76", "setup_s", 10, False),
    ("set-up <= 1 GiB = 1,024 MiB peak RSS (resnet50, 7,296-PE mesh)", "resnet50/mesh96x76",
     "setup_rss_mib", 1024, False),
    ("tune --trials 20 <= 60 s (resnet50, 7,296-PE mesh)", "resnet50/mesh96x76 cli",
     "cli_wall_s", 60, False),
    ("tune --trials 20 <= 1 GiB = 1,024 MiB peak RSS (resnet50, 7,296-PE mesh)",
     "resnet50/mesh96x76 cli", "cli_rss_mib", 1024, False),
)
FIGURES = ("import_s", "profile_s", "space_s", "sim_s", "setup_s", "setup_rss_mib",
           "first_batch_s", "sim_per_s", "overhead_ms", "cpu_ms", "preempted", "wall_s",
           "measured", "peak_rss_mib", "cli_wall_s", "cli_rss_mib")


def mesh_toml(rows: int, cols: int, tree: Path, out_dir: str) -> Path:
    """``tree``'s bundled 4x4 mesh profile as a ``rows`` x ``cols`` one, written to out_dir."""
    text, name = (tree / "hwprofiles" / "mesh.toml").read_text(), f"mesh{rows}x{cols}"
    for key, value in (("name", f'"{name}"'), ("rows", rows), ("cols", cols)):
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        if n != 1:
            raise ValueError(f"mesh.toml: expected one '{key} = ...' line, found {n}")
    path = Path(out_dir) / f"{name}.toml"
    path.write_text(text)
    return path


def first_module(names: tuple[str, ...]):
    """The first of ``names`` the measured tree has, imported."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not name.startswith(str(exc.name)):
                raise
    raise ModuleNotFoundError(f"none of {', '.join(names)} in the measured tree")


# -- the two adapters: every call to autoplace is here --------------------------------------
class CurrentApi:
    """The current API: batches go to ``simulate_batch`` as genomes (440fede's went through
    ``Simulator.measure`` as placements, the only batched entry it had)."""

    #: where load_profile and TuningLog are: the first module of each that the tree has
    #: (61fce8e, the compiled-space issue's close: ``profile_io`` and ``records``)
    PROFILES = ("autoplace.hardware.load", "autoplace.profile_io")
    LOG = ("autoplace.records.tuning_log", "autoplace.records")
    MODULES = ("numpy", "autoplace.models", "autoplace.space", "autoplace.measure.simulator",
               "autoplace.measure.batch", "autoplace.search")

    def setup(self, model: str, spec: str, clock) -> None:
        """Imports (timed apart), then load_profile, SearchSpace and Simulator, each timed."""
        clock("import_s", lambda: [importlib.import_module(m) for m in self.MODULES]
              + [first_module(self.PROFILES), first_module(self.LOG)])
        from autoplace.models import load_graph
        from autoplace.space import SearchSpace

        load_profile = first_module(self.PROFILES).load_profile
        self.graph = load_graph(model)
        self.profile = clock("profile_s", load_profile, spec)
        self.space = clock("space_s", SearchSpace, self.graph, self.profile)
        self.sim = clock("sim_s", self.simulator)

    def simulator(self):
        from autoplace.measure.simulator import Simulator

        return Simulator(self.space)

    def batch(self, rng):
        """A call that simulates one batch of random placements, made beforehand (untimed)."""
        from autoplace.measure.batch import simulate_batch

        choice, mode = self.space.random_genomes(BATCH, rng)
        return lambda: simulate_batch(self.space, choice, mode)

    def tune(self, trials: int, seed: int, path: str):
        """A TuneResult (wall_s, measure_s, measured) of ``trials`` trials."""
        from autoplace.search import TuneConfig, tune

        with first_module(self.LOG).TuningLog(path) as log:
            return tune(self.space, self.sim, log, TuneConfig(trials=trials, seed=seed))


class LegacyApi(CurrentApi):
    """The API of 440fede: the simulator takes graph and profile; batches of Placements;
    profiles load from ``profile_io``, logs are ``records.TuningLog``."""

    MODULES = ("numpy", "autoplace.models", "autoplace.space", "autoplace.measure.simulator",
               "autoplace.search")

    def simulator(self):
        from autoplace.measure.simulator import Simulator

        return Simulator(self.graph, self.profile, space=self.space)

    def batch(self, rng):
        sp, pick = self.space, lambda seq: seq[int(rng.integers(len(seq)))]
        free = [k for k, m in enumerate(sp.edge_modes) if len(m) > 1]  # as 440fede's bench
        placements = [sp.decode([int(rng.integers(len(c))) for c in sp.op_choices],
                                {k: pick(sp.edge_modes[k]) for k in free})
                      for _ in range(BATCH)]
        return lambda: self.sim.measure(placements)


# -- one case, in the subprocess ------------------------------------------------------------
def emit(**fields) -> None:
    """One line of the case's figures, with the 1-minute load average (the parent merges)."""
    print(json.dumps(fields | {"load": round(os.getloadavg()[0], 2)}), flush=True)


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def sim_figures(api, rng, runs: int, min_s: float = 2.0) -> None:
    """The first batch's seconds, then placements/s of runs of >= min_s simulator time."""
    call, t0 = api.batch(rng), time.perf_counter()
    call()
    first, rates = time.perf_counter() - t0, []
    for _ in range(runs):
        spent, n = 0.0, 0
        while spent < min_s:
            call, t0 = api.batch(rng), time.perf_counter()
            call()
            spent, n = spent + time.perf_counter() - t0, n + BATCH
        rates.append(n / spent)
    emit(first_batch_s=first, sim_runs=rates, sim_per_s=statistics.median(rates))


def tune_figures(api, trials: int, seed: int, tmp: str) -> None:
    """The tuner's overhead (wall), and its CPU time and how often another process took
    its core meanwhile (the wall figure's noise on a shared machine)."""
    before, cpu = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    res = api.tune(trials, seed, os.path.join(tmp, "log.jsonl"))
    cpu, after = time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF)
    emit(overhead_ms=(res.wall_s - res.measure_s) / res.measured * 1e3, wall_s=res.wall_s,
         measured=res.measured, peak_rss_mib=rss_mib(), cpu_ms=cpu / res.measured * 1e3,
         preempted=after.ru_nivcsw - before.ru_nivcsw)


def cli_figures(model: str, spec, trials: int, tree: Path, tmp: str) -> None:
    """Wall s and peak RSS of ``autoplace tune`` (this process's environment: the tree)."""
    hw = spec if isinstance(spec, str) else str(mesh_toml(*spec, tree, tmp))
    cmd = [sys.executable, "-m", "autoplace", "tune", model, "--hw", hw, "--trials",
           str(trials), "--log", os.path.join(tmp, "cli.jsonl"), "--no-progress"]
    err, t0 = Path(tmp, "cli.err"), time.perf_counter()
    with err.open("w") as fe:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fe, cwd=tmp)  # (-m
        # puts the working directory first on the path: not the checkout it was run from)
        _, status, usage = os.wait4(proc.pid, 0)  # (its rusage: the child's own peak RSS)
    wall, tail = time.perf_counter() - t0, err.read_text().strip().splitlines()[-1:]
    code = proc.returncode = os.waitstatus_to_exitcode(status)
    shown = f"autoplace tune {model} --hw {Path(hw).name} --trials {trials}"
    emit(cli_wall_s=wall, cli_rss_mib=usage.ru_maxrss / 1024, cli_command=shown,
         **({"error_cli": f"exit {code}: {' '.join(tail)}"} if code else {}))


def run_case(name: str, tree: Path, legacy: bool, trials: int, runs: int, seed: int) -> None:
    import numpy as np

    import autoplace

    emit(autoplace=autoplace.__file__)
    if not Path(autoplace.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"imported {autoplace.__file__}, not the tree {tree}")
    (model, spec), api, stages = CASES[name], (LegacyApi if legacy else CurrentApi)(), {}
    if name in CLI:
        with tempfile.TemporaryDirectory() as tmp:
            return cli_figures(model, spec, CLI[name], tree, tmp)

    def clock(key, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        stages[key] = time.perf_counter() - t0
        emit(**{key: stages[key]})
        return out

    with tempfile.TemporaryDirectory() as tmp:
        path = spec if isinstance(spec, str) else str(mesh_toml(*spec, tree, tmp))
        api.setup(model, path, clock)
        setup_s = stages["profile_s"] + stages["space_s"] + stages["sim_s"]
        emit(setup_s=setup_s, setup_rss_mib=rss_mib(), ops=len(api.graph.ops))
        if setup_s > SKIP_SETUP_S or rss_mib() > RSS_LIMIT_MIB:
            emit(note=f"set-up took {setup_s:.0f} s, {rss_mib():.0f} MiB: rest skipped")
            return
        todo = (("sim", lambda: sim_figures(api, np.random.default_rng(seed), runs)),
                ("tune", lambda: tune_figures(api, trials, seed, tmp)))
        for what, figures in todo[1:] if name in ONLY_TUNE else todo:
            try:
                figures()
            except Exception as exc:  # an API in flux: report it, go on to the next figures
                emit(**{f"error_{what}": f"{what}: {type(exc).__name__}: {exc}"})


# -- the parent: cases one at a time, watched -----------------------------------------------
def watch(proc: subprocess.Popen, out: Path) -> dict:
    """Wait for the case, killing it past the limits: why and when it was, peak RSS MiB."""
    import psutil

    ps, t0, peak = psutil.Process(proc.pid), time.monotonic(), 0.0
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss / MIB
        except psutil.Error:
            break
        peak, elapsed = max(peak, rss), time.monotonic() - t0
        in_setup = '"setup_s"' not in out.read_text()
        limit = SETUP_TIMEOUT_S if in_setup else SETUP_TIMEOUT_S + RUN_TIMEOUT_S
        reason = (f"RSS {rss:.0f} MiB > {RSS_LIMIT_MIB:.0f}" if rss > RSS_LIMIT_MIB
                  else f"{'set-up' if in_setup else 'case'} > {limit:.0f} s"
                  if elapsed > limit else None)
        if reason:
            proc.kill()
            proc.wait()
            bounds = {"setup_s_over": elapsed, "setup_rss_mib_over": rss} if in_setup else {}
            return {"killed": f"{reason}: killed after {elapsed:.0f} s at RSS {rss:.0f} MiB",
                    "load_killed": os.getloadavg()[0], "watch_peak_rss_mib": peak} | bounds
        time.sleep(0.5)
    return {"killed": None, "watch_peak_rss_mib": peak}


def run_isolated(name: str, args) -> dict:
    """One case in a fresh subprocess on core 0: its figures merged, with a note."""
    trials = ONLY_TUNE.get(name, CLI.get(name, args.trials))
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--case", name, "--trials",
           str(trials), "--runs", str(args.runs), "--seed", str(args.seed)]
    cmd += ["--legacy-tree", str(args.legacy_tree)] if args.legacy_tree else []
    cmd += ["--tree", str(args.tree)] if args.tree else []
    path = [str(args.legacy_tree or args.tree or ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    row, t0 = {"case": name, "note": None} | dict.fromkeys(FIGURES), time.monotonic()
    row |= {"trials": trials, "runs": args.runs, "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        with out.open("w") as fo, err.open("w") as fe:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env)
            row |= watch(proc, out)
        for line in out.read_text().splitlines():
            if line.startswith("{"):
                fields = json.loads(line)
                load = fields.pop("load")
                row.update(fields, **{f"load_{k}": load for k in fields if k in FIGURES})
        tail = err.read_text().strip().splitlines()[-1:] if proc.returncode else []
    row["case_wall_s"] = time.monotonic() - t0
    errors = [v for k, v in row.items() if k.startswith("error_")]
    if row["killed"]:  # how far it got
        row["killed"] += f" (done: {', '.join(k for k in FIGURES if row[k] is not None)})"
    row["note"] = "; ".join(filter(None, [row["killed"], row["note"], *errors, *tail])) or "ok"
    print(f"{name}: {row['case_wall_s']:.0f} s, {row['note']}", file=sys.stderr)
    return row


# -- the table ------------------------------------------------------------------------------
LOWER = "new/old × (< 1 better)"
COLUMNS = (  # header, field, format, header of the ratio new/old
    ("set-up s", "setup_s", "{:.3f}", LOWER),
    ("peak RSS after set-up MiB", "setup_rss_mib", "{:,.0f}", LOWER),
    ("batched sim placements/s", "sim_per_s", "{:,.0f}", "speed-up × = new/old (> 1 better)"),
    ("overhead ms/trial", "overhead_ms", "{:.2f}", LOWER),
    ("CPU ms/trial (tune, measuring too)", "cpu_ms", "{:.2f}", LOWER),
    ("wall s of trials", "wall_s", "{:.1f}", LOWER),
)


def cell(row: dict | None, field: str, fmt: str) -> str:
    """The figure; for a case killed in set-up, what it was past by then; or a dash."""
    row = row or {}
    if row.get(field) is not None:
        return fmt.format(row[field])
    return f"≥ {row[field + '_over']:,.0f}" if field + "_over" in row else "–"


def loads(row: dict | None) -> str:
    row, keys = row or {}, ("load_setup_s", "load_sim_per_s", "load_wall_s")
    text = "/".join("–" if row.get(k) is None else f"{row[k]:.1f}" for k in keys)
    killed = row.get("load_killed")
    if row.get("preempted") is not None:  # involuntary context switches while tuning
        text += f", tune preempted {row['preempted']:,}x"
    return text if killed is None else f"{text} (at kill {killed:.1f})"


def table(rows: list[dict], ref: dict[str, dict], ref_name: str) -> str:
    head = ["case", "first batch s (JIT/cache)"]
    for name, _, _, ratio_head in COLUMNS:
        head += [name, ref_name, ratio_head]
    head += ["load set-up/sim/tune", f"{ref_name} load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in (r for r in rows if r["case"] not in CLI):
        old, cells = ref.get(r["case"], {}), [r["case"], cell(r, "first_batch_s", "{:.3f}")]
        for _, field, fmt, _ in COLUMNS:
            a, b = r.get(field), old.get(field)
            b = None if field == "wall_s" and r.get("trials") != old.get("trials") else b
            ratio = f"{a / b:.2f}" if a and b else "–"
            cells += [cell(r, field, fmt), cell(old, field, fmt), ratio]
        lines.append("| " + " | ".join(cells + [loads(r), loads(old)]) + " |")
    return "\n".join(lines)


def cli_table(rows: list[dict], ref: dict[str, dict], ref_name: str) -> str:
    """The runs of the command line: wall s and peak RSS beside the reference's."""
    lines = ["", f"| case | command | wall s | {ref_name} | {LOWER} | peak RSS MiB | {ref_name} "
             f"| {LOWER} | load | {ref_name} load |", "|" + "---|" * 10]
    for r in (r for r in rows if r["case"] in CLI):
        old, cells = ref.get(r["case"], {}), [r["case"], f"`{r.get('cli_command', '')}`"]
        for field, fmt in (("cli_wall_s", "{:.1f}"), ("cli_rss_mib", "{:,.0f}")):
            a, b = r.get(field), old.get(field)
            cells += [cell(r, field, fmt), cell(old, field, fmt), f"{a / b:.2f}" if a and b
                      else "–"]
        load = [x.get("load_cli_wall_s") for x in (r, old)]
        cells += ["–" if x is None else f"{x:.1f}" for x in load]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def wall_ratio(rows: list[dict]) -> None:
    """The 10,000-trial row's wall over the 1,000-trial one's (same model, profile, seed)."""
    by_case = {r["case"]: r for r in rows}
    for case in ONLY_TUNE:
        many, one = by_case.get(case, {}), by_case.get(case.split("@")[0], {})
        if many.get("wall_s") and one.get("wall_s") and one.get("trials") == 1000:
            many["wall_ratio"] = many["wall_s"] / one["wall_s"]


def goals(rows: list[dict], ref: dict[str, dict], trials: int, ref_name: str) -> str:
    by_case, lines = {r["case"]: r for r in rows}, ["", "Goals:"]
    for text, case, field, limit, higher in GOALS:
        r = by_case.get(case) or {}
        value, over = r.get(field), r.get(field + "_over")  # over: killed in set-up past it
        if not r or (field == "wall_s" and trials != 1000):
            verdict = "not run" if not r else f"not judged (ran {trials} trials)"
        elif value is None:
            verdict = "NOT MET" if over is not None and over > limit else "not measured"
        else:
            verdict = "met" if (value >= limit if higher else value <= limit) else "NOT MET"
        old = cell(ref.get(case), field, "{:,.2f}")
        lines.append(f"- {text}: {cell(r, field, '{:,.2f}')} ({ref_name} {old}) — {verdict}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref", default=str(ROOT / "experiments/results/bench_core_fa7bb04.json"))
    ap.add_argument("--tree", type=Path, help="measure the autoplace of this checkout")
    ap.add_argument("--legacy-tree", type=Path, help="measure 440fede's API from this tree")
    ap.add_argument("--out", help="write the figures as JSON here")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case here
    args = ap.parse_args()
    if args.case:
        tree = args.legacy_tree or args.tree or ROOT
        sys.path.insert(0, str(tree))
        run_case(args.case, tree, bool(args.legacy_tree), args.trials, args.runs, args.seed)
        return
    rows = [run_isolated(name, args) for name in args.cases]
    wall_ratio(rows)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    ref_file = Path(args.ref)
    ref = ({} if args.legacy_tree or not ref_file.is_file()
           else {r["case"]: r for r in json.loads(ref_file.read_text())})
    wall_ratio(list(ref.values()))
    named = re.fullmatch(r"bench_core_(\w+)\.json", ref_file.name)
    ref_name = named.group(1) if named else ref_file.stem
    print(table(rows, ref, ref_name))
    print(cli_table(rows, ref, ref_name))
    print(goals(rows, ref, args.trials, ref_name))
    print("\nNotes:\n" + "\n".join(f"- {r['case']}: {r['note']}" for r in rows))


if __name__ == "__main__":
    main()
