"""Plots: the figures hold the lanes, bars, hatches and lines a known timeline implies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from factories import chain_graph, fork_graph, tiny_profile
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from autoplace.hardware.load import load_profile
from autoplace.measure.simulator import Simulator
from autoplace.models import load_graph
from autoplace.records.tuning_log import load
from autoplace.reports import analysis, plots
from autoplace.space import SearchSpace

GOLDEN = Path(__file__).parents[1] / "data" / "analysis_fork.jsonl"


def simulate(graph, profile, spec):
    space = SearchSpace(graph, profile)
    return Simulator(space, timeline=True).simulate(space.from_user(spec))


def bars(fig: Figure) -> list[Rectangle]:
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


def lane_labels(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def test_gantt_of_the_worked_example_has_lanes_bars_hatches_and_the_critical_path():
    g = chain_graph()
    res = simulate(g, tiny_profile(), {"Y": {"unit": "acc", "scope": "sram"}})
    fig = plots.gantt(g, res.timeline, units=["cpu", "acc"])
    assert lane_labels(fig) == ["cpu", "acc", "dma0"]
    rects = bars(fig)
    filled = [r for r in rects if r.get_fill()]
    assert len(filled) == 5  # X, Y, Z and two async copies
    hatched = [r for r in filled if r.get_hatch() == plots.ASYNC_HATCH]
    assert len(hatched) == 2 and {r.get_y() + r.get_height() / 2 for r in hatched} == {2.0}
    # every op elementwise: one colour; bars placed at their start in ms
    ops = [r for r in filled if not r.get_hatch()]
    assert {to_hex(r.get_facecolor()) for r in ops} == {plots.KIND_COLOURS["elementwise"]}
    assert sorted(round(r.get_x(), 6) for r in ops) == [0.0, 1.002, 1.205]
    # a chain: all five events are on the critical path, so none is outlined; the title
    # says so
    assert not [r for r in rects if not r.get_fill()]
    assert "critical path: 5 of 5 events, not outlined" in fig.axes[0].get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["elementwise", "async copy (DMA)"]


def test_gantt_outlines_a_critical_path_that_leaves_events_out():
    g = fork_graph()
    res = simulate(g, tiny_profile(), {"ops": {"L": {"unit": "acc", "scope": "sram"}}})
    fig = plots.gantt(g, res.timeline, units=["cpu", "acc"])
    path = analysis.critical_path(g, res.timeline)
    assert 0 < len(path) < len(res.timeline)
    outlines = [r for r in bars(fig) if not r.get_fill()]
    assert len(outlines) == len(path)
    assert {to_hex(r.get_edgecolor()) for r in outlines} == {plots.CRITICAL_COLOUR}
    assert sorted(round(r.get_x(), 9) for r in outlines) == \
        sorted(round(e.start * 1e3, 9) for e in path)
    assert "critical path" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_gantt_draws_sync_copies_solid_on_the_host_lane():
    g = fork_graph()
    res = simulate(g, tiny_profile(), {"ops": {"L": {"unit": "acc", "scope": "sram"}},
                                       "copies": {"S->L": "sync", "L->J": "sync"}})
    fig = plots.gantt(g, res.timeline, units=["cpu", "acc"], critical=False)
    assert lane_labels(fig) == ["cpu", "acc"]  # no DMA engine used
    sync = [r for r in bars(fig) if to_hex(r.get_facecolor()) == plots.SYNC_COLOUR]
    assert len(sync) == 2 and {r.get_y() + r.get_height() / 2 for r in sync} == {0.0}
    assert not any(r.get_hatch() for r in bars(fig))
    assert all(r.get_fill() for r in bars(fig))


def test_gantt_of_a_big_graph_on_the_mesh_merges_the_quiet_lanes():
    g, p = load_graph("resnet50"), load_profile("mesh")
    space = SearchSpace(g, p)
    rng = np.random.default_rng(0)
    choice = space.random_genomes(1, rng)[0][0]
    pl = space.decode(choice, np.ones(space.n_edges, dtype=np.int64))
    res = Simulator(space, timeline=True).simulate(pl)
    used = analysis.lanes(res.timeline, [u.name for u in p.units])
    assert len(used) > 24
    fig = plots.gantt(g, res.timeline, units=[u.name for u in p.units], max_lanes=24)
    labels = lane_labels(fig)
    assert len(labels) <= 24
    merged = [t for t in labels if t.startswith("+")]
    assert merged and sum(int(t.split()[0][1:]) for t in merged) + len(labels) - len(
        merged) == len(used)
    assert len([r for r in bars(fig) if r.get_fill()]) == len(res.timeline)


def test_convergence_plot_has_one_line_per_log_and_the_baselines(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(GOLDEN.read_bytes())
    b.write_bytes(GOLDEN.read_bytes())
    df = load(a, b)
    curves = analysis.convergence(df, search_only=True)
    fig = plots.convergence(curves, labels={str(a): "run A"},
                            baselines={"single:cpu": 10e-3, "greedy": 1.004e-3,
                                       "single:acc": 1.004e-3, "gone": float("nan")})
    ax = fig.axes[0]
    steps = [ln for ln in ax.get_lines() if ln.get_gid() == "best"]
    assert len(steps) == 2
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["run A", str(b)]
    assert steps[0].get_ydata()[-1] == pytest.approx(1.006)  # the mutate candidate, ms
    hlines = sorted(ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_gid() != "best")
    assert hlines == pytest.approx([1.004, 10.0])
    assert "greedy, single:acc: 1.004 ms" in [t.get_text() for t in ax.texts]
    zoom = fig.axes[1]  # the lines alone, limited to the final values (both 1.006 ms)
    assert len([ln for ln in zoom.get_lines() if ln.get_gid() == "best"]) == 2
    low, high = zoom.get_ylim()
    assert low < 1.006 < high and high - low < 0.05
    assert len(plots.convergence(curves, zoom=False).axes) == 1


def test_utilisation_and_occupancy_figures():
    g, p = chain_graph(), tiny_profile()
    res = simulate(g, p, {"Y": {"unit": "acc", "scope": "sram"}})
    util = analysis.utilisation(res.timeline, bins=20, units=["cpu", "acc"])
    fig = plots.utilisation(util)
    image = fig.axes[0].get_images()[0].get_array()
    assert image.shape == (3, 20)
    assert lane_labels(fig) == ["cpu", "acc", "dma0"]
    occ = plots.occupancy(analysis.occupancy(g, res.timeline), capacities={"sram": 2500})
    lines = {ln.get_label(): ln for ln in occ.axes[0].get_lines()}
    assert set(lines) == {"dram", "sram", "capacity of sram"}
    assert max(lines["sram"].get_ydata()) == pytest.approx(2000 / 1024)  # KiB
    assert lines["capacity of sram"].get_ydata()[0] == pytest.approx(2500 / 1024)
    # which scope at a glance: the line in the scope's colour, named on the line
    assert lines["capacity of sram"].get_color() == lines["sram"].get_color()
    assert lines["capacity of sram"].get_color() != lines["dram"].get_color()
    assert "capacity of sram: 2.441 KiB" in [t.get_text() for t in occ.axes[0].texts]


def test_figures_render_to_png(tmp_path):
    g, p = chain_graph(), tiny_profile()
    res = simulate(g, p, {"Y": {"unit": "acc", "scope": "sram"}})
    path = tmp_path / "g.png"
    plots.save(plots.gantt(g, res.timeline), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_period_picture_shows_every_stages_compute_though_the_stream_is_bursty():
    """A plan whose second stage, bound by its DMA, computes two inferences back to back
    then waits longer than a period: one period missed its compute (an empty lane in the
    report's picture); three show it, on every stage."""
    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline import evaluate
    from autoplace.pipeline.plan_space import parse_plan
    from autoplace.pipeline.stream import lanes, steady_window
    from autoplace.search.mesh import mesh_costs

    costs, _ = mesh_costs(load_graph("squeezenet"), load_profile("mesh"))
    plan = parse_plan("0:3:3 3:7:3/1,2,3,3 7:12:3 12:26:2 26:36:2 36:41:2/2,2,2,1,2 x1")

    def computing(work) -> set[str]:
        return {r for r, *_ in work if r.endswith(".pes")}

    every = {f"stage{n}.pes" for n in range(len(plan.stages))}
    analytic = evaluate(plan, costs).period_s
    start, period, work = steady_window(plan, costs, analytic, periods=3)
    assert computing(work) == every
    assert all(start <= a < b <= start + 3 * period for _, a, b, _, _ in work)
    fig = plots.pipeline_period(work, start, period, lanes(plan, costs), periods=3)
    ax = fig.axes[0]
    assert ax.get_xlim() == (0, 3 * period * 1e3) and len(ax.lines) == 2  # bounds dashed


def test_pipeline_pictures_have_a_lane_per_stage_resource_and_the_grid():
    import dataclasses

    import numpy as np

    from autoplace.hardware.load import load_profile
    from autoplace.models import load_graph
    from autoplace.pipeline import MeshMachine, StageCosts, best_pipeline, evaluate
    from autoplace.pipeline.layout import grid_maps
    from autoplace.pipeline.stream import lanes, steady_window

    mesh = dataclasses.replace(MeshMachine.of(load_profile("mesh")), rows=8, cols=8)
    costs = StageCosts(load_graph("squeezenet"), mesh)
    plan = best_pipeline(costs)
    stage, busy = grid_maps(plan, costs)
    fig = plots.pipeline_grid(stage, busy)
    left, right = fig.axes[:2]  # the two maps, then their colour bars
    assert np.ma.getdata(left.images[0].get_array()).shape == (8, 8)
    assert right.images[0].get_array().max() <= 1.0
    start, period, work = steady_window(plan, costs, evaluate(plan, costs).period_s)
    fig = plots.pipeline_period(work, start, period, lanes(plan, costs))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["shared"] + [f"stage{s}.{w}" for s in range(len(plan.stages))
                                   for w in ("pes", "dma")]  # the DRAM every copy shares
    assert len(ax.patches) == len(work) and ax.get_xlim() == (0, period * 1e3)
    # within the period, and one piece of work at a time on each lane
    assert all(start <= a < b <= start + period for _, a, b, _, _ in work)
    for lane in labels:
        spans = sorted((a, b) for r, a, b, _, _ in work if r == lane)
        assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))


def _mesh_plan():
    from autoplace.pipeline import evaluate
    from autoplace.pipeline.plan_space import parse_plan
    from autoplace.search.mesh import mesh_costs

    costs, _ = mesh_costs(load_graph("squeezenet"), load_profile("mesh"))
    plan = parse_plan("0:3:3 3:7:3/1,2,3,3 7:12:3 12:26:2 26:36:2 36:41:2/2,2,2,1,2 x1")
    return plan, costs, evaluate(plan, costs).period_s


def test_the_period_picture_is_the_measured_period_and_names_every_colour():
    """The period the picture shows is the one a plan's record holds (one stream, one
    clamp), and its legend has an entry per colour its bars use (issue 31)."""
    from autoplace.pipeline.stream import lanes, steady_window, streamed_period

    plan, costs, analytic = _mesh_plan()
    start, period, work = steady_window(plan, costs, analytic, periods=3)
    assert period == streamed_period(plan, costs, analytic)
    fig = plots.pipeline_period(work, start, period, lanes(plan, costs), periods=3)
    used = {to_hex(p.get_facecolor()) for p in bars(fig)}
    legend = fig.legends[0]
    named = {to_hex(h.get_facecolor()) for h, t in zip(legend.legend_handles,
                                                      legend.get_texts())
             if t.get_text().startswith("inference ")}
    assert used == named and len(named) == len({w[3] for w in work})  # none repeated
    assert f"{period * 1e3:.4f} ms" in fig.axes[0].get_title()


def _fits(fig: Figure, texts) -> None:
    """Each text drawn inside the figure, none over another."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    box = fig.bbox
    extents = [t.get_window_extent(renderer) for t in texts if t.get_text()]
    for e in extents:
        assert box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1 and e.y1 <= box.y1 + 1, e
    for i, a in enumerate(extents):
        assert not any(a.overlaps(b) for b in extents[i + 1:])


def test_the_grid_picture_on_the_bundled_4x4_mesh_fits_its_titles_and_colour_bars():
    from autoplace.pipeline.layout import grid_maps

    plan, costs, _ = _mesh_plan()
    stage, busy = grid_maps(plan, costs)
    assert stage.shape == (4, 4)
    long = "squeezenet on mesh: a plan of six stages over the sixteen PEs of the 4x4 mesh " * 2
    for title in ("squeezenet on mesh", long):
        fig = plots.pipeline_grid(stage, busy, title=title)
        maps, bars_ = fig.axes[:2], fig.axes[2:]
        _fits(fig, [fig._suptitle, *(ax.title for ax in maps)])
        assert len(bars_) == 2 and all(ax.get_ylabel() for ax in bars_)  # colour bars
        for ax in bars_:  # not squashed: as tall as the map beside them, near enough
            assert ax.get_position().height >= 0.8 * maps[0].get_position().height
        width = fig.get_figwidth() * plots.CHARS_PER_INCH
        assert all(len(line) <= width for line in fig._suptitle.get_text().split("\n"))


def test_a_long_gantt_title_is_wrapped_and_op_bars_keep_their_colour():
    """densenet121-like titles wrap to the figure's width; op bars are edged in their own
    colour, never white (a narrow bar would look like the pale async copies)."""
    graph = chain_graph()
    res = simulate(graph, tiny_profile(), {"Y": {"unit": "acc", "scope": "sram"}})
    events, units = res.timeline, ["cpu", "acc"]
    title = "densenet121 on soc: the best placement of a long tuning run, " * 4
    fig = plots.gantt(graph, events, units=units, title=title)
    lines = fig.axes[0].get_title().split("\n")
    width = int(fig.get_figwidth() * plots.CHARS_PER_INCH)
    assert len(lines) > 1 and all(len(line) <= width for line in lines)
    _fits(fig, [fig.axes[0].title])
    ops = [p for p in bars(fig) if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)
           and to_hex(p.get_facecolor()) in {to_hex(c) for c in plots.KIND_COLOURS.values()}]
    assert ops and all(to_hex(p.get_edgecolor()) == to_hex(p.get_facecolor()) for p in ops)
