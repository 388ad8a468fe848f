"""Cluster simulation on a public trace: what colopred-guided packing does to makespan and job completion times.

**Decisions come from predictions, outcomes from measurements.** Jobs arrive as the trace says, each mapped to a
measured zoo job (:data:`GAVEL_TO_ZOO`); a job's length is the trace's iteration count times the zoo job's solo
iteration time. GPUs may only hold sets that were *measured* in the sharing mode (or one job alone), and a set's
jobs progress at their *measured* slowdowns (mean over its windows). The colopred policy chooses sets by
*predicted* slowdowns from models that never saw the set (out-of-fold predictions of a 5-fold split over sets,
``evaluation.out_of_sample``), so colopred is never graded by itself.

Policies (re-run at every arrival and completion; running jobs are never moved):

``one per GPU``   first come, first served, one job per GPU.
``random``        first come, first served; a job that finds no free GPU joins a random GPU where the resulting
                  set was measured (none: it waits).
``utilisation``   as Lucid and Gandiva pack: a job joins the GPU of least summed solo GPU utilisation (busy
                  fraction) if the sum with it stays under ``UTILISATION_THRESHOLD``.
``colopred``      :func:`colopred.runtime.placement.place` over the waiting jobs and the running ones pinned to
                  their GPUs, maximising predicted normalised throughput; sets predicted to do less than one job
                  alone (throughput < 1) are not used.

Single-GPU jobs of the trace only (multi-GPU jobs would need gang scheduling, which none of the policies models).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io import read_text_input
from ..profile import JobProfile
from ..runtime.placement import Gpu, place

# Gavel's job types (Philly-derived traces, stanford-futuredata/gavel, MIT licence) -> measured zoo jobs of the
# same kind and a comparable batch. CycleGAN (image-to-image convolutional network) -> U-Net; A3C (small
# convolutional policy network, host-bound) -> MobileNetV2 b16 (busy 0.43).
GAVEL_TO_ZOO = {
    "ResNet-18 (batch size 16)": "resnet18-b16-fp32", "ResNet-18 (batch size 32)": "resnet18-b16-fp32",
    "ResNet-18 (batch size 64)": "resnet18-b64-fp32", "ResNet-18 (batch size 128)": "resnet18-b128-bf16",
    "ResNet-18 (batch size 256)": "resnet18-b256-fp32",
    "ResNet-50 (batch size 16)": "resnet50-b32-bf16", "ResNet-50 (batch size 32)": "resnet50-b32-bf16",
    "ResNet-50 (batch size 64)": "resnet50-b64-fp32", "ResNet-50 (batch size 128)": "resnet50-b128-bf16",
    "Transformer (batch size 16)": "transformer_seq2seq-b32-bf16", "Transformer (batch size 32)": "transformer_seq2seq-b32-bf16",
    "Transformer (batch size 64)": "transformer_seq2seq-b64-fp32", "Transformer (batch size 128)": "transformer_seq2seq-b128-fp32",
    "Transformer (batch size 256)": "transformer_seq2seq-b128-fp32",
    "LM (batch size 5)": "lstm_lm-b16-fp32", "LM (batch size 10)": "lstm_lm-b16-fp32", "LM (batch size 20)": "lstm_lm-b16-fp32",
    "LM (batch size 40)": "lstm_lm-b64-fp32", "LM (batch size 80)": "lstm_lm-b64-fp32",
    "Recommendation (batch size 512)": "dlrm-b512-fp32", "Recommendation (batch size 1024)": "wide_deep-b1024-fp32",
    "Recommendation (batch size 2048)": "dlrm-b2048-fp32", "Recommendation (batch size 4096)": "dlrm-b2048-fp32",
    "Recommendation (batch size 8192)": "wide_deep-b8192-bf16",
    "CycleGAN": "unet-b8-fp32", "A3C": "mobilenet_v2-b16-fp32",
}
UTILISATION_THRESHOLD = 1.0
"""The utilisation policy packs while the summed solo busy fractions stay at or under this: the GPU is not
oversubscribed on average (Gandiva packs below full utilisation; Lucid's threshold plays the same part)."""
POLICIES = ("one per GPU", "random", "utilisation", "colopred")
COLOPRED_WINDOW = 16
"""The colopred policy places the first this many waiting jobs at each decision (the rest wait their turn): the
exact solver's size, so every decision is optimal under the predictions."""


@dataclass(frozen=True)
class TraceJob:
    job_id: int
    kind: str
    zoo_job: str
    arrival_s: float
    iterations: int


def read_gavel_trace(path: str | Path, max_jobs: int | None = None) -> list[TraceJob]:
    """Single-GPU jobs of a Gavel ``msr`` trace (tab-separated: type, command, steps flag, data flag, total steps,
    arrival time in s, GPUs), mapped to zoo jobs; types without a mapping are refused."""
    path = Path(path)
    jobs = []
    lines = read_text_input(path, "Gavel trace").splitlines()
    for n, line in enumerate(lines, 1):
        cols = line.split("\t")
        if len(cols) != 7:
            raise InputError(path, f"line {n}: expected 7 tab-separated columns (Gavel's msr trace format), found {len(cols)}")
        kind, steps, arrival, gpus = cols[0], cols[4], cols[5], cols[6]
        if kind not in GAVEL_TO_ZOO:
            raise InputError(path, f"line {n}: job type {kind!r} has no zoo job mapped (colopred.research.simulation.GAVEL_TO_ZOO)")
        if int(gpus) != 1:
            continue
        jobs.append(TraceJob(len(jobs), kind, GAVEL_TO_ZOO[kind], float(arrival), int(steps)))
        if max_jobs is not None and len(jobs) == max_jobs:
            break
    return jobs


class MeasuredSets:
    """Measured slowdowns of one mode (mean over a set's windows) and colopred's out-of-fold predictions for them."""

    def __init__(self, rows: pd.DataFrame, predicted: np.ndarray | None = None):
        """``predicted``: out-of-fold predictions of ``rows`` (None: the measurements only, as a replay through the
        service needs, whose predictions are the service's)."""
        d = rows.assign(pred=np.zeros(len(rows)) if predicted is None else predicted).dropna(subset=["pred"])
        g = d.groupby(["set", "job"])[["slowdown", "pred"]].mean()
        self.measured: dict[frozenset, dict[str, float]] = {}
        self.predicted: dict[frozenset, dict[str, float]] = {}
        for (s, job), r in g.iterrows():
            key = frozenset(s.split("+"))
            self.measured.setdefault(key, {})[job] = float(r["slowdown"])
            self.predicted.setdefault(key, {})[job] = float(r["pred"])

    def has(self, jobs: Sequence[str]) -> bool:
        return len(jobs) <= 1 or frozenset(jobs) in self.measured

    def speeds(self, ids: Sequence[int], zoo_job_of: Callable[[int], str]) -> dict[int, float]:
        """Progress per second of each of the trace jobs ``ids`` sharing one GPU: 1 / the measured slowdown of its zoo
        job (``zoo_job_of``) in their set; 1 alone."""
        if len(ids) <= 1:
            return dict.fromkeys(ids, 1.0)
        meas = self.measured[frozenset(zoo_job_of(i) for i in ids)]
        return {i: 1.0 / meas[zoo_job_of(i)] for i in ids}


class _OutOfFoldScorer:
    """The placement engine's scorer: out-of-fold predicted slowdowns of measured sets of zoo jobs; a set that
    was not measured, or that is predicted to do less than one job alone, is forbidden (NaN)."""

    def __init__(self, sets: MeasuredSets):
        self.sets = sets

    def slowdown_index(self, profiles: Sequence[JobProfile], idx: np.ndarray) -> np.ndarray:
        out = np.full(idx.shape, np.nan)
        for r, row in enumerate(idx):
            members = [profiles[i].meta["zoo_job"] for i in row if i >= 0]
            pred = self.sets.predicted.get(frozenset(members))
            if pred is None or len(set(members)) != len(members):
                continue
            s = [pred[m] for m in members]
            if sum(1 / x for x in s) >= 1.0:
                out[r, row >= 0] = s
        return out


def advance(rates: dict[int, float], remaining: dict[int, float], now: float, t_arrive: float) -> float:
    """The time of the trace's next event after ``now``: the first completion at the jobs' current ``rates`` (work per
    second) or the next arrival at ``t_arrive``, whichever comes first; each running job's ``remaining`` work is
    reduced by what it did until then. ``RuntimeError`` where no event can come."""
    t_done = min((now + remaining[i] / v for i, v in rates.items()), default=math.inf)
    t = min(t_done, t_arrive)
    if t == math.inf:
        raise RuntimeError("jobs wait that no GPU can ever take")
    dt = t - now
    for i, v in rates.items():
        remaining[i] -= v * dt
    return t


def simulate(trace: Sequence[TraceJob], profiles: dict[str, JobProfile], sets: MeasuredSets, n_gpus: int, policy: str,
             max_per_gpu: int = 2, seed: int = 0) -> pd.DataFrame:
    """One run: a row per job with arrival, start and completion (s), its GPU and its co-runners over time."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
    rng = random.Random(seed)
    solo_s = {j.job_id: j.iterations * profiles[j.zoo_job].iteration_ms / 1e3 for j in trace}
    remaining = dict(solo_s)  # solo-seconds of work left
    gpus: list[list[int]] = [[] for _ in range(n_gpus)]
    queue: list[int] = []
    by_id = {j.job_id: j for j in trace}
    start, finish, where = {}, {}, {}
    busy_gpu_s = 0.0
    arrivals = sorted(trace, key=lambda j: (j.arrival_s, j.job_id))
    nxt, now = 0, 0.0

    def zoo(ids):
        return [by_id[i].zoo_job for i in ids]

    def speed(g: int) -> dict[int, float]:
        """Progress per second of each job on GPU g: 1 / measured slowdown (alone: 1)."""
        return sets.speeds(gpus[g], lambda i: by_id[i].zoo_job)

    def admit(i: int, g: int) -> None:
        gpus[g].append(i)
        start[i] = now
        where[i] = g

    def can_join(i: int, g: int) -> bool:
        members = zoo(gpus[g]) + [by_id[i].zoo_job]
        return len(members) <= max_per_gpu and len(set(members)) == len(members) and sets.has(members)

    def decide() -> None:
        nonlocal queue
        if policy == "colopred":
            if not queue:
                return
            ids = [i for g in gpus for i in g] + queue[:COLOPRED_WINDOW]
            job_profiles = [profiles[by_id[i].zoo_job].with_(name=str(i), meta={"zoo_job": by_id[i].zoo_job}) for i in ids]
            gpu_spec = [Gpu(f"g{g}", running=tuple(str(i) for i in gpus[g])) for g in range(n_gpus)]
            pl = place(_OutOfFoldScorer(sets), job_profiles, gpu_spec, max_per_gpu=max_per_gpu, max_slowdown=None,
                       min_throughput=None)  # the study's placements, as its reports measured them
            for g, names in enumerate(pl.gpus):
                for name in names:
                    i = int(name)
                    if i in queue:
                        admit(i, g)
            queue = [i for i in queue if i not in where]
            return
        waiting = []
        for i in queue:
            free = [g for g in range(n_gpus) if not gpus[g]]
            if free:
                admit(i, free[0])
                continue
            if policy == "one per GPU":
                waiting.append(i)
                continue
            options = [g for g in range(n_gpus) if can_join(i, g)]
            if policy == "utilisation":
                load = {g: sum(min(1.0, profiles[by_id[k].zoo_job].busy_fraction) for k in gpus[g]) for g in options}
                own = min(1.0, profiles[by_id[i].zoo_job].busy_fraction)
                options = sorted((g for g in options if load[g] + own <= UTILISATION_THRESHOLD + 1e-12), key=lambda g: load[g])
                options = options[:1]
            if options:
                admit(i, options[0] if policy == "utilisation" else rng.choice(options))
            else:
                waiting.append(i)
        queue = waiting

    while nxt < len(arrivals) or queue or any(gpus):
        # time of the next completion at the current speeds
        rates = {i: v for g in range(n_gpus) for i, v in speed(g).items()}
        t_arrive = arrivals[nxt].arrival_s if nxt < len(arrivals) else math.inf
        t = advance(rates, remaining, now, t_arrive)
        busy_gpu_s += (t - now) * sum(1 for g in gpus if g)
        now = t
        for g in range(n_gpus):
            for i in [i for i in gpus[g] if remaining[i] <= 1e-9 * solo_s[i]]:
                gpus[g].remove(i)
                finish[i] = now
        while nxt < len(arrivals) and arrivals[nxt].arrival_s <= now:
            queue.append(arrivals[nxt].job_id)
            nxt += 1
        decide()
    rows = [{"job_id": j.job_id, "kind": j.kind, "zoo_job": j.zoo_job, "arrival_s": j.arrival_s, "start_s": start[j.job_id],
             "finish_s": finish[j.job_id], "solo_s": solo_s[j.job_id], "gpu": where[j.job_id]} for j in trace]
    out = pd.DataFrame(rows)
    out.attrs["busy_gpu_s"] = busy_gpu_s
    return out


def summarize(run: pd.DataFrame) -> dict[str, float]:
    """Makespan, mean and p95 job completion time, mean queueing delay (hours) and GPU-hours of one run."""
    jct = run["finish_s"] - run["arrival_s"]
    return {"makespan_h": (run["finish_s"].max() - run["arrival_s"].min()) / 3600, "mean_jct_h": jct.mean() / 3600,
            "p95_jct_h": float(np.percentile(jct, 95)) / 3600, "mean_queueing_h": (run["start_s"] - run["arrival_s"]).mean() / 3600,
            "gpu_hours": run.attrs["busy_gpu_s"] / 3600, "mean_slowdown_vs_solo": float(((run["finish_s"] - run["start_s"]) / run["solo_s"]).mean())}


def compare_policies(trace: Sequence[TraceJob], profiles: dict[str, JobProfile], sets_by_mode: dict[str, MeasuredSets], n_gpus: int,
                     max_per_gpu: int = 2, log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """:func:`summarize` of every policy in every mode."""
    rows = []
    for mode, sets in sets_by_mode.items():
        for policy in POLICIES:
            run = simulate(trace, profiles, sets, n_gpus, policy, max_per_gpu=max_per_gpu)
            rows.append({"mode": mode, "policy": policy, **summarize(run)})
            log(f"  {mode} {policy}: makespan {rows[-1]['makespan_h']:.1f} h, mean JCT {rows[-1]['mean_jct_h']:.1f} h")
    return pd.DataFrame(rows)


def run_study(data_dir: str | Path, trace_path: str | Path, gpu_counts: Sequence[int], out_dir: str | Path | None = None,
              modes: Sequence[str] = ("timeslice", "mps"), max_per_gpu: int = 2,
              log: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """Every policy, mode and cluster size on one trace; with ``out_dir``, ``simulation.md``, ``simulation.csv`` and a plot."""
    from .dataset import load_dataset
    from .evaluation import out_of_sample

    trace = read_gavel_trace(trace_path)
    if not trace:
        raise InputError(trace_path, "no single-GPU job in the trace")
    log(f"reading {data_dir}")
    ds = load_dataset(data_dir)
    missing = sorted({j.zoo_job for j in trace} - set(ds.profiles))
    if missing:
        raise InputError(data_dir, f"no profile of the mapped zoo job(s) {', '.join(missing)}")
    sets_by_mode = {}
    for mode in modes:
        df = ds.for_mode(mode)
        log(f"{mode}: out-of-fold predictions of {df['window_id'].nunique()} measured sets")
        sets_by_mode[mode] = MeasuredSets(df, out_of_sample(df, "random"))
    tables = []
    for n in gpu_counts:
        log(f"{n} GPUs")
        tables.append(compare_policies(trace, ds.profiles, sets_by_mode, n, max_per_gpu, log).assign(gpus=n))
    table = pd.concat(tables, ignore_index=True)
    if out_dir is not None:
        write_simulation_report(Path(out_dir), table, trace, trace_path, ds, sets_by_mode, max_per_gpu)
    return table


def write_simulation_report(out: Path, table: pd.DataFrame, trace: Sequence[TraceJob], trace_path, ds, sets_by_mode, max_per_gpu: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import md_table

    out.mkdir(parents=True, exist_ok=True)
    base = table[table["policy"] == "one per GPU"].set_index(["mode", "gpus"])
    t = table.copy()
    for col in ("makespan_h", "mean_jct_h", "p95_jct_h"):
        t[col.replace("_h", "_vs_one_per_gpu_pct")] = [100 * (r[col] / base.loc[(r["mode"], r["gpus"]), col] - 1) for _, r in t.iterrows()]
    t.to_csv(out / "simulation.csv", index=False)
    modes = list(t["mode"].unique())
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 3.8), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        d = t[t["mode"] == mode]
        x = np.arange(d["gpus"].nunique())
        for k, policy in enumerate(POLICIES):
            e = d[d["policy"] == policy].sort_values("gpus")
            ax.bar(x + (k - 1.5) * 0.2, e["mean_jct_h"], 0.2, label=policy)
        ax.set_xticks(x, [f"{g} GPUs" for g in sorted(d["gpus"].unique())])
        ax.set(ylabel="mean job completion time (h)", title=f"{mode}: measured outcomes")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "simulation.png", dpi=110)
    plt.close(fig)
    solo_h = sum(j.iterations * ds.profiles[j.zoo_job].iteration_ms for j in trace) / 3.6e6
    span_h = (max(j.arrival_s for j in trace) - min(j.arrival_s for j in trace)) / 3600
    kinds = pd.Series([j.kind for j in trace]).value_counts()
    cover = {m: len(s.measured) for m, s in sets_by_mode.items()}
    lines = [
        "# Cluster simulation: colopred-guided packing on a Philly-derived trace", "",
        f"Trace: `{Path(trace_path).name}` from Gavel's `scheduler/traces/msr/seed=0/` (stanford-futuredata/gavel, MIT "
        f"licence, `datasets/traces/gavel-msr/`): {len(trace)} single-GPU jobs of {len(kinds)} types arriving over "
        f"{span_h / 24:.0f} days; {solo_h:,.0f} GPU-hours of work alone on the H100 (each job's iterations times its "
        f"zoo job's solo iteration time), a mean demand of {solo_h / span_h:.1f} GPUs.", "",
        "**Decisions come from predictions, outcomes from measurements.** A GPU may hold one job, or a set that was "
        f"measured in the mode (at most {max_per_gpu} jobs); the jobs of a set progress at their measured slowdowns "
        "(mean over the set's windows). The colopred policy picks sets by out-of-fold predicted slowdowns (5-fold "
        "over sets: the model that predicts a set never saw it), re-running the placement engine at each arrival and "
        "completion over the first 16 waiting jobs, running jobs pinned; it never uses a set predicted to do less "
        "than one job alone. The other policies know no slowdowns: `random` joins a random GPU whose resulting set was "
        "measured, `utilisation` (as Lucid and Gandiva) the least-utilised GPU while the summed solo busy fractions "
        "stay ≤ 1. Every policy serves the queue first come, first served, with backfilling. Measured sets among the "
        f"trace's zoo jobs: {', '.join(f'{m} {n}' for m, n in cover.items())} (any size); all of them are measured "
        "sets of the shipped dataset, no predicted speed stands in for a measured one.", "",
        "Job types mapped to zoo jobs (`colopred.research.simulation.GAVEL_TO_ZOO`): "
        + "; ".join(f"{k} → {GAVEL_TO_ZOO[k]} ({n})" for k, n in kinds.items()) + ".", "",
    ]
    for mode in modes:
        d = t[t["mode"] == mode][["gpus", "policy", "makespan_h", "mean_jct_h", "p95_jct_h", "mean_queueing_h", "gpu_hours",
                                  "mean_slowdown_vs_solo", "makespan_vs_one_per_gpu_pct", "mean_jct_vs_one_per_gpu_pct"]]
        lines += [f"## {mode}", "", md_table(d), ""]
    lines += ["![mean job completion time](simulation.png)", ""]
    path = out / "simulation.md"
    path.write_text("\n".join(lines) + "\n")
    return path
