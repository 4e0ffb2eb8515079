"""A placement run by the runtime computes what the unplaced model computes.

Every bundled model, with random weights (the bundled CNNs' weights make every output the
same): the ONNX ones against ONNX Runtime (tests/references.py), the others against TVM's
default build; on random feasible placements of the ``soc`` profile:
ops on all four units, activations in the SRAMs, copies sync and async, weights resident or
streamed.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from references import Reference
from runtime_factories import inputs_of, randomized, unplaced_outputs

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import BUNDLED, load_module
from autoplace.runtime import PoolError, Runtime
from autoplace.space import SearchSpace


def mixed(space: SearchSpace, rng: np.random.Generator, share: float = 0.4):
    """16 genomes: the host unit's placement with a random ``share`` of its ops moved to
    random choices (uniformly random ones nearly all overflow the SRAMs)."""
    base, _ = space.encode([space.uniform(space.profile.host)])
    choice, mode = space.random_genomes(16, rng)
    keep = rng.random(choice.shape) > share
    choice[keep] = np.broadcast_to(base, choice.shape)[keep]
    return choice, mode


def feasible(rt: Runtime, n: int, seed: int) -> list:
    """``n`` random placements the simulator accepts and the runtime's pools hold, each
    assembled (a pool a little over the simulated peak refuses a few in a hundred). The share
    of ops moved halves after each 16 of which none fits (on resnet50 fewer than one in 270
    with 40% moved fits, one in 8 with 10%)."""
    space = rt.space
    sim, rng, out, share = Simulator(space), np.random.default_rng(seed), [], 0.4
    while len(out) < n:
        found = len(out)
        for p in space.decode_rows(*mixed(space, rng, share)):
            if len(out) < n and sim.simulate(p, timeline=False).ok:
                try:
                    out.append((p, rt.assemble(p)))
                except PoolError:
                    pass
        share = share if len(out) > found else max(share / 2, 0.02)
    return out


def one_target(profile):
    """``profile`` with every unit built for its host unit's target: one kernel library
    (``soc``'s accelerators have their own ``mcpu``: a second library of every kernel they
    accept, half of what checking a big model cost)."""
    host = profile.unit(profile.host).target
    return dataclasses.replace(profile, units=tuple(
        dataclasses.replace(u, target=host) for u in profile.units))


def check_model(name: str, kernel_cache, placements: int, workdir, *,
                profile=None) -> None:
    """Random feasible placements of ``name`` (an ONNX model: with random weights, against
    ONNX Runtime, tests/references.py; else its weights randomised, against TVM's default
    build) run by the runtime compute the unplaced outputs, on ``profile`` (``soc`` by
    default)."""
    if BUNDLED[name] is not None:
        ref = Reference(name, workdir)
        mod, graph, unplaced = ref.mod, ref.graph, ref.run
    else:
        mod, graph = load_module(name)
        mod = randomized(mod)
        unplaced = functools.partial(unplaced_outputs, mod)
    profile = profile or load_profile("soc")
    space = SearchSpace(graph, profile)
    with Runtime(mod, graph, profile, cache_dir=kernel_cache, space=space) as rt:
        x = inputs_of(rt.program)
        want = unplaced(x)
        chosen = feasible(rt, placements, seed=len(name))
        units = {u for p, _ in chosen for u in p.units_used()}
        for _, assembled in chosen:
            got = rt.run(assembled, x, timeout=600)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert len(units) > 1  # the placements spread over units


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_random_placements_compute_the_unplaced_outputs(name, kernel_cache, tmp_path):
    check_model(name, kernel_cache, placements=3, workdir=tmp_path)


@pytest.mark.slow
# (bert_base's unscheduled kernels take a minute here: its graph and search are tested)
@pytest.mark.parametrize("name", sorted(n for n in BUNDLED if n not in
                                        ("squeezenet", "inception_v1", "bert_base")))
def test_every_bundled_model_computes_the_unplaced_outputs(name, kernel_cache, tmp_path):
    check_model(name, kernel_cache, placements=1, workdir=tmp_path,
                profile=one_target(load_profile("soc")))
