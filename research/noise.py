"""How noisy the measured slowdowns are, and how much of that is noise at all.

A slowdown s = t'/t is measured in one window against solo windows of the same job on the same machine
(``reader.slowdown_table``). Two measurements of the same (mode, set, job) differ for three reasons:

- window-to-window noise inside one run (a host-bound job's Python and driver overhead varies from one
  second to the next);
- drift between runs on one machine;
- another machine: a job whose iteration is partly host time runs alone faster or slower on another host,
  while its collocated time, bounded by the shared GPU, changes less; so its slowdown moves against its solo
  time. That part is not noise: the feature rows describe each window's members re-timed to their solo time
  there (``dataset.feature_rows``), so a model can follow it.

:func:`repeat_pairs` pairs every two measurements of a (mode, set, job) and labels the pair by what separates
them; :func:`spread_table` gives the spread of each kind; :func:`solo_time_effect` the slope of the slowdown's
change on the solo time's change across machines (−1 if the collocated time did not move at all, 0 if it moved
with the solo time) and how closely predictions follow it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from colopred.constants import HOST_BOUND_BUSY
from colopred.measurement.harness.reader import machine_key, segment_key


PAIR_KINDS = ("same run", "same machine, another run", "another machine")


def job_class(host_bound: bool) -> str:
    """The label of a job class in the tables: host-bound (busy < HOST_BOUND_BUSY) or saturating."""
    return f"host-bound (busy < {HOST_BOUND_BUSY:g})" if host_bound else "saturating"


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation, NaN where either side does not vary."""
    if np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def repeat_pairs(rows: pd.DataFrame, busy: dict[str, float], value: str | None = None) -> pd.DataFrame:
    """Every two measurements of the same (mode, set, job) in ``rows`` (``slowdown_table`` or dataset rows), one row
    per pair: ``kind`` (one of PAIR_KINDS: same campaign and segment; same GPU, another run; another GPU, by
    ``reader.machine_key``), ``host_bound`` (the job's solo busy fraction < HOST_BOUND_BUSY), and the signed log
    ratios (first − second, natural log) of the slowdown, the solo and collocated times, and of ``value`` (a column
    of predictions, say) where given."""
    df = rows.assign(_machine=machine_key(rows), _run=segment_key(rows))
    out = []
    for (mode, s, job), g in df.groupby(["mode", "set", "job"], sort=True):
        if len(g) < 2:
            continue
        g = g.reset_index(drop=True)
        i, j = np.triu_indices(len(g), 1)
        a, b = g.iloc[i].reset_index(drop=True), g.iloc[j].reset_index(drop=True)
        kind = np.where(a["_run"] == b["_run"], PAIR_KINDS[0], np.where(a["_machine"] == b["_machine"], PAIR_KINDS[1], PAIR_KINDS[2]))
        d = pd.DataFrame({"mode": mode, "set": s, "job": job, "kind": kind, "host_bound": busy[job] < HOST_BOUND_BUSY,
                          "dlog_slowdown": np.log(a["slowdown"] / b["slowdown"]),
                          "dlog_solo": np.log(a["solo_ms"] / b["solo_ms"]), "dlog_colo": np.log(a["colo_ms"] / b["colo_ms"])})
        if value is not None:
            d["dlog_value"] = np.log(a[value].to_numpy() / b[value].to_numpy())
        out.append(d)
    cols = ["mode", "set", "job", "kind", "host_bound", "dlog_slowdown", "dlog_solo", "dlog_colo"] + (["dlog_value"] if value else [])
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def spread_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, job class, pair kind): pairs, and the median and mean relative difference (%) of the slowdowns, the
    solo times and the collocated times between two measurements."""
    p = pairs.assign(job_class=pairs["host_bound"].map(job_class))
    for c in ("slowdown", "solo", "colo"):
        p[c] = 100 * p[f"dlog_{c}"].abs()
    t = p.groupby(["mode", "job_class", "kind"]).agg(
        pairs=("slowdown", "size"), slowdown_median_pct=("slowdown", "median"), slowdown_mean_pct=("slowdown", "mean"),
        solo_median_pct=("solo", "median"), colo_median_pct=("colo", "median")).reset_index()
    t["kind"] = pd.Categorical(t["kind"], PAIR_KINDS, ordered=True)
    return t.sort_values(["mode", "job_class", "kind"]).reset_index(drop=True)


def solo_time_effect(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (mode, job class), over pairs measured on two machines: the least-squares slope of Δln s on Δln t (solo),
    their correlation, the median |Δln s| left after the slope (%), and, with predictions (``dlog_value``), the slope
    of the predictions' Δln on Δln t and their correlation with the measured Δln s."""
    rows = []
    other = pairs[pairs["kind"] == PAIR_KINDS[2]]
    for (mode, hb), g in other.groupby(["mode", "host_bound"]):
        x, y = g["dlog_solo"].to_numpy(), g["dlog_slowdown"].to_numpy()
        if len(g) < 3 or np.var(x) == 0:
            continue
        slope = float(np.dot(x, y) / np.dot(x, x))  # through the origin: a pair's order is arbitrary
        r = {"mode": mode, "job_class": job_class(hb), "pairs": len(g),
             "slope_slowdown_on_solo": slope, "corr_slowdown_solo": _corr(x, y),
             "slowdown_median_pct": float(100 * np.median(np.abs(y))),
             "residual_median_pct": float(100 * np.median(np.abs(y - slope * x)))}
        if "dlog_value" in g:
            v = g["dlog_value"].to_numpy()
            r["slope_prediction_on_solo"] = float(np.dot(x, v) / np.dot(x, x))
            r["corr_prediction_measured"] = _corr(v, y)
        rows.append(r)
    return pd.DataFrame(rows)
