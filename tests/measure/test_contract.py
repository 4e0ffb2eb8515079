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

    #: the error a candidate the measurer cannot run is, and whether it keeps its latency
    bad_error, bad_keeps_latency = ErrorKind.INVALID, False

    def space(self) -> SearchSpace:
        return SearchSpace(self.graph, self.profile)

    def candidates(self, space) -> list:
        """Three valid candidates, slowest first (cpu only: 4 ms; Y on acc saves most of
        Y's 2 ms; all on acc)."""
        return [space.uniform("cpu"), space.from_user({"Y": "acc"}), space.uniform("acc")]

    def bad(self, space):
        """A candidate the measurer cannot run (Y in a scope cpu cannot reach)."""
        good = space.uniform("cpu")
        return type(good)(ops={**good.ops, "Y": ("cpu", "sram")}, copies={})

    def encoded(self, space, batch):
        choice, mode = space.encode(batch)
        return choice, space.normalize(choice, mode)

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


class _StreamedPlans(_Factory):
    """The stream measurer of mesh pipeline plans (a plan space's measurer): squeezenet on
    the bundled 4x4 mesh, the DP's plans on 4, 8 and 16 PEs."""

    models_profile = False  # (its latencies do not order as the chain's)
    bad_error, bad_keeps_latency = ErrorKind.OUT_OF_MEMORY, True

    def __init__(self):
        self.closers = []

    def space(self):
        from autoplace.hardware.load import load_profile
        from autoplace.models import load_graph
        from autoplace.search.mesh import plan_space

        return plan_space(load_graph("squeezenet"), load_profile("mesh"))

    def make(self) -> Measurer:
        from autoplace.pipeline.stream_measurer import StreamMeasurer

        return StreamMeasurer(self.space().costs)

    def candidates(self, space) -> list:
        from autoplace.pipeline import best_pipeline

        return [best_pipeline(space.costs, pes) for pes in (4, 8, 16)]

    def bad(self, space):
        from autoplace.pipeline import PipelinePlan, Stage

        return PipelinePlan(stages=(Stage(0, space.costs.n, 1),))  # every weight on one PE

    def encoded(self, space, batch):
        return space.encode(batch)


FACTORIES = {"simulator": _Simulator, "rpc-sim": _ThroughRPC, "local": _Local,
             "rpc": _RealThroughRPC, "rpc-vm": _VMThroughRPC, "stream-plans": _StreamedPlans}


# One measurer of each kind serves every test of the contract (a tracker, a server and
# kernels are seconds to set up); the tests run in file order on it, so each also checks
# that the measurer still honours the contract after what the tests before it measured
# (a bad candidate among them).
@pytest.fixture(scope="module", params=sorted(FACTORIES))
def factory(request):
    f = FACTORIES[request.param]()
    yield f
    f.close()


@pytest.fixture(scope="module")
def measurer(factory) -> Measurer:
    m = factory.make()
    yield m
    m.close()


@pytest.fixture(scope="module")
def space(factory):
    return factory.space()


def test_results_come_back_in_order(factory, measurer, space):
    results = measurer.measure(factory.candidates(space))
    assert len(results) == 3 and all(isinstance(r, MeasureResult) for r in results)
    assert all(r.ok and r.latency_s > 0 for r in results)
    if factory.models_profile:  # slowest first, as the factory says
        assert results[0].latency_s > results[1].latency_s > results[2].latency_s


def test_a_bad_candidate_fails_alone(factory, measurer, space):
    good, _, _ = factory.candidates(space)
    results = measurer.measure([good, factory.bad(space), good])
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error is factory.bad_error
    assert (results[1].latency_s is not None) == factory.bad_keeps_latency
    assert results[0].latency_s == results[2].latency_s


def test_empty_batch(measurer):
    assert measurer.measure([]) == []


def test_measurer_has_a_log_name(measurer):
    assert isinstance(measurer.name, str) and measurer.name != "measurer"


def test_measure_encoded_equals_measure(factory, measurer, space):
    """The tuning loop's path (genome rows and candidates) gives what ``measure`` gives."""
    batch = factory.candidates(space)
    choice, mode = factory.encoded(space, batch)
    encoded, plain = measurer.measure_encoded(choice, mode, batch), measurer.measure(batch)
    assert [(r.ok, r.error) for r in encoded] == [(r.ok, r.error) for r in plain]
    if isinstance(measurer, Simulator):  # deterministic: equal field by field
        assert encoded == plain
    assert measurer.measure_encoded(choice[:0], mode[:0], []) == []
