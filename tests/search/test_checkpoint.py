"""The checkpoint beside a log: packed arrays round-trip; a round's line holds only the items
an appended list gained since the line before; a torn last line is left out; a checkpoint
that is missing, corrupt or of another job is ignored (the resume is then safe, not exact)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import TuningLog
from autoplace.search import TuneConfig, tune
from autoplace.search.checkpoint import (
    REWRITE_FLOOR,
    Appended,
    Checkpoint,
    CheckpointWriter,
    checkpoint_path,
    pack,
    read_checkpoint,
    unpack,
    write_checkpoint,
)
from autoplace.space import SearchSpace

JOB = dict(run="r1", sampler="evolve", seed=5, batch_size=8, objective="latency")


@pytest.mark.parametrize("top,dtype", [(0, "u1"), (255, "u1"), (256, "u2"), (70_000, "u4")])
def test_arrays_round_trip_in_the_narrowest_type(top, dtype):
    a = np.array([[0, top, 3], [top, 1, 0]], dtype=np.int64)
    d = pack(a)
    assert d["dtype"] == dtype and d["shape"] == [2, 3]
    back = unpack(d)
    assert back.dtype == np.int64 and (back == a).all()
    assert unpack(pack(np.zeros((0, 4), dtype=np.int64))).shape == (0, 4)
    with pytest.raises(ValueError, match="non-negative"):
        pack(np.array([-1]))


def test_a_checkpoint_is_read_back_only_for_its_own_job(tmp_path):
    path = checkpoint_path(tmp_path / "tune.jsonl")
    assert path.name == "tune.state.jsonl"
    assert read_checkpoint(path, **JOB) is None  # none yet
    cp = Checkpoint(**JOB, records=12, strategy={"rng": {"state": 2**100 + 7}})
    write_checkpoint(path, cp)
    assert read_checkpoint(path, **JOB) == cp  # big integers survive
    for key, other in [("run", "r2"), ("sampler", "tpe"), ("seed", 6), ("batch_size", 4),
                       ("objective", "throughput")]:
        assert read_checkpoint(path, **{**JOB, key: other}) is None
    assert not path.with_name(path.name + ".tmp").exists()  # replaced, not left beside


HEAD = (b'{"version":2,"run":"r1","sampler":"evolve","seed":5,"batch_size":8,'
        b'"objective":"latency"}\n')


@pytest.mark.parametrize("text", [
    b"", b"{", b'{"version": 1}', b'{"version": 99}', b"[1]", HEAD,  # no round
    b'{"version":1,"run":"r1","sampler":"evolve","seed":5,"batch_size":8,"records":12,'
    b'"strategy":{}}',  # one object, as version 1 wrote it
    HEAD + b'{"records":"12","strategy":{}}\n',
    HEAD + b'{"records":12,"strategy":{}}\n{"rec\n{"records":13,"strategy":{}}\n',  # torn mid-way
    HEAD + b'{"records":12,"strategy":{"k":{"append_at":1,"items":["a"]}}}\n',  # after a gap
])
def test_a_corrupt_checkpoint_is_ignored(tmp_path, text):
    path = tmp_path / "t.state.jsonl"
    path.write_bytes(text)
    assert read_checkpoint(path, **JOB) is None


def test_a_round_appends_only_the_items_added_since_the_round_before(tmp_path):
    """The file grows by a line per round holding the new keys (each key is in the file
    once), and reads back as the last round's state with every key."""
    path, keys = checkpoint_path(tmp_path / "t.jsonl"), Appended()
    writer = CheckpointWriter(path, **JOB)
    before = b""
    for r in range(5):
        keys.extend(f"{r:02d}{k:062x}" for k in range(100 * r, 100 * r + 100))
        writer.write(8 * r, {"proposer": {"infeasible": keys, "rows": r}, "pending": r < 3})
        now = path.read_bytes()
        assert now.startswith(before) and now.count(b"\n") == r + 2  # a line appended
        assert now[len(before):].count(b'"01') == (100 if r == 1 else 0)  # only the new keys
        before = now
    cp = read_checkpoint(path, **JOB)
    assert cp.records == 32 and cp.strategy == {
        "proposer": {"infeasible": list(keys), "rows": 4}, "pending": False}
    path.write_bytes(before + b'{"records": 40, "strategy": {"proposer": {"infei')  # torn
    assert read_checkpoint(path, **JOB) == cp  # the round before it
    writer = CheckpointWriter(path, **JOB)  # a resumed job starts the file afresh
    writer.write(40, {"proposer": {"infeasible": keys, "rows": 5}, "pending": False})
    assert path.read_bytes().count(b"\n") == 2
    assert read_checkpoint(path, **JOB).strategy["proposer"] == {"infeasible": list(keys),
                                                                 "rows": 5}


def test_a_writer_starts_afresh_once_its_appended_lines_outgrow_the_file(tmp_path):
    """Rewriting is amortised: bytes written stay within a small factor of the bytes of
    the rounds' lines, however many rounds there are."""
    path, keys = tmp_path / "t.state.jsonl", Appended()
    writer, restarts = CheckpointWriter(path, **JOB), 0
    big = "x" * (REWRITE_FLOOR // 8)  # a state that changes wholly every round
    for r in range(40):
        keys.append(f"{r:064x}")
        size = path.stat().st_size if path.exists() else 0
        writer.write(r, {"keys": keys, "population": big + str(r)})
        restarts += 1 if path.stat().st_size < size else 0
    assert 2 <= restarts <= 6  # every ~8-9 rounds, not every round
    assert read_checkpoint(path, **JOB).strategy == {"keys": list(keys),
                                                     "population": big + "39"}


def test_a_tuning_job_appends_each_key_known_not_to_fit_once(tmp_path):
    """In a real job (squeezenet on the bundled mesh, where many candidates do not fit),
    every round appends to the checkpoint, and the keys the strategy found not to fit are
    written once each over the whole job, not again every round. (Evolution ranks what does
    not fit last, so the picks found not to fit are explorations: ``explore=1.0`` draws
    every pick at random from the ranked pool.)"""
    space = SearchSpace(load_graph("squeezenet"), load_profile("mesh"))
    path, seen = checkpoint_path(tmp_path / "t.jsonl"), []

    class Watched(TuningLog):
        def append(self, record):
            super().append(record)
            seen.append(path.read_bytes() if path.exists() else b"")

    with Watched(tmp_path / "t.jsonl") as log:
        tune(space, Simulator(space), log, TuneConfig(trials=80, seed=5, batch_size=4,
                                                      explore=1.0))
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:]))
    lines = [json.loads(x) for x in path.read_bytes().splitlines()[1:]]
    found = [x["strategy"]["proposer"]["infeasible"]["items"] for x in lines]
    keys = read_checkpoint(path).strategy["proposer"]["infeasible"]
    assert len(lines) > 5 and sum(1 for new in found if new) >= 3  # found in several rounds
    assert [k for new in found for k in new] == keys
