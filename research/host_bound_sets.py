#!/usr/bin/env python3
"""Sets files for re-measuring the labels of host-bound jobs (issue 23, item 5), one per device call.

A host-bound job's slowdown (profile busy fraction < ``research.noise.HOST_BOUND_BUSY``) moves from window to window
by a median 6.5% under time-slicing (``campaigns/h100-c14t``), so its label is made the mean of several windows of
one run: every set holding a host-bound job that the training campaigns measured under time-slicing is measured
again ``--repeat-frac 2`` (three windows, minutes apart, one machine, one run). A device call measures one chunk:
at most ``MAX_JOBS`` jobs (workers started once, opening and closing solo windows of each) and ``MAX_SETS`` sets
(3 x 30 collocated + 30 interleaved + 2 x 16 solo windows, about 150, what one 560 s call measured of default
windows in h100-c13). Chunks are filled greedily: the jobs of the set that keeps the most remaining sets inside the
chunk's jobs are added while at most ``MAX_JOBS`` (ties broken by a seeded draw), then the chunk takes up to
``MAX_SETS`` of the sets inside them in a seeded order.

  PYTHONPATH=. python research/host_bound_sets.py [--data datasets/h100] [--out scripts/sets] [--prefix h100-c16t]
      [--mode timeslice|mps]

With ``--not-relabelled`` only the sets no campaign under ``DATA/relabel/`` measured yet in that mode are chunked (the
sets of the campaigns measured after the first 23 chunks: ``--prefix h100-c22t``). ``--mode mps`` chunks the MPS sets
(a host-bound job's MPS slowdown moves a median 3.1% between windows of one run, mean 5.5%: ``reports/h100/noise``),
measured with ``--measure-mode mps``: ``--mode mps --prefix h100-c23m``.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.research.dataset import load_dataset  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402

MAX_JOBS = 16  # workers of one chunk (h100-c13 measured 16 jobs' 161 windows in one call)
MAX_SETS = 30  # sets of one chunk, each measured three times
SEED = 16


def host_bound_sets(data: Path, mode: str = "timeslice") -> list[tuple[str, ...]]:
    """The distinct sets of ``mode`` in the dataset's campaigns holding a job with ncu busy fraction < HOST_BOUND_BUSY."""
    ds = load_dataset(data, relabel=False)  # the campaigns' sets as measured (the relabel chunks were drawn from them)
    host = {n for n, p in ds.profiles.items() if p.busy_fraction < HOST_BOUND_BUSY}
    sets = {tuple(sorted(s.split("+"))) for s in ds.rows.loc[ds.rows["mode"] == mode, "set"].unique()}
    return sorted(s for s in sets if host.intersection(s))


def relabelled_sets(data: Path, mode: str = "timeslice") -> set[tuple[str, ...]]:
    """The sets the campaigns under ``data/relabel/`` measured in ``mode`` (any window)."""
    from colopred.measurement.harness import reader as R
    from colopred.research.dataset import RELABEL_DIR, campaign_dirs

    out: set[tuple[str, ...]] = set()
    for d in campaign_dirs(Path(data) / RELABEL_DIR):
        sl = R.slowdown_table(R.read_windows(d))
        sl = sl[sl["mode"] == mode]
        out |= {tuple(sorted(s.split("+"))) for s in sl["set"].unique()}
    return out


def chunks(sets: list[tuple[str, ...]], seed: int = SEED) -> list[list[tuple[str, ...]]]:
    rng = random.Random(seed)
    left = list(sets)
    out = []
    while left:
        jobs: set[str] = set()
        while True:
            fits = [s for s in left if len(jobs.union(s)) <= MAX_JOBS and not jobs.issuperset(s)]
            if not fits:
                break
            score = {s: sum(jobs.union(s).issuperset(t) for t in left) for s in fits}
            best = max(score.values())
            jobs |= set(rng.choice(sorted(s for s in fits if score[s] == best)))
        inside = sorted(s for s in left if jobs.issuperset(s))
        rng.shuffle(inside)
        chunk = sorted(inside[:MAX_SETS])
        out.append(chunk)
        left = [s for s in left if s not in chunk]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--out", default=str(ROOT / "scripts" / "sets"))
    ap.add_argument("--prefix", default="h100-c16t")
    ap.add_argument("--not-relabelled", action="store_true", help="leave out the sets measured under DATA/relabel/ already")
    ap.add_argument("--mode", choices=("timeslice", "mps"), default="timeslice", help="the sharing mode whose labels to re-measure")
    a = ap.parse_args()
    sets = host_bound_sets(Path(a.data), a.mode)
    if a.not_relabelled:
        done = relabelled_sets(Path(a.data), a.mode)
        sets = [s for s in sets if s not in done]
    parts = chunks(sets)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    for k, chunk in enumerate(parts, 1):
        name = f"{a.prefix}-{k:02d}"
        mode_name = "time-slicing" if a.mode == "timeslice" else "MPS"
        head = (f"# {name}: issue 23 item 5, host-bound {mode_name} labels as the mean of three windows of one run\n"
                f"# (measure --mode {a.mode} --repeat-frac 2). Chunk {k} of {len(parts)}: {len(chunk)} of the {len(sets)} sets\n"
                f"# with a host-bound job measured under {mode_name} in {Path(a.data).name}"
                f"{' (not yet relabelled)' if a.not_relabelled else ''}, "
                f"{len({j for s in chunk for j in s})} jobs.\n"
                f"# Generated at {rev} by: PYTHONPATH=. python research/host_bound_sets.py"
                f"{' --not-relabelled' if a.not_relabelled else ''}"
                f"{' --mode ' + a.mode if a.mode != 'timeslice' else ''}"
                f"{' --prefix ' + a.prefix if a.not_relabelled or a.mode != 'timeslice' else ''}\n")
        Path(a.out).mkdir(parents=True, exist_ok=True)
        path = Path(a.out) / f"{name}.txt"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(head + "".join("+".join(s) + "\n" for s in chunk))
        tmp.replace(path)
    sizes = [len(c) for c in parts]
    print(f"{len(sets)} sets in {len(parts)} chunks (sizes {min(sizes)}-{max(sizes)}) -> {a.out}/{a.prefix}-NN.txt")


if __name__ == "__main__":
    main()
