"""Every bad input is one line, exit 2, naming what is wrong, with the log untouched.

A table of bad profiles (every number of a bundled profile made non-finite, negative, huge, of
the wrong type), graphs, logs, options and storage URLs, run through ``autoplace.cli.main.main``
in this process (the same code as the command, without an interpreter start per case). Each
case's log already holds records of another job, and must come out byte for byte the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit

from autoplace.cli.main import main
from autoplace.hardware.load import bundled_profiles


@dataclass(frozen=True)
class Case:
    """``argv`` with ``{dir}`` for the case's directory; ``files``: name -> text written
    there first; ``says``: what the error line must contain."""

    name: str
    argv: tuple[str, ...]
    says: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()


def tune(*extra: str) -> tuple[str, ...]:
    return ("tune", "seed_te", "--trials", "2", "--log", "{dir}/log.jsonl", "--no-progress",
            *extra)


# -- profiles ----------------------------------------------------------------------------------
SOC = bundled_profiles()["soc"].read_text()
MESH = bundled_profiles()["mesh"].read_text()

#: numbers of the soc profile: (the line as written, its key as an error names it)
SOC_NUMBERS = [
    ("launch_overhead_us = 2.0", "launch_overhead_us"),
    ("power_w = 1.5", "power_w"),
    ("conv2d = 10.0", "conv2d"),
    ("default = 2.0", "default"),
    ("capacity_mib = 2048", "capacity_mib"),
    ("capacity_mib = 4", "capacity_mib"),
    ("bandwidth_gbps = 12.8", "bandwidth_gbps"),
    ("bandwidth_gbps = 6.0", "bandwidth_gbps"),
    ("latency_us = 2.0", "latency_us"),
]
BAD_NUMBERS = ["inf", "-inf", "nan", "-1", "1e400", "1e308", '"abc"', "true", "[]"]


def profile_cases() -> list[Case]:
    cases = []
    for line, key in SOC_NUMBERS:
        lhs = line.split(" = ")[0]
        for value in BAD_NUMBERS:
            if value == "1e308" and key not in ("capacity_mib", "bandwidth_gbps"):
                continue  # huge but finite: a problem only where it is scaled to bytes
            text = SOC.replace(line, f"{lhs} = {value}", 1)
            cases.append(Case(f"profile {line} -> {value}", tune("--hw", "{dir}/hw.toml"),
                              ("hw.toml", key), (("hw.toml", text),)))
    for old, new, says in [
        ('host = "cpu1"', 'host = "nope"', "host"),
        ('default_scope = "dram"', 'default_scope = "nope"', "default_scope"),
        ('access = ["accelerator1", "cpu1"]', 'access = ["nope"]', "access"),
        ('accepts = ["*"]', 'accepts = ["nokind"]', "accepts"),
        ('modes = ["sync"]', 'modes = ["teleport"]', "modes"),
        ('dst = "sram2"', 'dst = "nowhere"', "dst"),
        ('name = "soc"', "name = 3", "name"),
        ("[units.cpu1]", "[units.cpu1]\nbogus_key = 1", "bogus_key"),
        ("[scopes.dram]", "[scopes.dram]\nbogus_key = 1", "bogus_key"),
        ("capacity_mib = 2048", "", "capacity_mib"),
        ("capacity_mib = 4", "capacity_mib = 1e-9", "capacity_mib"),  # (0 bytes: issue 31)
        ('target = { kind = "llvm", num-cores = 1 }', 'target = "llvm', "hw.toml"),
        ('host = "cpu1"', f'host = "{"x" * 5_000_000}"', "characters in all"),  # issue 31
    ]:
        cases.append(Case(f"profile {old} -> {new}", tune("--hw", "{dir}/hw.toml"),
                          ("hw.toml", says), (("hw.toml", SOC.replace(old, new, 1)),)))
    for old, new, says in [("rows = 4", "rows = 100000", "rows"),
                           ("cols = 4", "cols = 100000", "cols"),
                           ("rows = 4", "rows = 0", "rows"), ("rows = 4", "rows = 2.5", "rows"),
                           ("rows = 4", "rows = inf", "rows")]:
        cases.append(Case(f"mesh {old} -> {new}", tune("--hw", "{dir}/mesh.toml"),
                          ("mesh.toml", says), (("mesh.toml", MESH.replace(old, new, 1)),)))
    cases.append(Case("profile: not TOML", tune("--hw", "{dir}/hw.toml"), ("hw.toml",),
                      (("hw.toml", "name = [\n"),)))
    cases.append(Case("profile: no such file", tune("--hw", "{dir}/none.toml"), ("none.toml",)))
    cases.append(Case("profile: unknown name", tune("--hw", "nosuchprofile"),
                      ("nosuchprofile",)))
    return cases


# -- graphs ------------------------------------------------------------------------------------
def graph_text(edit: tuple[str, object] | None = None) -> str:
    """A two-op graph JSON (the schema of ``OpGraph.to_dict``), with one field set:
    ``op0.<field>``, ``edge.<0|1|2>`` (src, dst, bytes) or a top-level key."""
    op = {"name": "a", "kind": "conv2d", "flops": 1e6, "bytes_read": 4096,
          "output_bytes": 4096, "external_bytes": 4096, "weight_bytes": 1024, "func": "a"}
    graph = {"name": "g", "ops": [op, {**op, "name": "b", "kind": "elementwise", "func": "b",
                                       "weight_bytes": 0}],
             "edges": [[0, 1, 4096]]}
    if edit is not None:
        key, value = edit
        where, _, field = key.partition(".")
        if where == "op0":
            graph["ops"][0][field] = value
        elif where == "edge":
            graph["edges"][0][int(field)] = value
        else:
            graph[key] = value
    return json.dumps(graph)


def graph_cases() -> list[Case]:
    raw = [
        ("op0.flops", "NaN"), ("op0.flops", "Infinity"), ("op0.flops", -1), ("op0.flops", "x"),
        ("op0.output_bytes", -5), ("op0.output_bytes", "Infinity"),
        ("op0.output_bytes", None), ("op0.weight_bytes", -1), ("op0.weight_bytes", "NaN"),
        ("op0.bytes_read", "many"), ("op0.external_bytes", -3), ("op0.kind", "frobnicate"),
        ("op0.kind", 3), ("op0.name", ""), ("op0.name", None), ("op0.extra", 1),
        ("edge.0", 0.5), ("edge.0", 7), ("edge.1", -1), ("edge.1", "b"), ("edge.2", -1),
        ("edge.2", "NaN"), ("ops", []), ("ops", {}), ("edges", "none"), ("edges", [[0]]),
        ("name", 5),
    ]
    cases = []
    for key, value in raw:
        text = graph_text((key, value))
        if value in ("NaN", "Infinity"):
            text = text.replace(f'"{value}"', value)  # the bare token Python's json writes
        field = {"edge.0": "edge", "edge.1": "edge", "edge.2": "edge"}.get(
            key, key.partition(".")[2] or key)
        cases.append(Case(f"graph {key} = {value!r}", ("tune", "{dir}/g.json", *tune()[2:]),
                          ("g.json", field), (("g.json", text),)))
    for name, text in [("not JSON", "{"), ("a JSON list", "[]"), ("empty file", ""),
                       ("a JSON scalar", "3")]:
        cases.append(Case(f"graph: {name}", ("tune", "{dir}/g.json", *tune()[2:]),
                          ("g.json",), (("g.json", text),)))
    cases.append(Case("graph: no such file", ("tune", "{dir}/none.json", *tune()[2:]),
                      ("none.json",)))
    cases.append(Case("model: unknown name", ("tune", "nosuchmodel", *tune()[2:]),
                      ("nosuchmodel",)))
    node = {"cpuLatency": 1.0, "fpgaLatency": 1.0, "supportedOnFpga": 1}
    instance = {"maxSizePerFPGA": 10.0, "maxFPGAs": 1, "maxCPUs": 1,
                "nodes": [dict(node, id=0), dict(node, id=1)],
                "edges": [{"sourceId": 0, "destId": 0, "cost": 1.0}]}
    cases.append(Case("graph: an instance's self-edge (import-instance; once without its file)",
                      ("import-instance", "{dir}/inst.json", "--out", "{dir}"),
                      ("inst.json", "edges[0]", "to itself"),
                      (("inst.json", json.dumps(instance)),)))
    return cases + profiled_cases()


def profiled_cases() -> list[Case]:
    """Measured times, co-location groups and transfer costs of a profiled graph."""
    barred = dict.fromkeys(["cpu2", "accelerator1", "accelerator2"])
    raw = [
        ({"latency_us": {"cpu1": float("nan")}}, None, ("g.json", "latency_us['cpu1']")),
        ({"latency_us": {"cpu1": -1}}, None, ("g.json", "latency_us['cpu1']", ">= 0")),
        ({"latency_us": {"cpu1": "fast"}}, None, ("g.json", "latency_us['cpu1']")),
        ({"latency_us": [5]}, None, ("g.json", "latency_us must map")),
        ({"latency_us": {"gpu": 5}}, None, ("latency_us names 'gpu'", "soc")),
        ({"group": 3}, None, ("g.json", "group must be a string")),
        ({"latency_us": dict.fromkeys(["cpu1", "cpu2", "accelerator1", "accelerator2"])}, None,
         ("graph g", "op 'a'", "null on every unit of soc")),  # (was blamed on the profile)
        ({"group": "g", "latency_us": barred}, {"group": "g", "latency_us": {"cpu1": None}},
         ("co-location group 'g'", "soc")),
    ]
    cases = []
    for n, (first, second, says) in enumerate(raw):
        graph = json.loads(graph_text())
        graph["ops"][0].update(first)
        graph["ops"][1].update(second or {})
        text = json.dumps(graph)  # (Python writes a NaN as the bare token NaN)
        cases.append(Case(f"profiled graph {n}: {first}", ("tune", "{dir}/g.json", *tune()[2:]),
                          says, (("g.json", text),)))
    graph = json.loads(graph_text())
    graph["ops"][0]["latency_us"] = {"cpu1": 5.0}
    cases.append(Case("profiled graph on a mesh pipeline (its times would be ignored)",
                      ("pipeline", "{dir}/g.json", "--hw", "mesh", "--trials", "2", "--log",
                       "{dir}/pipe.jsonl"), ("graph g", "latency_us", "would ignore them"),
                      (("g.json", json.dumps(graph)),)))
    for cost in ('"x"', "-2", "NaN", "true"):
        text = graph_text().replace("[0, 1, 4096]", f"[0, 1, 4096, {cost}]")
        cases.append(Case(f"graph transfer_us = {cost}", ("tune", "{dir}/g.json", *tune()[2:]),
                          ("g.json", "transfer_us"), (("g.json", text),)))
    return cases


# -- logs --------------------------------------------------------------------------------------
def log_cases(record: str) -> list[Case]:
    rec = json.loads(record)
    variants = {
        "a JSON scalar": "3", "null": "null", "a list": "[]", "a string": '"x"',
        "not JSON": "{broken",
        "NaN latency": re.sub(r'"latency_s":[^,}]+', '"latency_s":NaN', record),
        "Infinity latency": re.sub(r'"latency_s":[^,}]+', '"latency_s":Infinity', record),
        "NaN busy time": re.sub(r'("unit_busy_s":\{"[^"]+":)[^,}]+', r"\1NaN", record),
        "huge peak": re.sub(r'("peak_bytes":\{"[^"]+":)[^,}]+', r"\g<1>1e999", record),
        "trial abc": json.dumps({**rec, "trial": "abc"}),
        "trial 1.5": json.dumps({**rec, "trial": 1.5}),
        "no placement": json.dumps({k: v for k, v in rec.items() if k != "placement"}),
        "schema 99": json.dumps({**rec, "schema": 99}),
        "negative latency": json.dumps({**rec, "result": {**rec["result"], "latency_s": -1}}),
        "placement a list": json.dumps({**rec, "placement": []}),
        "result null": json.dumps({**rec, "result": None}),
    }
    cases = []
    for name, line in variants.items():
        files = (("bad.jsonl", record + "\n" + line + "\n"),)
        cases.append(Case(f"log line: {name} (best)", ("best", "{dir}/bad.jsonl"),
                          ("bad.jsonl:2",), files))
        cases.append(Case(f"log line: {name} (report)",
                          ("report", "{dir}/bad.jsonl", "--out", "{dir}/rep"),
                          ("bad.jsonl:2",), files))
    ops = {op: {**where, "unit": "gpu9"} if isinstance(where, dict) else ["gpu9", where[1]]
           for op, where in rec["placement"]["ops"].items()}
    faster = {**rec["result"], "latency_s": rec["result"]["latency_s"] / 2}
    alien = json.dumps({**rec, "placement": {**rec["placement"], "ops": ops}, "result": faster})
    files = (("bad.jsonl", record + "\n" + alien + "\n"),)  # the best record is the alien one
    cases.append(Case("log line: a unit the profile lacks (best)", ("best", "{dir}/bad.jsonl"),
                      ("bad.jsonl", "unit 'gpu9'", "no such unit"), files))
    cases.append(Case("log line: a unit the profile lacks (report)",
                      ("report", "{dir}/bad.jsonl", "--out", "{dir}/rep"),
                      ("bad.jsonl:2", "unknown unit 'gpu9'"), files))
    cases.append(Case("log: no such file (best)", ("best", "{dir}/none.jsonl"), ("none.jsonl",)))
    cases.append(Case("log: empty (best)", ("best", "{dir}/empty.jsonl"), ("empty.jsonl",),
                      (("empty.jsonl", ""),)))
    return cases


# -- options -----------------------------------------------------------------------------------

def _with_target_key(text: str, unit: str, key: str, value) -> str:
    """A profile's TOML ``text`` with ``key = value`` added to ``unit``'s target."""
    doc = tomlkit.parse(text)
    doc["units"][unit]["target"][key] = value
    return tomlkit.dumps(doc)

def option_cases() -> list[Case]:
    bad = [
        ("--trials", "0"), ("--trials", "-1"), ("--trials", "abc"), ("--trials", "1.5"),
        ("--trials", "nan"), ("--seed", "-1"), ("--seed", "abc"), ("--seed", str(2**32)),
        ("--batch-size", "0"), ("--batch-size", "x"), ("--candidates", "0"),
        ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-1"), ("--timeout", "0"),
        ("--grace", "nan"), ("--grace", "0"), ("--sampler", "annealing"),
        ("--cost-model", "gpt"), ("--measurer", "oracle"), ("--save-model", "{dir}/m.pkl"),
        ("--warm-start", "{dir}/none.jsonl"), ("--descent", "1.5"), ("--descent", "-0.1"),
        ("--descent", "nan"), ("--descent", "half"), ("--max-latency", "0"),
        ("--max-latency", "nan"), ("--max-energy", "-1"), ("--max-energy", "inf"),
        ("--max-memory", "sram1"), ("--max-memory", "sram1=4 parsecs"),
        ("--max-memory", "sram1=-4MiB"), ("--objective", "peak_memory"),
        ("--objective", "latency,latency"), ("--objective", "latency,foo"),
        ("--objective", "latency,throughput"), ("--objective", "energy,"),
    ]
    cases = [Case(f"option {opt} {value}", tune(opt, value),
                  (opt.lstrip("-").split("-")[0],)) for opt, value in bad]
    cases += [
        Case("option --worker without --storage", tune("--worker"), ("worker",)),
        Case("option --objective of several with another sampler",
             tune("--objective", "latency,energy", "--sampler", "tpe"),
             ("latency,energy", "sampler='tpe'")),
        Case("option --objective of several with --save-model",
             tune("--objective", "latency,energy", "--save-model", "{dir}/m.json"),
             ("latency,energy", "save_model=")),
        Case("option --objective throughput beside another on a mesh",
             tune("--hw", "mesh", "--objective", "throughput,latency"),
             ("objective", "searched alone")),
        Case("option --max-memory of a scope the profile lacks", tune("--max-memory", "l3=1MiB"),
             ("--max-memory", "no scope 'l3'", "sram1")),
        Case("option --rpc-tracker nohostport", tune("--measurer", "rpc", "--rpc-tracker",
                                                     "nohostport", "--rpc-key", "k"),
             ("rpc-tracker",)),
        Case("option --measurer rpc without tracker", tune("--measurer", "rpc"),
             ("rpc-tracker",)),
        Case("option --hw empty", tune("--hw", ""), ("no such profile",)),
        Case("option calibrate --unit of no unit", ("calibrate", "--hw", "host", "--unit",
                                                    "gpu9", "-o", "{dir}/c.toml"),
             ("--unit 'gpu9'", "has no such unit")),
        Case("option --save-model in no directory (before the job: it used to fail "
             "after it, with XGBoost's stack trace)", tune("--save-model",
                                                          "{dir}/missing/m.json"),
             ("save_model", "missing/m.json", "no directory")),
        Case("option --log in no directory", ("tune", "seed_te", "--trials", "2", "--log",
                                              "{dir}/missing/new.jsonl", "--no-progress"),
             ("missing/new.jsonl", "No such file or directory")),
    ]
    for argv in (("pipeline", "seed_te", "--hw", "mesh", "--trials", "2"),
                 ("tune", "seed_te", "--hw", "mesh", "--objective", "throughput", "--trials",
                  "2", "--no-progress")):  # a pipeline search appended to any log (issue 31)
        cases.append(Case(f"option {argv[0]} --log of another job (a placement search's)",
                          (*argv, "--log", "{dir}/log.jsonl"),
                          ("--log", "log.jsonl", "another job", "seed_te on soc (simulator)")))
    host = bundled_profiles()["host"].read_text()
    cases.append(Case("option --measurer local with a target key TVM lacks",
                      tune("--hw", "{dir}/hw.toml", "--measurer", "local"),
                      ("hw.toml", "unit 'cpu'", "invalid TVM target", "'bogus'"),
                      (("hw.toml", _with_target_key(host, "cpu", "bogus", 1)),)))
    if Path("/dev/full").exists():  # a device every write to fails with ENOSPC (issue 31)
        cases.append(Case("option --log on a full disk", ("tune", "seed_te", "--trials", "2",
                                                          "--log", "/dev/full",
                                                          "--no-progress"),
                          ("/dev/full", "No space left on device")))
    return cases


def storage_cases() -> list[Case]:
    urls = [("mysql2://u@h/db", "unknown scheme"), ("tune.db", "no scheme"),
            ("sqlite:///{dir}/missing/t.db", "does not exist"),
            ("sqlite:///{dir}/log.jsonl", "not an SQLite database"),
            ("journal:{dir}/missing/j.log", "does not exist"),
            ("journal:{dir}/log.jsonl", "not an Optuna journal file"),
            ("postgresql+nodriver://u@127.0.0.1/db", "driver nodriver"),
            ("postgresql://u:secret@127.0.0.1:1/db", "cannot open it")]
    return [Case(f"storage {url}", tune("--storage", url), ("--storage", says))
            for url, says in urls]


# -- the table ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def a_record(tmp_path_factory) -> str:
    """A log line of another job (seed_te on soc)."""
    log = tmp_path_factory.mktemp("rec") / "log.jsonl"
    assert main(["tune", "seed_te", "--trials", "1", "--log", str(log), "--no-progress"]) == 0
    return log.read_text().splitlines()[0]


def all_cases(record: str) -> list[Case]:
    return [*profile_cases(), *graph_cases(), *log_cases(record), *option_cases(),
            *storage_cases()]


def test_the_table_has_at_least_150_cases(a_record):
    cases = all_cases(a_record)
    assert len(cases) >= 150 and len({c.name for c in cases}) == len(cases)


def run_case(case: Case, tmp: Path, record: str, capsys) -> tuple[int, str, str]:
    for name, text in case.files:
        (tmp / name).write_text(text)
    (tmp / "log.jsonl").write_text(record + "\n")
    argv = [a.replace("{dir}", str(tmp)) for a in case.argv]
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    except Exception as exc:  # noqa: BLE001 - what the command would show as a traceback
        out, err = capsys.readouterr()
        return "escaped", out, f"Traceback: {type(exc).__name__}: {exc}"
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("group", ["profile", "graph", "log", "option", "storage"])
def test_every_bad_input_is_one_line_exit_2_and_the_log_untouched(group, a_record, tmp_path,
                                                                  capsys):
    failures = []
    for k, case in enumerate(c for c in all_cases(a_record) if c.name.startswith(
            {"graph": ("graph", "model"), "log": ("log",)}.get(group, (group, "mesh")))):
        tmp = tmp_path / f"c{k}"
        tmp.mkdir()
        rc, out, err = run_case(case, tmp, a_record, capsys)
        lines = err.strip().splitlines()
        problems = [
            rc != 2 and f"exit {rc}",
            len(lines) != 1 and f"{len(lines)} lines",
            "Traceback" in out + err and "a traceback",
            *(f"does not say {s!r}" for s in case.says if s not in err),
            len(err) > 500 and "over 500 characters",
            (tmp / "log.jsonl").read_text() != a_record + "\n" and "the log changed",
        ]
        problems = [p for p in problems if p]
        if problems:
            failures.append(f"{case.name}: {', '.join(problems)}: {err.strip()[:200]!r}")
    assert not failures, f"{len(failures)} bad:\n" + "\n".join(failures)


def test_no_case_is_accepted_by_accident(a_record):
    """Each profile case really changes the profile (a typo in the table would test nothing)."""
    for case in profile_cases():
        for _, text in case.files:
            assert text != SOC and text != MESH or case.name.startswith("profile: "), case.name
    assert re.search(r"(?m)^rows = 4$", MESH) and re.search(r"(?m)^cols = 4$", MESH)
    for case in log_cases(a_record):
        for _, text in case.files:
            assert text.splitlines()[1:] != [a_record], case.name
