"""An op graph's pattern matches: validated, kept through its JSON form, and no part of
its fingerprint (a model's graph keeps its fingerprint whatever the pattern table)."""

from __future__ import annotations

import dataclasses

import pytest
from factories import chain_graph

from autoplace.graph import GraphError, Match, OpGraph


def test_matches_round_trip_and_leave_the_fingerprint_alone(tmp_path):
    plain = chain_graph()
    matched = dataclasses.replace(plain, matches=(Match(pattern="conv2d", ops=(0,)),
                                                  Match(pattern="attention", ops=(0, 1, 2))))
    path = tmp_path / "g.json"
    matched.save(path)
    back = OpGraph.load(path)
    assert back.matches == matched.matches
    assert back.fingerprint == plain.fingerprint
    assert "matches" not in plain.to_dict()  # a graph without any writes none


@pytest.mark.parametrize(("item", "what"), [
    (["conv2d_relu6", [0]], "match 'conv2d_relu6': unknown pattern"),
    (["conv2d", []], "ops must be a non-empty list"),
    (["conv2d", [1, 0]], "ascending and distinct"),
    (["conv2d", [0, 0]], "ascending and distinct"),
    (["conv2d", [7]], "op 7 out of range"),
    (["conv2d", [-1]], "ops >= 0 must hold"),
    (["conv2d", 0], "a match must be [pattern, [op, ...]]"),
])
def test_a_bad_match_is_a_one_line_error_naming_the_file(item, what):
    d = {**chain_graph().to_dict(), "matches": [item]}
    with pytest.raises(GraphError) as info:
        OpGraph.from_dict(d, source="g.json")
    assert str(info.value).startswith("g.json: ") and what in str(info.value)
    assert "\n" not in str(info.value)
