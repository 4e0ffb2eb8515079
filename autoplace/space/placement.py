"""A placement by name: the form users write, the log stores and the build reads.

Inside the tool a placement is a *genome* of the compiled space (a choice index per op and a
copy-mode index per edge, :mod:`autoplace.space.compiled`); :class:`Placement` exists at the
edges only: the user API (``SearchSpace.from_user``), the tuning log, the build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field


class PlacementError(ValueError):
    """A placement does not fit the graph and profile; the message names the op or edge."""


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Op name -> (unit, scope); crossing edge name ("src->dst") -> copy mode; op name ->
    ``"resident"`` for each op whose weights live in its scope (the others' are streamed
    from the default scope)."""

    ops: Mapping[str, tuple[str, str]]
    copies: Mapping[str, str]
    weights: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The form a log line holds (:meth:`from_dict`); ops on one (unit, scope) share
        one ``{"unit", "scope"}`` dict (a placement has few distinct ones)."""
        forms = {p: {"unit": p[0], "scope": p[1]} for p in set(self.ops.values())}
        out = {
            "ops": {k: forms[p] for k, p in self.ops.items()},
            "copies": dict(self.copies),
        }
        if self.weights:  # absent when every op streams: logs without weights read the same
            out["weights"] = dict(self.weights)
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> Placement:
        """Inverse of :meth:`to_dict` (full form only; see ``SearchSpace.from_user``)."""
        try:
            ops = {k: (str(v["unit"]), str(v["scope"])) for k, v in d["ops"].items()}
            copies = {str(k): str(v) for k, v in d.get("copies", {}).items()}
            weights = {str(k): str(v) for k, v in d.get("weights", {}).items()}
        except (KeyError, TypeError, AttributeError) as exc:
            raise PlacementError(f"not a placement: missing or malformed {exc}") from None
        return cls(ops=ops, copies=copies, weights=weights)

    def to_json(self) -> str:
        """Compact JSON with sorted keys: the text a log line holds (``records.encode_line``)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Placement:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise PlacementError(f"placement is not JSON: {exc}") from None

    def units_used(self) -> set[str]:
        return {u for u, _ in self.ops.values()}
