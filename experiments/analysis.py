"""Tables of the experiments, computed with pandas from the logs the experiments write.

Imported by the experiment scripts (``python experiments/<name>.py`` puts this directory on
``sys.path``); the views underneath are :mod:`autoplace.reports.analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from autoplace.reports import analysis


def markdown(df: pd.DataFrame, digits: int = 4) -> str:
    """A pipe table (no extra dependency); floats with ``digits`` significant digits."""
    def cell(v) -> str:
        if isinstance(v, float | np.floating):
            if np.isnan(v):
                return ""
            return f"{v:,.0f}" if abs(v) >= 10**digits else f"{v:.{digits}g}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def run_table(df: pd.DataFrame, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per log (a tuning run): candidates, feasible ones, the best latency, when the
    search found it, and the best against the greedy and the best single-unit baselines."""
    rows = []
    curves = analysis.convergence(df, "log")
    for log, g in df.groupby("log", observed=True, sort=False):
        lat = g["latency_s"].where(g["ok"])
        strategy = g["strategy"].astype(str)
        best = lat.min()
        c = curves[curves["log"] == log]
        rows.append({
            "run": (labels or {}).get(log, log), "measured": len(g), "feasible": int(g["ok"].sum()),
            "best ms": best * 1e3, "best by": strategy[lat.idxmin()],
            "found at": int(c.loc[c["best_s"] == c["best_s"].min(), "n"].iloc[0]),
            "greedy / best": lat[strategy == "greedy"].min() / best,
            "heft / best": lat[strategy == "heft"].min() / best,
            "best single / best": lat[strategy.str.startswith("single:")].min() / best,
        })
    return pd.DataFrame(rows)
