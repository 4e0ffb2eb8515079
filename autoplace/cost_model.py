"""Cost models: predict a placement's latency from features, so the search measures less.

Features (:class:`Featurizer`, docs/cost_model.md) are cheap quantities of a placement on
its graph and profile, computed for a whole batch with numpy and compiled kernels: the
batch simulator's latency, per-unit busy time, DMA engine busy time, copy time and bytes by
mode, the contention-free critical path, unit switches, scope pressure. Times are divided by
the graph's critical-path bound and counts by the graph's size, so that one model serves
every graph of a profile (warm start from other graphs' logs). Column 0, ``log_simulated``,
is the log of the simulator's latency over the bound (the profile's simulator: calibrated
when the profile is); column 1, ``log_estimate``, the analytic estimate ``max(critical path,
busiest unit, busiest DMA engine)`` over the bound.

Targets are ``log(latency / bound)``. :class:`XGBCostModel` boosts trees on the *residual*
to the simulator (XGBoost's ``base_margin``), so an untrained or barely trained model
already ranks as the simulator does, and training learns only what the simulator misses on
the measurer (with the simulator as the measurer: nothing). :class:`SimulatorCostModel` is
the simulator alone, :class:`AnalyticCostModel` the analytic estimate alone. All follow
scikit-learn's contract: ``__init__`` stores settings, ``fit`` returns ``self``, learned
state ends in ``_``, ``predict`` before ``fit`` raises :class:`NotFittedError`. Models are
saved with XGBoost's own JSON/UBJ format.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path

import numba
import numpy as np

from autoplace.measure.batch import BatchOutput, simulate_batch
from autoplace.measure.objective import LATENCY, Objective
from autoplace.space import ASYNC, SearchSpace

#: Feature names, in column order (docs/cost_model.md explains each).
FEATURES = (
    "log_simulated", "log_estimate", "log_critical_path", "log_busiest_unit", "log_second_unit",
    "log_busiest_dma", "log_host", "log_total_busy", "parallelism", "busiest_share",
    "log_sync_copy", "log_async_copy", "sync_bytes", "async_bytes", "crossing_edges",
    "unit_switches", "units_used", "ops_off_default", "log_launch", "scope_pressure",
    "buffer_pressure", "no_route",
)
FEATURE_VERSION = 2  # 2: log_simulated, the residual's base, first
#: the column the learned model's residual is over (the simulator's log latency)
BASE = FEATURES.index("log_simulated")
ESTIMATE = FEATURES.index("log_estimate")
FAIL_PENALTY = 1.0  # a failure's target: its estimate's + this (a factor e in latency)
_EPS = 1e-3  # floor of time ratios before the log (a term that is 0 stays finite)


class CostModelError(ValueError):
    """A cost model cannot be built, loaded or used as asked."""


class NotFittedError(CostModelError, AttributeError):
    """``predict`` or ``save`` was called before ``fit``."""


class Featurizer:
    """Features of placements of one space (see the module docstring)."""

    names = FEATURES

    def __init__(self, space: SearchSpace, objective: Objective = LATENCY):
        self.space, self.objective = space, objective
        self.reference = max(space.critical_path(space.fastest()), 1e-12)
        self.total_bytes = max(float(space.nbytes.sum()), 1.0)
        self._flat = np.arange(space.n_ops) * space.c_dur.shape[1]  # row offsets
        self._tables = [x.ravel() for x in (space.c_unit, space.c_scope, space.c_dur)]

    def transform(self, choice: np.ndarray, mode: np.ndarray,
                  plan: tuple | None = None) -> np.ndarray:
        """Feature matrix ``[B, len(FEATURES)]`` of ``B`` genomes; ``plan`` is their
        ``SearchSpace.copy_plan`` if the caller has it already."""
        return self.features(choice, mode, plan)[0]

    def features(self, choice: np.ndarray, mode: np.ndarray,
                 plan: tuple | None = None) -> tuple[np.ndarray, BatchOutput | None]:
        """:meth:`transform`'s matrix, and the batch simulator's output it was made from
        (None for no rows)."""
        if not len(choice):
            return np.zeros((0, len(FEATURES))), None
        t, at = self.space, self._flat + choice
        unit, scope, dur = (table[at] for table in self._tables)
        cross, used, rid = t.copy_plan(choice, mode) if plan is None else plan
        r = t.routes
        secs, per_mode, dma = copy_sums(cross, used, rid, t.nbytes, r.lat, r.inv, r.hop_res,
                                        r.hop_lat, r.hop_bw, len(t.units), t.n_resources,
                                        t.transfer_s)
        top, second, host, units_used, pressure, biggest, switches, off_default = op_sums(
            unit, scope, dur, t.out_bytes, t.capacity, t.src, t.dst, t.default_scope,
            len(t.units), len(t.scopes), t.host, per_mode[:, 0])
        cp = self._critical_path(dur, secs)
        est = np.maximum(top, dma)  # the busiest resource
        if self.objective.target == LATENCY.name:  # (a stream's period: not the critical path)
            est = np.maximum(est, cp)
        total = dur.sum(axis=1) + per_mode[:, 0]  # every unit's busy time
        log = self._log
        out = simulate_batch(t, choice, mode, plan=(cross, used, rid),
                             per_unit=self.objective.per_unit)
        feats = [
            self._log_simulated(out, log(est)), log(est), log(cp), log(top), log(second),
            log(dma), log(host), log(total),
            total / np.maximum(est, 1e-30), top / np.maximum(total, 1e-30),
            log(per_mode[:, 0]), log(per_mode[:, 1]),
            per_mode[:, 2] / self.total_bytes, per_mode[:, 3] / self.total_bytes,
            cross.mean(axis=1) if t.n_edges else 0 * cp,
            switches / t.n_edges if t.n_edges else 0 * cp,
            units_used / len(t.units), off_default / t.n_ops,
            log(t.launch[unit].sum(axis=1)), np.log1p(pressure), np.minimum(biggest, 4.0),
            (cross & (rid == 0)).any(axis=1).astype(float),
        ]
        return np.column_stack(feats), out

    def _log_simulated(self, out: BatchOutput, fallback: np.ndarray) -> np.ndarray:
        """``log(simulated objective / bound)``, on the targets' scale (no floor: with the
        simulator as the measurer the residual is exactly zero); ``fallback`` where the
        simulator gives no finite positive value (a block unit's ops not contiguous)."""
        secs = self.objective.simulated(out)
        ok = np.isfinite(secs) & (secs > 0)
        return np.where(ok, np.log(np.where(ok, secs, 1.0) / self.reference), fallback)

    def _log(self, secs: np.ndarray) -> np.ndarray:
        return np.log(np.asarray(secs) / self.reference + _EPS)

    def _critical_path(self, dur: np.ndarray, secs: np.ndarray) -> np.ndarray:
        """Longest path with the chosen op times and unloaded copy times (no contention)."""
        return self.space.longest_paths(dur, secs)

    def targets(self, latency_s: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Training targets ``log(seconds / bound)`` of the rows of ``X`` (``latency_s``:
        the objective's measured seconds per inference).

        A failed candidate (NaN) gets its simulated target plus
        :data:`FAIL_PENALTY`: ranked well below where the simulator puts it, while the
        residual the model learns stays bounded.
        """
        lat = np.asarray(latency_s, dtype=np.float64)
        ok = ~np.isnan(lat)
        y = np.log(np.where(ok, lat, 1.0) / self.reference)
        return np.where(ok, y, np.asarray(X)[:, BASE] + FAIL_PENALTY)


@numba.njit(cache=True, nogil=True)
def copy_sums(cross, used, rid, nbytes, lat, inv, hop_res, hop_lat, hop_bw, n_units,
              n_res, transfer):  # pragma: no cover - compiled
    """Per row: each edge's unloaded copy time (0 where no copy; the measured transfer
    time where the graph has one), the sync and async copy time and bytes
    (``per_mode[B, 4]``), and the busiest DMA engine's busy time (the async copies' hops it
    performs, scaled like the copy; 0 without any). Engines are summed in one scratch row,
    cleared where the row wrote: the cost is the row's copies', not the engines'."""
    B, E = cross.shape
    secs, per_mode, busiest = np.zeros((B, E)), np.zeros((B, 4)), np.zeros(B)
    dma, stamp = np.zeros(max(n_res - n_units, 1)), np.full(max(n_res - n_units, 1), -1)
    touched = np.zeros(E * hop_res.shape[1] + 1, dtype=np.int64)
    for b in range(B):
        n_touched = 0
        for k in range(E):
            if not cross[b, k]:
                continue
            r = rid[b, k]
            modelled = lat[r] + nbytes[k] * inv[r]
            s = modelled if np.isnan(transfer[k]) else transfer[k]
            scale = s / modelled if modelled > 0 else 0.0
            secs[b, k] = s
            a = 1 if used[b, k] == ASYNC else 0
            per_mode[b, a] += s
            per_mode[b, 2 + a] += nbytes[k]
            for h in range(hop_res.shape[1] if a else 0):
                e = hop_res[r, h] - n_units  # a DMA engine (units' hops are not counted)
                if e >= 0:
                    if stamp[e] != b:
                        stamp[e], touched[n_touched], n_touched = b, e, n_touched + 1
                    dma[e] += (hop_lat[r, h] + nbytes[k] / hop_bw[r, h]) * scale
        for x in range(n_touched):
            busiest[b] = max(busiest[b], dma[touched[x]])
            dma[touched[x]] = 0.0
    return secs, per_mode, busiest


@numba.njit(cache=True, nogil=True)
def op_sums(unit, scope, dur, out_bytes, capacity, src, dst, default, n_units, n_scopes,
            host, sync):  # pragma: no cover - compiled
    """Per row, of the units' busy times (their ops' times; the host's with the ``sync``
    copies): the largest, the second largest and the host's, and how many units are busy;
    the most a scope holds of outputs kept there over its capacity (scope pressure), the
    largest output over its scope's capacity (buffer pressure), edges whose ends are on
    different units, ops off the default scope. Units and scopes are summed in one scratch
    row, cleared where the row wrote: the cost is the row's ops', not the profile's units'."""
    B, n = unit.shape
    top, second, host_busy, used = np.zeros(B), np.zeros(B), np.zeros(B), np.zeros(B)
    pressure, biggest, switches, off = np.zeros(B), np.zeros(B), np.zeros(B), np.zeros(B)
    busy, held = np.zeros(n_units), np.zeros(n_scopes)
    units, scopes = np.zeros(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    u_stamp, s_stamp = np.full(n_units, -1), np.full(n_scopes, -1)
    for b in range(B):
        n_u, n_s = 1, 0
        units[0], u_stamp[host] = host, b
        for i in range(n):
            u, s = unit[b, i], scope[b, i]
            if u_stamp[u] != b:
                u_stamp[u], units[n_u], n_u = b, u, n_u + 1
            if s_stamp[s] != b:
                s_stamp[s], scopes[n_s], n_s = b, s, n_s + 1
            busy[u] += dur[b, i]
            held[s] += out_bytes[i]
            biggest[b] = max(biggest[b], out_bytes[i] / capacity[s])
            off[b] += s != default
        busy[host] += sync[b]
        for k in range(len(src)):
            switches[b] += unit[b, src[k]] != unit[b, dst[k]]
        host_busy[b] = busy[host]
        for x in range(n_u):
            v = busy[units[x]]
            top[b], second[b] = (v, top[b]) if v > top[b] else (top[b], max(second[b], v))
            used[b] += v > 0
            busy[units[x]] = 0.0
        for x in range(n_s):
            pressure[b] = max(pressure[b], held[scopes[x]] / capacity[scopes[x]])
            held[scopes[x]] = 0.0
    return top, second, host_busy, used, pressure, biggest, switches, off


class CostModel(ABC):
    """Predicts ``log(latency / bound)`` of placements from their features (lower is better).

    ``X`` is a :class:`Featurizer` matrix; column :data:`BASE` is the simulator's log
    latency, column :data:`ESTIMATE` the analytic one.
    """

    @abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray) -> CostModel:
        """Learn from measured placements; returns ``self``."""

    @abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted targets of ``X``'s rows."""


class _OneColumn(CostModel):
    """A column of the features as the prediction; ``fit`` learns nothing but is required."""

    column = BASE

    def fit(self, X: np.ndarray, y: np.ndarray) -> _OneColumn:
        self.n_features_in_ = _check(X, y).shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"{type(self).__name__}.predict called before fit")
        return np.asarray(X, dtype=np.float64)[:, self.column]


class SimulatorCostModel(_OneColumn):
    """The simulator alone (feature ``log_simulated``)."""

    column = BASE


class AnalyticCostModel(_OneColumn):
    """The analytic estimate alone (feature ``log_estimate``)."""

    column = ESTIMATE


def _check(X: np.ndarray, y: np.ndarray | None = None,
           features: tuple[str, ...] = FEATURES) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(features):
        raise CostModelError(f"X must have shape (n, {len(features)}), got {X.shape}")
    if y is not None and len(y) != len(X):
        raise CostModelError(f"X has {len(X)} rows but y has {len(y)}")
    return X


class XGBCostModel(CostModel):
    """Gradient-boosted trees (XGBoost) on the residual to the simulator (column :data:`BASE`).

    ``init_model`` (a file written by :meth:`save`) warm-starts every ``fit``: its trees are
    kept and ``n_estimators`` more are boosted on the new data. Training is single-threaded
    and seeded, so the same data gives the same model. ``target`` names the objective whose
    seconds the targets are (``"latency"``, ``"throughput"``): saved with the model, and a
    model of another target is refused on loading. ``features``: the names of ``X``'s
    columns, the first the base (a placement's :data:`FEATURES`, or a pipeline plan's,
    :data:`autoplace.pipeline.features.PLAN_FEATURES`); saved with the model, and a model
    of others is refused on loading.

    The trees are boosted when first needed (a prediction, :meth:`save`), not by ``fit``: a
    model whose training rows all have the simulator's figure (the simulator as the
    measurer) predicts the simulator's figure (its residual is clipped to the training
    rows' range, ``[0, 0]``), so it boosts none unless it is saved.
    """

    _trees = None  # the booster, once boosted or loaded
    _training = None  # (X, y, the init_model's booster) of the last fit, until boosted

    def __init__(self, *, n_estimators: int = 40, max_depth: int = 4,
                 learning_rate: float = 0.3, min_child_weight: float = 2.0,
                 max_bin: int = 32, seed: int = 0, init_model: str | Path | None = None,
                 target: str = "latency", features: tuple[str, ...] = FEATURES):
        self.n_estimators, self.max_depth = n_estimators, max_depth
        self.learning_rate, self.min_child_weight = learning_rate, min_child_weight
        self.max_bin, self.seed, self.init_model = max_bin, seed, init_model
        self.target, self.features = target, tuple(features)

    def _params(self) -> dict:
        return {"max_depth": self.max_depth, "eta": self.learning_rate,
                "min_child_weight": self.min_child_weight, "max_bin": self.max_bin,
                "tree_method": "hist", "objective": "reg:squarederror", "nthread": 1,
                "seed": self.seed, "verbosity": 0}

    def fit(self, X: np.ndarray, y: np.ndarray) -> XGBCostModel:
        X = _check(X, y, self.features)
        if self.n_estimators <= 0:
            raise CostModelError(f"n_estimators > 0 must hold, got {self.n_estimators}")
        init = _load_booster(self.init_model, self.target, self.features) \
            if self.init_model is not None else None
        y = np.asarray(y, dtype=np.float64)
        residual = y - X[:, BASE]
        self.residual_range_ = (float(residual.min(initial=0.0)),
                                float(residual.max(initial=0.0)))
        self.n_features_in_ = X.shape[1]
        self._trees, self._training = None, (X.copy(), y.copy(), init)
        return self

    @property
    def booster_(self):
        """The XGBoost booster: boosted on the last :meth:`fit`'s rows when first asked
        for (the same trees whenever: training is seeded), or loaded."""
        if self._trees is None and self._training is not None:
            import xgboost as xgb

            X, y, init = self._training
            with xgb.config_context(nthread=1):  # threads cost more than they save here
                data = xgb.DMatrix(X, label=y, base_margin=X[:, BASE])
                self._trees = xgb.train(self._params(), data,
                                        num_boost_round=self.n_estimators, xgb_model=init)
            self._training = None
        if self._trees is None:
            raise NotFittedError("XGBCostModel has no booster before fit (or load)")
        return self._trees

    @booster_.setter
    def booster_(self, booster) -> None:
        self._trees, self._training = booster, None

    def predict(self, X: np.ndarray) -> np.ndarray:
        if not hasattr(self, "residual_range_"):
            raise NotFittedError("XGBCostModel.predict called before fit (or load)")
        X = _check(X, features=self.features)
        low, high = self.residual_range_
        if not len(X) or low == high == 0.0:  # the clip below leaves the base: no trees
            return X[:, BASE].copy()
        import xgboost as xgb

        with xgb.config_context(nthread=1):
            raw = np.asarray(self.booster_.inplace_predict(X, base_margin=X[:, BASE]),
                             dtype=np.float64)
        # boosted trees can add up to corrections no training row had; don't extrapolate
        return X[:, BASE] + np.clip(raw - X[:, BASE], low, high)

    def save(self, path: str | Path) -> None:
        """Write the model in XGBoost's format (``.json`` or ``.ubj``), with the features;
        CostModelError in one line if it cannot be written."""
        import xgboost as xgb

        if not hasattr(self, "residual_range_"):
            raise NotFittedError("XGBCostModel.save called before fit")
        path = Path(path)
        if path.suffix not in (".json", ".ubj"):
            raise CostModelError(f"{path}: a cost model file ends in .json or .ubj")
        self.booster_.set_attr(
            autoplace_features=json.dumps(_features_meta(self.target, self.features)),
            autoplace_residual_range=json.dumps(list(self.residual_range_)))
        try:
            self.booster_.save_model(str(path))
        except (xgb.core.XGBoostError, OSError) as exc:  # XGBoost's: a stack trace
            reason = (str(exc).strip().splitlines() or [""])[0].split(": ")[-1]
            raise CostModelError(f"{path}: cannot write the cost model ({reason})") from None

    @classmethod
    def load(cls, path: str | Path, **settings) -> XGBCostModel:
        """A fitted model read from ``path`` (``settings`` apply to later ``fit`` calls)."""
        model = cls(**settings)
        model.booster_ = _load_booster(path, model.target, model.features)
        low, high = json.loads(model.booster_.attr("autoplace_residual_range") or "[0, 0]")
        model.residual_range_ = (float(low), float(high))
        model.n_features_in_ = len(model.features)
        return model


def _features_meta(target: str, features: tuple[str, ...] = FEATURES) -> dict:
    """What a saved model's features are: their version and names, and the target where
    it is not latency (so latency models saved before targets existed still load)."""
    meta = {"version": FEATURE_VERSION, "names": list(features)}
    return meta if target == "latency" else {**meta, "target": target}


def _load_booster(path: str | Path, target: str = "latency",
                  features: tuple[str, ...] = FEATURES):
    """An XGBoost booster written by :meth:`XGBCostModel.save`, its features and target
    checked."""
    import xgboost as xgb

    booster = xgb.Booster()
    try:
        booster.load_model(str(path))
    except (xgb.core.XGBoostError, OSError):
        raise CostModelError(f"{path}: not an XGBoost model file") from None
    meta = booster.attr("autoplace_features")
    saved = json.loads(meta) if meta is not None else {}
    if isinstance(saved, dict) and saved.get("target", "latency") != target:
        raise CostModelError(f"{path}: a cost model of the {saved.get('target')} objective; "
                             f"this job's is {target}")
    if saved != _features_meta(target, features):
        raise CostModelError(f"{path}: a cost model of other features (autoplace_features="
                             f"{meta}); retrain it with this version")
    return booster
