#!/usr/bin/env python3
"""The cluster trace replayed through a running ``colopred serve``: what the service's decisions do, how its error
moves as observations arrive, and whether it keeps up with 1,000 GPUs.

**Question.** Driven exactly as a scheduler would drive it (profiles registered, ``POST /v1/pack`` at every arrival
and completion, every shared set's measured slowdowns posted as observations: ``colopred simulate --server``,
:mod:`colopred.research.replay`), does colopred-as-a-service place as well as the offline colopred policy of
``reports/h100/simulation.md``; how does the error of its predictions, as served before each observation, move over
the replay; and what does one decision cost on a cluster of 1,000 GPUs?

**Design.** Gavel's trace of ``simulation.md`` (436 single-GPU jobs), each mode, 4, 5 and 6 GPUs, each replay against
a fresh server and store (the shipped models, no observation at the start), outcomes from the measured slowdowns as
offline. The trace is then replicated 200 times (87,200 jobs, each copy's arrivals moved within the mean gap) onto
1,000 GPUs, the demand per GPU of the 5-GPU replay, and replayed for ``--scale-seconds`` per mode (the fill of the
cluster and then its saturated regime: the whole trace would take hours on two cores). Latency is the client's,
over loopback, with the replay's own Python on the same two cores; the load average is printed beside it.

**Caveat.** The service serves the shipped models, which were fitted on every measured set, these included; the
offline policy used out-of-fold predictions (no model predicted a set it saw). The uncorrected error column is the
shipped model's own in-sample error on these sets; the served one adds the online offsets of earlier observations.

**Command.**

  PYTHONPATH=. python research/replay_study.py [--out reports/h100/replay] [--scale-seconds 150]

Writes ``README.md``, ``summary.csv``, ``error.csv``, ``latency.csv``, ``replay.png`` in ``--out`` (and, with
``--screenshot FILE``, the status page of the last 1,000-GPU server, through headless chromium).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.client import Client  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.replay import CANDIDATE_GPUS, error_by_decile, replay, replicate  # noqa: E402
from colopred.research.report import md_table  # noqa: E402
from colopred.research.simulation import MeasuredSets, read_gavel_trace, summarize  # noqa: E402
from tests.service_support import Server  # noqa: E402

TRACE = ROOT / "datasets" / "traces" / "gavel-msr" / "0e4a51.trace"
DATA = ROOT / "datasets" / "h100"
OFFLINE = ROOT / "reports" / "h100" / "simulation.csv"
COPIES, SCALE_GPUS = 200, 1000


def _pct(x, q):
    return float(np.percentile(x, q)) if len(x) else float("nan")


def screenshot(url: str, path: Path) -> None:
    binary = shutil.which("chromium")
    if binary is None:
        print("no chromium: no screenshot", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--screenshot={path}", "--window-size=1280,1000", "--hide-scrollbars",
                        url + "/status"], check=True, capture_output=True, timeout=120)


def fresh(tmp: str, name: str) -> Path:
    folder = Path(tmp) / name
    folder.mkdir()
    return folder / "store"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "reports" / "h100" / "replay"))
    ap.add_argument("--modes", default="timeslice,mps")
    ap.add_argument("--gpus", default="4,5,6")
    ap.add_argument("--scale-seconds", type=float, default=150.0, help="wall time of each 1,000-GPU replay")
    ap.add_argument("--screenshot", help="PNG of the last 1,000-GPU server's /status page")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    modes = a.modes.split(",")
    trace = read_gavel_trace(TRACE)
    ds = load_dataset(DATA)
    offline = pd.read_csv(OFFLINE)
    summary, errors, latency, curves = [], [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            sets = MeasuredSets(ds.for_mode(mode))
            for n in [int(x) for x in a.gpus.split(",")]:
                with Server(fresh(tmp, f"{mode}-{n}")) as server:
                    t0 = time.perf_counter()
                    run, rec = replay(Client(server.url), trace, ds.profiles, sets, n, mode)
                    wall = time.perf_counter() - t0
                obs = pd.DataFrame(rec.observations)
                ms = [d["ms"] for d in rec.decisions]
                row = {"mode": mode, "gpus": n, "policy": "colopred service (replay)", **summarize(run),
                       "decisions": len(ms), "decision_p50_ms": _pct(ms, 50), "decision_p99_ms": _pct(ms, 99),
                       "observed_rows": len(obs), "refused": rec.refused, "unpaid": rec.unpaid, "wall_s": wall,
                       "served_mape_pct": float((100 * (obs.predicted - obs.measured).abs() / obs.measured).mean()),
                       "uncorrected_mape_pct": float((100 * (obs.predicted_uncorrected - obs.measured).abs() / obs.measured).mean())}
                summary.append(row)
                errors.append(error_by_decile(rec.observations).assign(mode=mode, gpus=n))
                if n == 5:
                    curves[mode] = obs
                print(f"{mode} {n} GPUs: makespan {row['makespan_h']:.0f} h, mean JCT {row['mean_jct_h']:.0f} h, "
                      f"served MAPE {row['served_mape_pct']:.2f}% ({wall:.0f} s)", flush=True)
        big = replicate(trace, COPIES)
        for mode in modes:
            sets = MeasuredSets(ds.for_mode(mode))
            with Server(fresh(tmp, f"{mode}-scale")) as server:
                load0 = os.getloadavg()[0]
                run, rec = replay(Client(server.url), big, ds.profiles, sets, SCALE_GPUS, mode, max_wall_s=a.scale_seconds)
                load1 = os.getloadavg()[0]
                if a.screenshot and mode == modes[-1]:
                    screenshot(server.url, Path(a.screenshot))
            d = pd.DataFrame(rec.decisions)
            obs = pd.DataFrame(rec.observations)
            full = d[d["busy_gpus"] == SCALE_GPUS]
            posts = obs.drop_duplicates("id")["post_ms"] if len(obs) else pd.Series(dtype=float)
            per_request = d["ms"] / d["requests"]
            latency.append({"mode": mode, "gpus": SCALE_GPUS, "jobs": len(big), "events": int(d["event"].max()) + 1,
                            "decisions": len(d), "jobs_finished": int(run["finish_s"].notna().sum()),
                            "p50_ms": _pct(d["ms"], 50), "p99_ms": _pct(d["ms"], 99), "max_ms": float(d["ms"].max()),
                            "full_decisions": len(full), "full_p50_ms": _pct(full["ms"], 50), "full_p99_ms": _pct(full["ms"], 99),
                            "request_p50_ms": _pct(per_request, 50), "request_p99_ms": _pct(per_request, 99),
                            "requests_per_decision": float(d["requests"].mean()), "gpus_sent_mean": float(d["gpus_sent"].mean()),
                            "observation_post_p50_ms": _pct(posts, 50), "observation_post_p99_ms": _pct(posts, 99),
                            "observed_rows": len(obs), "load_average": f"{load0:.1f}-{load1:.1f}",
                            "served_mape_pct": float((100 * (obs.predicted - obs.measured).abs() / obs.measured).mean()) if len(obs) else float("nan"),
                            "uncorrected_mape_pct": float((100 * (obs.predicted_uncorrected - obs.measured).abs() / obs.measured).mean()) if len(obs) else float("nan")})
            errors.append(error_by_decile(rec.observations).assign(mode=mode, gpus=SCALE_GPUS))
            print(f"{mode} {SCALE_GPUS} GPUs: {len(d)} decisions, p50 {latency[-1]['p50_ms']:.1f} ms, p99 "
                  f"{latency[-1]['p99_ms']:.1f} ms", flush=True)
    summary_t = pd.DataFrame(summary)
    error_t = pd.concat(errors, ignore_index=True)
    latency_t = pd.DataFrame(latency)
    summary_t.to_csv(out / "summary.csv", index=False)
    error_t.to_csv(out / "error.csv", index=False)
    latency_t.to_csv(out / "latency.csv", index=False)
    write_report(out, summary_t, error_t, latency_t, offline, curves, trace, a)
    return 0


def write_report(out: Path, summary: pd.DataFrame, error: pd.DataFrame, latency: pd.DataFrame, offline: pd.DataFrame,
                 curves: dict, trace, a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for mode, obs in curves.items():
        e = (100 * (obs.predicted - obs.measured).abs() / obs.measured).rolling(50, min_periods=10).mean()
        r = (100 * (obs.predicted_uncorrected - obs.measured).abs() / obs.measured).rolling(50, min_periods=10).mean()
        line = ax.plot(np.arange(len(e)), e, label=f"{mode}: as served")[0]
        ax.plot(np.arange(len(r)), r, "--", color=line.get_color(), alpha=0.6, label=f"{mode}: model alone")
    ax.set(xlabel="observed job rows, in the order posted (5 GPUs)", ylabel="MAPE over the last 50 rows (%)",
           title="prediction error as the replay goes on")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "replay.png", dpi=110)
    plt.close(fig)

    cols = ["makespan_h", "mean_jct_h", "p95_jct_h", "mean_queueing_h", "gpu_hours", "mean_slowdown_vs_solo"]
    compare = []
    for _, r in summary.iterrows():
        off = offline[(offline["mode"] == r["mode"]) & (offline["gpus"] == r["gpus"])]
        base = off[off["policy"] == "one per GPU"].iloc[0]
        for _, o in off.iterrows():
            compare.append({"mode": r["mode"], "gpus": r["gpus"], "policy": f"{o['policy']} (offline)", **{c: o[c] for c in cols},
                            "mean_jct_vs_one_per_gpu_pct": 100 * (o["mean_jct_h"] / base["mean_jct_h"] - 1)})
        compare.append({"mode": r["mode"], "gpus": r["gpus"], "policy": "**colopred service (replay)**", **{c: r[c] for c in cols},
                        "mean_jct_vs_one_per_gpu_pct": 100 * (r["mean_jct_h"] / base["mean_jct_h"] - 1)})
    compare_t = pd.DataFrame(compare)
    lat = latency[["mode", "gpus", "jobs", "decisions", "jobs_finished", "p50_ms", "p99_ms", "max_ms", "full_decisions",
                   "full_p50_ms", "full_p99_ms", "request_p50_ms", "request_p99_ms", "requests_per_decision",
                   "gpus_sent_mean", "observation_post_p50_ms", "observation_post_p99_ms", "load_average"]]
    worst_p99 = float(latency["p99_ms"].max())
    five = summary[summary["gpus"] == 5].set_index("mode")
    lines = [
        "# The trace replayed through the service", "",
        f"`PYTHONPATH=. python research/replay_study.py --scale-seconds {a.scale_seconds:g}` "
        "(`research/replay_study.py`'s docstring has the design; each replay is `colopred simulate --server URL` against a "
        "fresh `colopred serve`). "
        f"Gavel's trace of [`simulation.md`](../simulation.md), {len(trace)} single-GPU jobs, driven through the service as a "
        "scheduler would: the jobs' profiles registered, `POST /v1/pack` at every arrival and completion (the waiting "
        "jobs, the first 16, with the GPUs they may join, the running jobs pinned), the measured slowdowns of every set "
        "that shared a GPU posted as an observation when it ended, each node reported (`PUT /v1/nodes`). **Outcomes come "
        "from the measurements** (a set's jobs progress at its measured slowdowns), never from the model; a GPU only "
        "runs a set that was measured, as offline.", "",
        f"**1,000 GPUs:** the trace replicated {COPIES}× ({COPIES * len(trace):,} jobs) onto {SCALE_GPUS:,} GPUs, "
        f"{a.scale_seconds:g} s of replay per mode: decision latency p50 "
        + ", ".join(f"{r['mode']} {r['p50_ms']:.1f} ms" for _, r in latency.iterrows()) + "; p99 "
        + ", ".join(f"{r['mode']} {r['p99_ms']:.1f} ms" for _, r in latency.iterrows())
        + f" (target ≤ 100 ms: {'met' if worst_p99 <= 100 else 'not met'}).", "",
        "**Error over the replay** (5 GPUs, MAPE of the predictions as served before each observation): "
        + ", ".join(f"{m} {five.loc[m, 'served_mape_pct']:.2f}% (model alone {five.loc[m, 'uncorrected_mape_pct']:.2f}%)"
                    for m in five.index) + ".", "",
        "## Makespan and job completion times against the offline policies", "",
        "The offline rows are [`simulation.csv`](../simulation.csv) (out-of-fold predictions, the placement engine "
        "in-process); the replay's decisions are the service's (`/v1/pack`, the shipped models and the online offsets of "
        "the observations posted so far). Hours.", "",
    ]
    for mode in summary["mode"].unique():
        lines += [f"### {mode}", "", md_table(compare_t[compare_t["mode"] == mode].drop(columns="mode")), ""]
    lines += [
        "## Prediction error as the replay goes on", "",
        "Each replay's observed job rows in the order they were posted, in ten equal parts: `served_mape_pct`, the "
        "prediction the service answered before the observation (the shipped model with the online offsets of every "
        "earlier observation); `uncorrected_mape_pct`, the model alone. The shipped models were fitted on every measured "
        "set, these included: the model-alone column is an in-sample error, and the gap between the columns is what the "
        "observations add on top.", "",
        "![error over the replay](replay.png)", "",
    ]
    for (mode, gpus), g in error.groupby(["mode", "gpus"], sort=False):
        lines += [f"**{mode}, {gpus} GPUs**", "", md_table(g.drop(columns=["mode", "gpus"])), ""]
    lines += [
        f"## Decision latency at {SCALE_GPUS:,} GPUs", "",
        "A decision is every request of one event (the joint `pack` of the waiting jobs and, where the answer put some "
        "where the scheduler may not run them, one more `pack` of those jobs together), timed by the client over "
        "loopback. "
        "`full_*`: the decisions once every GPU was busy. A request sends the GPUs some waiting job may join, no more "
        f"of one running set than jobs asked about, at most {CANDIDATE_GPUS} (`replay.CANDIDATE_GPUS`), and as many empty "
        "GPUs as jobs asked about. Observations are posted outside the decision (each a committed, fsynced write). The "
        "server, the replay and other work share the two cores (load average before and after).", "",
        md_table(lat), "",
        f"The error at this scale, in ten parts, is under \"MODE, {SCALE_GPUS} GPUs\" above.", "",
        "## Reproduce", "",
        "```",
        f"PYTHONPATH=. python research/replay_study.py --scale-seconds {a.scale_seconds:g}",
        "# one replay by hand:",
        "colopred serve --store /tmp/replay-store &",
        "colopred simulate --server http://127.0.0.1:8000 --modes mps --gpus 5 --out /tmp/replay",
        f"colopred simulate --server http://127.0.0.1:8000 --modes mps --gpus {SCALE_GPUS} --replicate {COPIES} "
        f"--max-wall-s {a.scale_seconds:g}   # with a fresh store",
        "```", "",
    ]
    (out / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
