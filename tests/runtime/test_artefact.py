"""``autoplace compile`` writes a placed build a board runs; ``run`` loads only what it should.

Fault injection on the artefact: a library named outside its directory (``..``, absolute,
a symbolic link), another version, a malformed entry, a truncated or replaced file: each is
one line and exit 2, refused before the library is mapped.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from factories import cli, one_line_error

from autoplace.hardware.load import load_profile
from autoplace.models import load_graph
from autoplace.records.tuning_log import best, read


@pytest.fixture(scope="module")
def built(tmp_path_factory, kernel_cache):
    """seed_te tuned on soc (simulated), its best placement compiled into an artefact."""
    tmp = tmp_path_factory.mktemp("artefact")
    log, out = tmp / "tune.jsonl", tmp / "build"
    assert cli("tune", "seed_te", "--hw", "soc", "--trials", 8, "--log", log,
               "--no-progress").returncode == 0
    proc = cli("compile", "seed_te", "--hw", "soc", "--log", log, "-o", out,
               "--cache-dir", kernel_cache)
    assert proc.returncode == 0, proc.stderr
    return log, out, proc


def test_compile_writes_what_run_runs(built, tmp_path):
    log, out, proc = built
    rec = best(read(log), graph_fp=load_graph("seed_te").fingerprint,
               profile_hash=load_profile("soc").hash)
    m = json.loads((out / "manifest.json").read_text())
    assert m["placement"] == rec.placement.to_dict() and f"trial {rec.trial} " in proc.stdout
    assert set(m["libraries"]) == rec.placement.units_used()
    work = m["schedule"]["work"]
    assert sum(w["kind"] == "op" for w in work) == len(m["program"]["kernels"])
    assert all(w["start_s"] <= w["end_s"] for w in work)
    ran = cli("run", out, "--repeat", 2, "--check")
    assert ran.returncode == 0, ran.stderr
    assert "over 2 repeats" in ran.stdout and "outputs (64, 32)" in ran.stdout
    assert "check: all 1 outputs equal the unplaced seed_te's" in ran.stdout
    moved = tmp_path / "elsewhere"
    shutil.copytree(out, moved)  # the directory is the artefact: it runs wherever it goes
    assert cli("run", moved / "manifest.json", "--repeat", 1).returncode == 0


def _tamper(out, tmp_path, how: str):
    """A copy of the artefact, changed as ``how`` says; the words its refusal must say."""
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    m = json.loads((bad / "manifest.json").read_text())
    unit = sorted(m["libraries"])[0]
    lib = m["libraries"][unit]
    outside = tmp_path / "evil.so"
    shutil.copyfile(bad / lib["file"], outside)
    words = {
        "parent": ("../evil.so", "is not a path inside"),
        "absolute": (str(outside), "is not a path inside"),
        "symlink": ("link.so", "leads outside"),
    }
    if how in words:
        if how == "symlink":
            os.symlink(outside, bad / "link.so")
        lib["file"], said = words[how]
    elif how == "version":
        m["version"], said = 99, "version: this autoplace reads 1, got 99"
    elif how == "graph":
        m["graph"], said = 5, "graph: must be dict, got 5"
    elif how == "truncated":
        path = bad / lib["file"]
        path.write_bytes(path.read_bytes()[:4096])
        said = "SHA-256 differs"
    elif how == "packs":  # the table of the packed weights' shapes beside the library
        table = bad / lib["packs"]["file"]
        table.write_text(table.read_text() + " ")
        said = f"libraries.{unit}.packs"
    elif how == "weights":
        (bad / m["weights"]["file"]).write_bytes(b"\0" * 64)
        said = "is not the file the artefact was built with"
    (bad / "manifest.json").write_text(json.dumps(m))
    return bad, said


@pytest.mark.parametrize("how", ["parent", "absolute", "symlink", "version", "graph",
                                 "truncated", "packs", "weights"])
def test_a_tampered_artefact_is_refused_in_one_line(built, tmp_path, how):
    _, out, _ = built
    bad, said = _tamper(out, tmp_path, how)
    one_line_error(cli("run", bad), said)


def test_run_bounds_the_inferences_it_streams(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "autoplace-pipeline"}))
    one_line_error(cli("run", tmp_path, "--inferences", 1_000_000_000), "at most 10,000")
