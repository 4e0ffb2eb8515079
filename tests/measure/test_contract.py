"""The Measurer contract, run against every implementation.

Same order and length as the input; failures are values; an empty batch is fine.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from factories import chain_graph, tiny_profile

from autoplace.measure import ErrorKind, Measurer, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


def te_chain():
    """The chain graph as real TVM kernels: X = A * 2, Y = exp(X), Z = Y + 1 (16 x 16)."""
    from tvm import te

    from autoplace.frontend.te import from_te

    a = te.placeholder((16, 16), "float32", name="A")
    x = te.compute(a.shape, lambda i, j: a[i, j] * 2.0, name="X")
    y = te.compute(a.shape, lambda i, j: te.exp(x[i, j]), name="Y")
    z = te.compute(a.shape, lambda i, j: y[i, j] + 1.0, name="Z")
    return from_te([z], [a], "chain")


class _Factory:
    """Makes one measurer with its space; ``models_profile`` when its latencies are the
    profile's own numbers (so the hand-worked ordering of the chain must hold)."""

    models_profile = True

    def __init__(self):
        self.graph, self.profile, self.closers = chain_graph(), tiny_profile(), []

    def space(self) -> SearchSpace:
        return SearchSpace(self.graph, self.profile)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


class _Simulator(_Factory):
    def make(self) -> Measurer:
        return Simulator(SearchSpace(self.graph, self.profile))


class _ThroughRPC(_Factory):
    """The RPC measurer in simulate mode, with its own tracker and server on 127.0.0.1."""

    def make(self) -> Measurer:
        from autoplace.measure.rpc import RPCMeasurer
        from autoplace.measure.server import LocalCluster

        cluster = LocalCluster(self.profile, "contract", servers=1)
        self.closers.append(cluster.close)
        return RPCMeasurer(None, self.graph, self.profile, tracker=cluster.tracker,
                           key="contract", mode="simulate", timeout=30)


class _Real(_Factory):
    """Builds the TE chain; timings are this host's, not the profile's."""

    models_profile = False

    def __init__(self):
        super().__init__()
        from autoplace.deploy.run import TimeSettings

        self.mod, self.graph = te_chain()
        self.fast = TimeSettings(number=1, repeat=3, warmup=1, min_repeat_ms=0)
        self.cache_dir = tempfile.mkdtemp(prefix="autoplace-kernels-")
        self.closers.append(lambda: shutil.rmtree(self.cache_dir, ignore_errors=True))


class _Local(_Real):
    def make(self) -> Measurer:
        from autoplace.measure.local import LocalMeasurer

        return LocalMeasurer(self.mod, self.graph, self.profile, settings=self.fast,
                             cache_dir=self.cache_dir)


class _RealThroughRPC(_Real):
    """Kernels compiled here once, placements run by the runtime on a server of a tracker
    on 127.0.0.1 (``autoplace serve``)."""

    mode = "runtime"

    def make(self) -> Measurer:
        from autoplace.measure.rpc import RPCMeasurer
        from autoplace.measure.server import LocalCluster

        cluster = LocalCluster(self.profile, f"contract-{self.mode}", servers=1)
        self.closers.append(cluster.close)
        return RPCMeasurer(self.mod, self.graph, self.profile, tracker=cluster.tracker,
                           key=f"contract-{self.mode}", settings=self.fast, build_workers=1,
                           timeout=60, mode=self.mode, cache_dir=self.cache_dir)


class _VMThroughRPC(_RealThroughRPC):
    """Each candidate built here into a Relax VM library, run on the server."""

    mode = "run"


FACTORIES = {"simulator": _Simulator, "rpc-sim": _ThroughRPC, "local": _Local,
             "rpc": _RealThroughRPC, "rpc-vm": _VMThroughRPC}


@pytest.fixture(params=sorted(FACTORIES))
def factory(request):
    f = FACTORIES[request.param]()
    yield f
    f.close()


@pytest.fixture
def measurer(factory) -> Measurer:
    m = factory.make()
    yield m
    m.close()


@pytest.fixture
def space(factory):
    return factory.space()


def test_results_come_back_in_order(factory, measurer, space):
    batch = [space.uniform("cpu"), space.from_user({"Y": "acc"}), space.uniform("acc")]
    results = measurer.measure(batch)
    assert len(results) == 3 and all(isinstance(r, MeasureResult) for r in results)
    assert all(r.ok and r.latency_s > 0 for r in results)
    if factory.models_profile:
        # cpu only is slowest: 4 ms; Y on acc saves most of Y's 2 ms.
        assert results[0].latency_s > results[1].latency_s > results[2].latency_s


def test_a_bad_candidate_fails_alone(measurer, space):
    good = space.uniform("cpu")
    bad = type(good)(ops={**good.ops, "Y": ("cpu", "sram")}, copies={})
    results = measurer.measure([good, bad, good])
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error is ErrorKind.INVALID and results[1].latency_s is None
    assert results[0].latency_s == results[2].latency_s


def test_empty_batch(measurer):
    assert measurer.measure([]) == []


def test_measurer_has_a_log_name(measurer):
    assert isinstance(measurer.name, str) and measurer.name != "measurer"


def test_measure_encoded_equals_measure(factory, measurer, space):
    """The tuning loop's path (genome rows and placements) gives what ``measure`` gives."""
    import numpy as np

    batch = [space.uniform("cpu"), space.from_user({"Y": "acc"}), space.uniform("acc")]
    choice, mode = space.encode(batch)
    mode = space.normalize(choice, mode)
    encoded, plain = measurer.measure_encoded(choice, mode, batch), measurer.measure(batch)
    assert [(r.ok, r.error) for r in encoded] == [(r.ok, r.error) for r in plain]
    if isinstance(measurer, Simulator):  # deterministic: equal field by field
        assert encoded == plain
    assert measurer.measure_encoded(np.zeros((0, space.n_ops), dtype=np.int64),
                                    np.zeros((0, space.n_edges), dtype=np.int64), []) == []
