"""The checkpoint beside a log: packed arrays round-trip, and a checkpoint that is missing,
corrupt or of another job is ignored (the resume is then safe, not exact)."""

from __future__ import annotations

import numpy as np
import pytest

from autoplace.search.checkpoint import (
    Checkpoint,
    checkpoint_path,
    pack,
    read_checkpoint,
    unpack,
    write_checkpoint,
)

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
    assert path.name == "tune.state.json"
    assert read_checkpoint(path, **JOB) is None  # none yet
    cp = Checkpoint(**JOB, records=12, strategy={"rng": {"state": 2**100 + 7}})
    write_checkpoint(path, cp)
    assert read_checkpoint(path, **JOB) == cp  # big integers survive
    for key, other in [("run", "r2"), ("sampler", "tpe"), ("seed", 6), ("batch_size", 4),
                       ("objective", "throughput")]:
        assert read_checkpoint(path, **{**JOB, key: other}) is None
    assert not path.with_name(path.name + ".tmp").exists()  # replaced, not left beside


@pytest.mark.parametrize("text", [b"", b"{", b'{"version": 1}', b'{"version": 99}', b"[1]",
                                  b'{"version":1,"run":"r1","sampler":"evolve","seed":5,'
                                  b'"batch_size":8,"records":"12","strategy":{}}'])
def test_a_corrupt_checkpoint_is_ignored(tmp_path, text):
    path = tmp_path / "t.state.json"
    path.write_bytes(text)
    assert read_checkpoint(path, **JOB) is None
