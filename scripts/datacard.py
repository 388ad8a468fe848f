#!/usr/bin/env python3
"""Figures and tables for datasets/h100/README.md (the data card).

  python scripts/datacard.py   # writes datasets/h100/{coverage,delta}.png, prints Markdown tables
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from colopred.harness.reader import read_windows, repeat_noise, set_table, slowdown_table, solo_noise  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h100"


def md(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


def main() -> None:
    w = read_windows(DATA / "campaigns")
    s = slowdown_table(w)
    st = set_table(w)
    profs = pd.DataFrame([JobProfile.from_json(p).__dict__ | {"file": p.name} for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))])
    print("## Windows\n")
    print(md(w.groupby(["campaign", "mode", "kind", "status"]).size().rename("windows").reset_index()))
    print("\n## Jobs (ncu profiles)\n")
    cov = s.groupby("job")["set"].nunique().rename("sets measured")
    t = profs[["name", "iteration_ms", "busy_fraction", "dram_util_pct", "achieved_occupancy_pct", "kernels_per_iteration", "peak_memory_gib"]]
    t = t.merge(cov, left_on="name", right_index=True, how="left").fillna({"sets measured": 0}).astype({"sets measured": int})
    print(md(t.round(3)))
    print("\n## Solo noise (CV of repeated solo windows, per job)\n")
    n = solo_noise(w)
    print(md(n.groupby(["campaign", "mode"])["cv"].agg(["count", "median", "max"]).reset_index()))
    print("\n## Repeat noise (|slowdown difference| between repeated collocated windows)\n")
    r = repeat_noise(s)
    print(md(r.groupby("mode")["abs_diff"].agg(["count", "median", "mean", "max"]).reset_index()))
    print("\n## δ, slowdown, throughput by mode and set size\n")
    g = s.groupby(["mode", "n_jobs"]).agg(slowdown_median=("slowdown", "median"))
    g2 = st.groupby(["mode", "n_jobs"]).agg(sets=("window_id", "count"), delta_median=("delta", "median"),
                                             throughput_median=("throughput", "median"),
                                             pays_off_pct=("throughput", lambda x: 100 * (x > 1).mean()))
    print(md(g2.join(g).reset_index()))
    # batch-size effect: resnet18 b64 fp32 vs b128 bf16, lstm b64 vs b256
    print("\n## Batch size (median δ of pairs containing the job)\n")
    pairs = st[st["n_jobs"] == 2]
    rows = []
    for job in ["resnet18-b64-fp32", "resnet18-b128-bf16", "lstm_lm-b64-fp32", "lstm_lm-b256-fp32"]:
        for mode in ("timeslice", "mps"):
            d = pairs[(pairs["mode"] == mode) & pairs["set"].str.contains(job, regex=False)]
            rows.append({"job": job, "mode": mode, "pairs": len(d), "delta_median": d["delta"].median()})
    print(md(pd.DataFrame(rows)))

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
