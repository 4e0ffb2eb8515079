"""Where a reduction's vector and register tiles go (:mod:`autoplace.deploy.cpu_rules` applies
them): arithmetic on a loop nest's extents and the target's vector lanes and registers; no
TVM. The rules and what they gained are in :mod:`autoplace.deploy.cpu_rules`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: the largest register tile (accumulator vectors) of a reduction, besides its vector axis
REGISTER_TILE = 8
#: vectors of at most this many elements (128-bit: SSE, NEON, for float32) run reductions
#: vectorised over channels (:func:`plan_channel_tiles`)
NARROW_LANES = 4
#: a reduction vectorised over channels leaves at least this many vectors of them (its
#: parallel loop runs over them): its vectors are halved from the target's while they leave
#: fewer (AVX-512: 16 channels per vector from 64 channels up, else 8) ...
MIN_CHANNEL_VECTORS = 4
#: ... down to this many lanes (AVX2's 8 floats)
MIN_CHANNEL_LANES = 8
#: the most accumulators of a reduction vectorised over channels (AVX2's 16 registers but a
#: weight vector, a broadcast input and one spare; AVX-512 keeps it: a 27-column tile of its
#: 32 registers was slower than 9 columns)
CHANNEL_TILE = 13
#: the most channel blocks a reduction onto blocks holds in registers at once (MLAS's NCHWc
#: kernels compute up to 4 filter blocks), and its most accumulators then: squeezenet's
#: convs on two cores with AVX-512, each alone, against the width alone, 0.93x in all (its
#: first conv 376 -> 241 us, its 3x3 ones onto 27 x 27 392 -> 320; 4 x 24 against 4 x 28
#: and 2 x 28, the best of the three)
BLOCK_ROWS = 4
BLOCK_TILE = 24
#: the share of its registers' lanes a vector over the width must use to be kept there
MIN_WIDTH_FILL = 0.75
#: a reduction over the width whose activations (what its output channels do not index)
#: take at most this many bytes runs its output channels' outer loop outermost: each block
#: of channels reads them all again, from a core's L2 (AMD Zen 4: 1 MiB; Intel since Ice
#: Lake: 1.25-2 MiB; Arm's big cores: 512 KiB-1 MiB), and writes its planes row after row
#: (:func:`channels_outermost`)
REREAD_BYTES = 512 * 1024

@dataclass(frozen=True, kw_only=True)
class Tiles:
    """Where a reduction's vector and register tiles go: spatial axes (their index among
    the block's spatial axes) and tile sizes; no register tile when ``register`` is None;
    ``row``: a second register axis (the rows above a narrow register tile of columns)."""

    vector: int
    vector_tile: int
    register: int | None = None
    register_tile: int = 1
    row: int | None = None
    row_tile: int = 1


def plan_tiles(extents: list[int], lanes: int, registers: int,
               reused: frozenset[int] | None = None) -> Tiles | None:
    """The tiles of a reduction with spatial ``extents`` on a CPU with ``registers``
    vector registers of ``lanes`` elements (``None``: nothing to vectorise); ``reused``:
    the axes a register tile may take (None: any), those along which the vectors it loads
    are the same (:func:`~autoplace.deploy.tir_facts.reused_axes`).

    The vector axis is the innermost one (contiguous in the output), tiled by a divisor of
    its extent of at least 4: two registers' lanes when they divide it (each element
    broadcast from a row then feeds two vectors: with the weight packed, bert_base's 128 x
    768 by 768 x 768 matmuls on one core 1,732 -> 1,048 us), else the one up to ``lanes``
    that fills a register best (the largest on ties), else the one up to two registers'
    lanes that LLVM splits into the fewest registers (:func:`_pieces`); ``None`` when it has
    none (a strided vector across channels is slower than none). The register axis is the
    outermost other axis of ``reused`` with extent > 1, tiled by its largest divisor up to
    :data:`REGISTER_TILE` whose accumulators leave 4 registers free: a batched matmul's
    rows, not its batch, over which every accumulator would load its own vector (bert_base's
    attention matmuls on one core, 12 heads of 128 x 64 by 64 x 128 and of 128 x 128 by 128
    x 64, with the vector tile of two registers: 1,034 -> 177 and 1,109 -> 176 us,
    ``experiments/results/bench_kernels_ab.md``); with none in ``reused`` (a depthwise conv,
    whose every channel reads its own input), the outermost other one all the same: its
    accumulators add independently, where one alone would wait for each add."""
    last = len(extents) - 1
    fits = [d for d in range(4, 2 * lanes + 1) if extents[last] % d == 0]
    if not fits:
        return None
    small = [d for d in fits if d <= lanes]
    tile = max(small) if small else min(fits, key=lambda d: (_pieces(d, lanes), -d))
    if extents[last] % (2 * lanes) == 0:
        tile = 2 * lanes
    most = min(REGISTER_TILE, (registers - 4) // _pieces(tile, lanes))
    axes = [a for a, e in enumerate(extents[:last]) if e > 1 and largest_divisor(e, most) > 1]
    preferred = [a for a in axes if reused is None or a in reused]
    if axes:
        axis = (preferred or axes)[0]
        return Tiles(vector=last, vector_tile=tile, register=axis,
                     register_tile=largest_divisor(extents[axis], most))
    return Tiles(vector=last, vector_tile=tile)


def plan_reduction_tiles(extents: list[int], lanes: int, registers: int, *,
                         strided: bool = False, group: int | None = None,
                         reused: frozenset[int] | None = None) -> Tiles | None:
    """The tiles of a reduction with spatial ``extents`` (``lanes`` per vector, ``registers``
    vector registers): over channels with narrow vectors; over the width (:func:`plan_tiles`),
    unless the width has no vector tile or one that fills less than :data:`MIN_WIDTH_FILL` of
    its registers' lanes, or its input is read with a stride (``strided``: a conv of stride
    2): then over channels (:func:`_over_channels`), with a register tile of the width of up
    to :data:`CHANNEL_TILE` accumulators (the module docstring of
    :mod:`autoplace.deploy.cpu_rules` gives what it gained). ``group``: the output channels
    of a group of a grouped conv; a vector over channels stays within one (its lanes divide
    it: across two, each lane would read the input of its own group), and is not made when
    the group halves the lanes below :data:`MIN_CHANNEL_LANES` (then over the width).
    ``reused``: as :func:`plan_tiles` takes it, for a tile over the width."""
    width = plan_tiles(extents, lanes, registers, reused)
    within = lanes if group is None else _lanes_within(group, lanes)
    if within < lanes and within < MIN_CHANNEL_LANES:  # (too narrow to go over channels)
        return width
    if within <= NARROW_LANES:
        tiles = plan_channel_tiles(extents, within, registers)
        if tiles is not None:
            return tiles
    if strided:  # (over the output channels: not over rows, read with the same stride)
        channels = _over_channels(extents, within, registers)
        return channels if channels is not None and channels.vector == 0 else width
    if width is not None and _fill(width, lanes) >= MIN_WIDTH_FILL:
        return width
    return _over_channels(extents, within, registers) or width


def plan_block_tiles(extents: list[int], lanes: int, registers: int) -> Tiles:
    """The tiles of a reduction whose output holds its channels in blocks, innermost (NCHWc:
    :mod:`autoplace.runtime.layout`; ``extents[-1]`` the block, ``extents[-2]`` the width,
    ``extents[-4]`` the channel blocks): the vector over the block's channels (its largest
    divisor up to ``lanes``), the register tile over the width (its largest divisor up to
    half the registers less two: 14 of AVX-512's 32), as MLAS's NCHWc kernels tile; the
    weights are then read a vector of the block's channels at a time, each input element
    broadcast once per register tile. With 32 registers (AVX-512) the tile also spans up to
    :data:`BLOCK_ROWS` channel blocks (a second register axis: each input element broadcast
    once for all of them, as MLAS computes up to 4 filter blocks at once), in up to
    :data:`BLOCK_TILE` accumulators, when that holds more of them than the width alone; of
    as many, the most rows, which broadcast each input element for more blocks (a width of
    14: 2 x 7 rather than 1 x 14; resnet50's six convs onto 14 x 14 0.80-1.01x the time on
    one core, the 13 kernels whose tiles this changes 0.92x on one core and on two,
    densenet121's 35 0.87x and 0.86x: ``experiments/results/bench_block_tiles.md``)."""
    width = Tiles(vector=len(extents) - 1, vector_tile=largest_divisor(extents[-1], lanes),
                  register=len(extents) - 2,
                  register_tile=largest_divisor(extents[-2], registers // 2 - 2))
    if registers < 32 or len(extents) < 4:
        return width
    best = (width.register_tile, 1, width.register_tile)
    for rows in range(2, BLOCK_ROWS + 1):
        if extents[-4] % rows == 0:
            columns = largest_divisor(extents[-2], min(registers // 2 - 2, BLOCK_TILE // rows))
            best = max(best, (rows * columns, rows, columns), key=lambda b: b[:2])
    _, rows, columns = best
    return width if rows == 1 else dataclasses.replace(
        width, register_tile=columns, row=len(extents) - 4, row_tile=rows)


def channels_outermost(tiles: Tiles, n_spatial: int, activation_bytes: float) -> bool:
    """Whether a reduction's register axis (output channels) goes outermost, before the
    rows and the width: for a vector over the width (not a second register axis of rows)
    whose activations take at most :data:`REREAD_BYTES`. Then a register tile's output
    planes are written in order, a few streams at a time, where with the channels inside
    every tile of the width writes all of them (a 1x1 conv to 512 channels: 512 write
    streams, which a cold output buffer in a run misses on). Alone after a 64 MB flush, on
    two cores: resnet50's 512 x 128 1x1 conv onto 28 x 28 931 -> 631 us, its 1024 x 256
    one 839 -> 664; its 64 x 256 one, whose input takes 3 MB (256 x 56 x 56), 612 -> 794,
    so not past the L2; warm, and whole models in a run, unchanged within this machine's
    noise (experiments/results/bench_conv_cold.md)."""
    return (tiles.register is not None and tiles.row is None
            and tiles.vector == n_spatial - 1 and activation_bytes <= REREAD_BYTES)


def _lanes_within(group: int, lanes: int) -> int:
    """The most lanes, halving from ``lanes``, that divide ``group``."""
    while lanes > 1 and group % lanes:
        lanes //= 2
    return lanes


def _over_channels(extents: list[int], lanes: int, registers: int) -> Tiles | None:
    """:func:`plan_channel_tiles` in vectors of ``lanes``, halved while they leave fewer than
    :data:`MIN_CHANNEL_VECTORS` vectors of channels, down to :data:`MIN_CHANNEL_LANES`."""
    while True:
        tiles = plan_channel_tiles(extents, lanes, registers, most=CHANNEL_TILE)
        if tiles is not None and extents[tiles.vector] // lanes >= MIN_CHANNEL_VECTORS:
            return tiles
        if lanes // 2 < MIN_CHANNEL_LANES:
            return tiles
        lanes //= 2


def _fill(tiles: Tiles, lanes: int) -> float:
    """The share of the lanes of the registers a vector tile takes that it uses."""
    return tiles.vector_tile / (_pieces(tiles.vector_tile, lanes) * lanes)


def plan_channel_tiles(extents: list[int], lanes: int, registers: int,
                       most: int | None = None) -> Tiles | None:
    """Tiles of a reduction vectorised over channels (narrow vectors, ``lanes`` <=
    :data:`NARROW_LANES`, or a width that vectorises badly): the vector axis is the largest
    spatial axis but the innermost whose extent ``lanes`` divides (output channels, in
    NCHW), tiled by ``lanes``; the register axis is the innermost one, tiled by its largest
    divisor up to ``most`` (default :data:`REGISTER_TILE`, accumulators leaving 4 registers
    free). When that tile takes at most half of ``most`` (111 = 3 x 37: 3), the rows above
    it are a second register axis, tiled by their largest divisor that keeps the tile within
    ``most`` (3 x 3: one weight vector loaded per 9 accumulations, not per 3). None when no
    axis but the innermost divides into vectors."""
    last = len(extents) - 1
    axes = [i for i in range(last) if extents[i] % lanes == 0 and extents[i] > 1]
    if not axes:
        return None
    vector = max(axes, key=lambda i: (extents[i], -i))
    most = most or min(REGISTER_TILE, registers - 4)
    tile = largest_divisor(extents[last], most)
    tiles = Tiles(vector=vector, vector_tile=lanes, register=last if tile > 1 else None,
                  register_tile=tile)
    row = last - 1
    rows = largest_divisor(extents[row], most // tile) if tile > 1 else 1
    if tile <= most // 2 and row != vector and rows > 1:
        return dataclasses.replace(tiles, row=row, row_tile=rows)
    return tiles


def _pieces(tile: int, lanes: int) -> int:
    """Registers a vector of ``tile`` elements takes once LLVM legalises it: one when it
    fits in one register (widened), else a register per ``lanes`` and one per power of
    two of the rest."""
    return 1 if tile <= lanes else tile // lanes + bin(tile % lanes).count("1")


def largest_divisor(extent: int, most: int) -> int:
    """The largest divisor of ``extent`` up to ``most`` (at least 1)."""
    return max(d for d in range(1, max(1, min(extent, most)) + 1) if extent % d == 0)
