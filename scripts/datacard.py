#!/usr/bin/env python3
"""Figures and tables for datasets/h100/README.md (the data card).

  python scripts/datacard.py   # writes datasets/h100/{coverage,delta,batch}.png and the tables between
                               # <!-- datacard:NAME --> markers of datasets/h100/README.md
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from colopred.measurement.harness.reader import (  # noqa: E402
    machine_key,
    read_windows,
    remeasured_sets,
    repeat_noise,
    segment_key,
    set_table,
    slowdown_table,
    solo_noise,
)
from colopred.measurement.zoo.registry import JobSpec  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402
from colopred.research.dataset import arch_of  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h100"


def md(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


def load() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The shipped records, read once: (windows, per-job slowdowns, per-set table, ncu profiles)."""
    w = read_windows(DATA / "campaigns")
    profs = pd.DataFrame([JobProfile.from_json(p).__dict__ | {"file": p.name} for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))])
    return w, slowdown_table(w), set_table(w), profs


def batch_table(ok_sets: pd.DataFrame, profs: pd.DataFrame) -> pd.DataFrame:
    """For every architecture profiled at several batch sizes: the median δ and normalised throughput
    of the measured pairs each of its jobs is in, per mode."""
    pairs = ok_sets[ok_sets["n_jobs"] == 2]
    members = pairs["set"].str.split("+")
    archs = profs["name"].map(arch_of).value_counts()
    rows = []
    for name in sorted(profs["name"], key=lambda n: (arch_of(n), JobSpec.parse(n).batch, n)):
        if archs[arch_of(name)] < 2:
            continue
        row = {"job": name}
        for mode in ("timeslice", "mps"):
            d = pairs[(pairs["mode"] == mode) & members.map(lambda m: name in m)]
            row |= {f"{mode} pairs": len(d), f"{mode} δ median": d["delta"].median(),
                    f"{mode} throughput median": d["throughput"].median()}
        rows.append(row)
    return pd.DataFrame(rows)


def batch_trend(ok_sets: pd.DataFrame, profs: pd.DataFrame) -> pd.DataFrame:
    """:func:`batch_table` without the input-bound ``-loader`` jobs, with each job's architecture and batch size."""
    bt = batch_table(ok_sets, profs)
    bt = bt[~bt["job"].str.endswith("-loader")].copy()
    bt["arch"] = bt["job"].map(arch_of)
    bt["batch"] = bt["job"].map(lambda n: JobSpec.parse(n).batch)
    return bt


def first_look(s: pd.DataFrame, ok: pd.DataFrame, profs: pd.DataFrame) -> str:
    """The figures behind the card's "first look" at Tabrizian's observations, recomputed from the records:
    per architecture, the median normalised throughput of the pairs holding each batch size (smallest to
    largest); sets of jobs that each leave the GPU partly idle (busy fraction < 0.9), pairs against triples;
    and, per job, how often it is slowed more under MPS than under time-slicing in the same set."""
    bt = batch_trend(ok, profs)
    rows = []
    for arch, g in bt.groupby("arch"):
        if len(g) < 2:
            continue
        g = g.sort_values("batch")
        row = {"architecture": arch, "batch sizes": " → ".join(str(b) for b in g["batch"])}
        for mode in ("timeslice", "mps"):
            thr = g[f"{mode} throughput median"]
            row[f"{mode} throughput"] = " → ".join(f"{v:.2f}" for v in thr)
            row[f"{mode}: largest < smallest"] = "yes" if thr.iloc[-1] < thr.iloc[0] else "no"
        rows.append(row)
    batch = pd.DataFrame(rows)
    busy = profs.set_index("name")["busy_fraction"]
    idle = ok[ok["set"].map(lambda x: all(busy.get(j, 1.0) < 0.9 for j in x.split("+")))]
    idle_t = pd.concat([
        ok.groupby(["mode", "n_jobs"]).agg(sets=("set", "nunique"), throughput_median=("throughput", "median")).assign(jobs="all"),
        idle.groupby(["mode", "n_jobs"]).agg(sets=("set", "nunique"), throughput_median=("throughput", "median")).assign(jobs="busy < 0.9 each"),
    ]).reset_index()[["jobs", "mode", "n_jobs", "sets", "throughput_median"]]
    per = s.groupby(["set", "job", "mode"])["slowdown"].median().unstack("mode").dropna()
    per["mps_worse"] = per["mps"] > per["timeslice"]
    jobs = per.groupby("job").agg(sets=("mps_worse", "size"), mps_worse_pct=("mps_worse", lambda x: 100 * x.mean()),
                                  mps_slowdown_median=("mps", "median"), timeslice_slowdown_median=("timeslice", "median"))
    jobs = jobs.sort_values("mps_worse_pct", ascending=False).reset_index()
    lines = [md(batch), "",
             f"Largest batch below smallest: {(batch['timeslice: largest < smallest'] == 'yes').sum()} of {len(batch)} "
             f"architectures (time-slicing), {(batch['mps: largest < smallest'] == 'yes').sum()} of {len(batch)} (MPS).", "",
             md(idle_t), "",
             f"(set, job) slowdowns measured in both modes: {len(per)}; slowed more under MPS than under time-slicing: "
             f"{int(per['mps_worse'].sum())} ({100 * per['mps_worse'].mean():.0f}%). Jobs slowed more under MPS in most of their sets:", "",
             md(jobs[jobs["mps_worse_pct"] > 50].round(3))]
    return "\n".join(lines)


def sections(w: pd.DataFrame, s: pd.DataFrame, st: pd.DataFrame, profs: pd.DataFrame) -> dict[str, str]:
    """The generated Markdown blocks of the data card, by marker name (arguments: :func:`load`)."""
    out: dict[str, str] = {}
    ok = st[st["status"] == "ok"]
    rows = []
    again = remeasured_sets(st)
    for mode in ("timeslice", "mps"):
        d = ok[ok["mode"] == mode]
        infeasible = st[(st["mode"] == mode) & (st["status"] == "infeasible")]["set"].nunique()
        for k, target in ((2, 400), (3, 200)):
            a = again[(again["mode"] == mode) & (again["n_jobs"] == k)]
            rows.append({"mode": mode, "set size": k, "distinct sets measured": d[d["n_jobs"] == k]["set"].nunique(),
                         "target": target, "infeasible sets recorded": infeasible if k == 2 else "",
                         "measured again on another machine or lease": int(a["another_lease"].sum()),
                         "of which on another day": int((a["another_lease"] & a["another_day"]).sum())})
    out["counts"] = md(pd.DataFrame(rows))
    out["windows"] = md(w.groupby(["campaign", "mode", "kind", "status"]).size().rename("windows").reset_index())
    cov = s.groupby("job")["set"].nunique().rename("sets measured")
    t = profs[["name", "iteration_ms", "busy_fraction", "dram_util_pct", "achieved_occupancy_pct", "kernels_per_iteration", "peak_memory_gib"]]
    t = t.merge(cov, left_on="name", right_index=True, how="left").fillna({"sets measured": 0}).astype({"sets measured": int})
    out["jobs"] = md(t.round(3))
    n = solo_noise(w)
    out["solo_noise"] = md(n.groupby(["campaign", "mode"])["cv"].agg(["count", "median", "max"]).reset_index())
    r = repeat_noise(s)
    # Which repeats are on another machine or lease: the (mode, set, job) was measured on more than one GPU
    # (reader.machine_key: its UUID, or before harness 1.2 its segment); on one GPU but in more than one
    # segment (a resumed run, another campaign), or within one segment.
    keyed = s.assign(seg_key=segment_key(s), machine=machine_key(s)).groupby(["mode", "set", "job"])
    r = r.merge(keyed["seg_key"].nunique().rename("segments"), left_on=["mode", "set", "job"], right_index=True)
    r = r.merge(keyed["machine"].nunique().rename("machines"), left_on=["mode", "set", "job"], right_index=True)
    r["repeat"] = [("another machine or lease" if m > 1 else "same machine, another run or campaign" if g > 1 else "same segment")
                   for m, g in zip(r["machines"], r["segments"])]
    r["rel_diff_pct"] = 100 * (r["max"] / r["min"] - 1)
    out["repeat_noise"] = md(r.groupby(["mode", "repeat"]).agg(
        count=("abs_diff", "count"), median_abs_diff=("abs_diff", "median"), mean_abs_diff=("abs_diff", "mean"),
        median_rel_diff_pct=("rel_diff_pct", "median"), max_abs_diff=("abs_diff", "max")).reset_index())
    g = s.groupby(["mode", "n_jobs"]).agg(slowdown_median=("slowdown", "median"))
    g2 = ok.groupby(["mode", "n_jobs"]).agg(windows=("window_id", "count"), sets=("set", "nunique"), delta_median=("delta", "median"),
                                             throughput_median=("throughput", "median"),
                                             pays_off_pct=("throughput", lambda x: 100 * (x > 1).mean()))
    out["by_size"] = md(g2.join(g).reset_index())
    out["batch"] = md(batch_table(ok, profs))
    out["first_look"] = first_look(s, ok, profs)
    return out


def write_sections(readme: Path, blocks: dict[str, str]) -> list[str]:
    """Replace each ``<!-- datacard:NAME -->`` ... ``<!-- /datacard:NAME -->`` block; returns the names not found."""
    text = readme.read_text()
    missing = []
    for name, body in blocks.items():
        a, b = f"<!-- datacard:{name} -->", f"<!-- /datacard:{name} -->"
        i, j = text.find(a), text.find(b)
        if i < 0 or j < i:
            missing.append(name)
            continue
        text = text[: i + len(a)] + "\n" + body + "\n" + text[j:]
    tmp = readme.with_name(readme.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(readme)
    return missing


def main() -> None:
    w, s, st, profs = load()
    blocks = sections(w, s, st, profs)
    missing = write_sections(DATA / "README.md", blocks)
    for name in missing:
        print(f"## {name} (no marker in README.md)\n\n{blocks[name]}\n")

    # Figures
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    jobs = sorted(set(s["job"]) | {j for x in st["set"].unique() for j in x.split("+")})
    mat = pd.DataFrame(0, index=jobs, columns=jobs)
    for sset in st[st["status"] == "ok"]["set"].unique():
        m = sset.split("+")
        for a in m:
            for b in m:
                if a != b:
                    mat.loc[a, b] += 1
    axes[0].imshow(mat.to_numpy(), cmap="Blues")
    axes[0].set_xticks(range(len(jobs)), jobs, rotation=90, fontsize=7)
    axes[0].set_yticks(range(len(jobs)), jobs, fontsize=7)
    axes[0].set_title("coverage: sets in which two jobs ran together")
    axes[1].scatter(profs["dram_util_pct"] * profs["busy_fraction"].clip(upper=1), profs["busy_fraction"], s=30)
    for p in profs.itertuples():
        axes[1].annotate(p.name, (p.dram_util_pct * min(p.busy_fraction, 1), p.busy_fraction), fontsize=6)
    axes[1].set(xlabel="DRAM demand M x busy (%)", ylabel="busy fraction", title="jobs: memory-bound vs compute-busy")
    fig.tight_layout()
    fig.savefig(DATA / "coverage.png", dpi=110)
    plt.close(fig)
    bt = batch_trend(st[st["status"] == "ok"], profs)
    colors = {a: plt.cm.tab20((2 * i) % 20 + (2 * i) // 20) for i, a in enumerate(sorted(bt["arch"].unique()))}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, mode in zip(axes, ("timeslice", "mps")):
        for arch, g in bt.groupby("arch"):
            g = g.dropna(subset=[f"{mode} throughput median"]).sort_values("batch")
            if len(g) >= 2:
                ax.plot(g["batch"], g[f"{mode} throughput median"], marker="o", color=colors[arch], label=arch)
        ax.axhline(1, color="k", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="batch size of the job", title=f"{mode}: median normalised throughput of its pairs")
    axes[0].set_ylabel("normalised throughput Σ t/t′")
    handles = [plt.Line2D([], [], color=c, marker="o", label=a) for a, c in colors.items()]
    fig.legend(handles=handles, fontsize=8, loc="upper center", ncol=6)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    fig.savefig(DATA / "batch.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    data, labels = [], []
    for mode in ("timeslice", "mps"):
        for k in (2, 3):
            d = st[(st["mode"] == mode) & (st["n_jobs"] == k)]["delta"].dropna()
            data.append(d)
            labels.append(f"{mode}\n{k} jobs")
    ax.boxplot(data, tick_labels=labels)
    ax.axhline(1, color="k", ls="--", lw=1)
    ax.set(ylabel="δ (eq. 4.1)", title="Collocation speedup δ on the H100")
    fig.tight_layout()
    fig.savefig(DATA / "delta.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
