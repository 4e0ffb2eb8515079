"""The Measurer contract, run against every implementation.

Same order and length as the input; failures are values; an empty batch is fine.
"""

from __future__ import annotations

import pytest
from factories import chain_graph, tiny_profile

from autoplace.measure import ErrorKind, Measurer, MeasureResult
from autoplace.measure.simulator import Simulator
from autoplace.space import SearchSpace


class _ThroughRPC(Measurer):
    """The RPC measurer in simulate mode, with its own tracker and server on 127.0.0.1."""

    name = "rpc-sim"

    def __init__(self, graph, profile):
        from autoplace.measure.rpc import RPCMeasurer
        from autoplace.measure.server import LocalCluster

        self.cluster = LocalCluster(profile, "contract", servers=1)
        self.inner = RPCMeasurer(None, graph, profile, tracker=self.cluster.tracker,
                                 key="contract", mode="simulate", timeout=30)

    def measure(self, placements):
        return self.inner.measure(placements)

    def close(self):
        self.inner.close()
        self.cluster.close()


FACTORIES = {"simulator": lambda g, p: Simulator(g, p), "rpc-sim": _ThroughRPC}


@pytest.fixture(params=sorted(FACTORIES))
def measurer(request) -> Measurer:
    m = FACTORIES[request.param](chain_graph(), tiny_profile())
    yield m
    m.close()


@pytest.fixture
def space():
    return SearchSpace(chain_graph(), tiny_profile())


def test_results_come_back_in_order(measurer, space):
    batch = [space.uniform("cpu"), space.from_user({"Y": "acc"}), space.uniform("acc")]
    results = measurer.measure(batch)
    assert len(results) == 3 and all(isinstance(r, MeasureResult) for r in results)
    assert all(r.ok for r in results)
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
