#!/usr/bin/env python3
"""One device-machine session of colopred's GPU work, in one command, within a time budget.

Steps (``--steps``, comma separated, run in this order):
  env       GPU, driver, CUDA, torch, ncu versions -> env.json
  smoke     a 2-job campaign in both modes through `colopred measure` (harness check)
  gpm       `colopred profile nvml` for every job in --jobs (+ --extra-gpm jobs); --gpm-no-timeline: counters only
  ncucost   ncu cost of replay modes and metric sets on --cost-job, and whether features change
  ncu       `colopred profile run` for the jobs in --jobs, cheapest faithful variant, while time lasts
  timeline  `colopred profile timeline` for every job in --jobs (solo host/GPU timeline,
            torch.profiler), one process each; --keep-trace-jobs also keep torch's raw trace
  parkcheck solo windows of --parkcheck-jobs with idle workers parked and resident, alternating
            (ABBA over --parkcheck-rounds), on one machine -> parkcheck.csv (reader.park_effect)
  pincheck  the same time-slicing pairs with and without `measure --pin-cpus`, alternating (ABBA over
            --pincheck-rounds), on one machine: does pinning each worker to its own CPUs steady launch-bound jobs?
  measure   `colopred measure` campaigns (--campaigns DIR=SETS,... or --campaign-dir), each resumed if it
            exists, in order, stopped at the budget (or --campaign-budget-s each); --gpus all spreads each over
            the node's GPUs (one shard per GPU), except those named in --one-gpu-campaigns (GPU 0 alone)
  bygpu     `colopred table --by-gpu` of every campaign measured: windows per minute per GPU (and against the
            one-GPU campaigns), cross-GPU agreement -> bygpu.txt, cross_gpu.csv
  ownjob    the README's sequence for a training loop that is not in the zoo (examples/my_train.py):
            profile it, measure it against --ownjob-partners (a jobs file), train on datasets/h100 plus
            it, predict its pairs -> ownjob/ (dataset, model, predict-*.json, measured.csv)

Everything is written under --out (default $OUT) as one tarball plus a summary, since
the device tool returns at most 8 files.

  PYTHONPATH=. python3 scripts/gpu_session.py --steps env,smoke,gpm,ncucost,ncu --budget-s 480

A campaign over all GPUs of the node beside the same sets on GPU 0 alone (windows per minute, cross-GPU agreement):

  PYTHONPATH=. python3 scripts/gpu_session.py --steps env,measure,bygpu --gpus all --one-gpu-campaigns one \
      --campaigns runs/one=scripts/sets/h100-c1-repeat.txt,runs/multi=scripts/sets/h100-c1-repeat.txt \
      --measure-mode mps --cross-gpu-frac 0.25 --campaign-budget-s 240 --budget-s 560
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

T0 = time.monotonic()
PY = sys.executable
MIN_CAMPAIGN_S = 150
"""Least budget left to start a campaign: the workers of a 16-job chunk take 60-90 s to start (measure logs of
datasets/h100/relabel), so a campaign started with less measures nothing."""
CHILDREN: set[int] = set()  # process groups of running steps (stopped on SIGTERM)


def elapsed() -> float:
    return time.monotonic() - T0


def log(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


def sh(cmd: list[str], timeout: float, log_path: Path | None = None, env=None) -> tuple[int, float]:
    """Run a command, output to log_path; returns (rc, seconds). rc 124 on timeout (SIGTERM then SIGKILL)."""
    t = time.monotonic()
    out = open(log_path, "a") if log_path else subprocess.DEVNULL
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env or os.environ.copy(), start_new_session=True)
    CHILDREN.add(p.pid)
    try:
        rc = p.wait(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        rc = 124
    CHILDREN.discard(p.pid)
    if log_path:
        out.close()
    return rc, time.monotonic() - t


def step_env(work: Path, a) -> None:
    info = {}
    for key, cmd in {
        "nvidia_smi": ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,compute_mode", "--format=csv"],
        "ncu": ["ncu", "--version"],
        "mps": ["which", "nvidia-cuda-mps-control"],
    }.items():
        try:
            info[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception as e:  # noqa: BLE001
            info[key] = f"failed: {e}"
    import torch

    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["python"] = sys.version.split()[0]
    info["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    (work / "env.json").write_text(json.dumps(info, indent=1))
    log(f"env: {info['device']}, torch {info['torch']}, cuda {info['cuda']}")


def colopred(*args: str) -> list[str]:
    return [PY, "-m", "colopred", *args]


def step_smoke(work: Path, a) -> None:
    d = work / "smoke"
    rc, s = sh(colopred("measure", "--jobs", "resnet18-b64-fp32,lstm_lm-b64-fp32", "--sets", "pairs", "--mode", "both",
                        "--out", str(d), "--repeat-frac", "0", "--min-iters", "8", "--no-progress", "-v"),
               timeout=min(150, a.budget_s - elapsed()), log_path=work / "smoke.log")
    log(f"smoke campaign rc={rc} in {s:.0f} s")


def step_gpm(work: Path, a) -> None:
    pdir = work / "profiles"
    pdir.mkdir(exist_ok=True)
    for job in (a.gpm_jobs or a.jobs) + a.extra_gpm:
        out = pdir / f"{job}.nvml.json"
        if out.exists():
            continue
        if elapsed() > a.budget_s - 30:
            log("gpm: out of time")
            return
        extra = ("--no-timeline",) if a.gpm_no_timeline else ()
        rc, s = sh(colopred("profile", "nvml", "--zoo", job, "-o", str(out), *extra), timeout=min(120, a.budget_s - elapsed()),
                   log_path=work / "gpm.log")
        log(f"gpm {job}: rc={rc} {s:.0f} s")


def _ncu_profile(work: Path, job: str, replay: str, metric_set: str, tag: str, timeout: float) -> dict:
    pdir = work / "profiles"
    pdir.mkdir(exist_ok=True)
    cdir = work / "ncu_csv"
    cdir.mkdir(exist_ok=True)
    out = pdir / f"{job}.{tag}.json"
    csv = cdir / f"{job}.{tag}.csv"
    # --no-timeline: zoo jobs' stream overlap comes from the timeline step (profile timeline + profile overlap)
    rc, s = sh(colopred("profile", "run", "--zoo", job, "--replay-mode", replay, "--metric-set", metric_set, "--no-timeline",
                        "--keep-csv", str(csv), "-o", str(out)), timeout=timeout, log_path=work / "ncu.log")
    r = {"job": job, "replay_mode": replay, "metric_set": metric_set, "rc": rc, "total_s": round(s, 1)}
    if rc == 0 and out.exists():
        p = json.loads(out.read_text())
        r.update(ncu_wall_s=round(p["meta"]["ncu_wall_s"], 1), dram_util_pct=p["dram_util_pct"],
                 achieved_occupancy_pct=p["achieved_occupancy_pct"], busy_fraction=p["busy_fraction"],
                 kernels_per_iteration=p["kernels_per_iteration"], iteration_ms=p["iteration_ms"])
    if csv.exists():
        subprocess.run(["gzip", "-f", str(csv)])
    log(f"ncu {job} [{replay}/{metric_set}]: {r}")
    return r


def step_timeline(work: Path, a) -> None:
    tdir = work / "timeline"
    tdir.mkdir(exist_ok=True)
    for job in a.jobs:
        if (tdir / f"{job}.timeline.json").exists():
            continue
        if elapsed() > a.budget_s - 40:
            log("timeline: out of time")
            return
        extra = ["--keep-trace"] if job in a.keep_trace_jobs else []
        rc, s = sh(colopred("profile", "timeline", "--zoo", job, "--out", str(tdir), *extra),
                   timeout=min(120, a.budget_s - elapsed() - 10), log_path=work / "timeline.log")
        log(f"timeline {job}: rc={rc} {s:.0f} s")


def step_ncucost(work: Path, a) -> None:
    rows = []
    for replay, ms in (("kernel", "full"), ("kernel", "minimal"), ("application", "full")):
        if elapsed() > a.budget_s - 40:
            break
        rows.append(_ncu_profile(work, a.cost_job, replay, ms, f"ncu-{replay}-{ms}", timeout=min(300, a.budget_s - elapsed())))
    (work / "ncu_cost.json").write_text(json.dumps(rows, indent=1))


def _choose_variant(work: Path) -> tuple[str, str]:
    """Cheapest variant whose M and occupancy stay within 1 point of kernel replay with all metrics."""
    f = work / "ncu_cost.json"
    if not f.exists():
        return "kernel", "full"
    rows = [r for r in json.loads(f.read_text()) if r.get("rc") == 0 and "ncu_wall_s" in r]
    ref = next((r for r in rows if r["replay_mode"] == "kernel" and r["metric_set"] == "full"), None)
    if ref is None:
        return "kernel", "full"
    ok = [r for r in rows if abs(r["dram_util_pct"] - ref["dram_util_pct"]) <= 1 and
          abs(r["achieved_occupancy_pct"] - ref["achieved_occupancy_pct"]) <= 1]
    # Prefer the full metric set unless the minimal one is much cheaper.
    full = [r for r in ok if r["metric_set"] == "full"]
    best = min(full or ok, key=lambda r: r["ncu_wall_s"])
    return best["replay_mode"], best["metric_set"]


def step_ncu(work: Path, a) -> None:
    replay, ms = a.ncu_variant.split("/") if a.ncu_variant else _choose_variant(work)
    log(f"ncu profiles with {replay} replay, {ms} metrics")
    rows = []
    for job in a.ncu_jobs or a.jobs:
        if (work / "profiles" / f"{job}.ncu.json").exists():
            continue
        left = a.budget_s - elapsed()
        if left < 60:
            log("ncu: out of time")
            break
        rows.append(_ncu_profile(work, job, replay, ms, "ncu", timeout=left - 15))
    with open(work / "ncu_profiles.jsonl", "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _campaigns(a) -> list[tuple[Path, str, list[str]]]:
    """(campaign dir, sets, jobs) for each campaign to measure, in order.

    ``--campaigns DIR=SETSFILE,...`` takes each campaign's jobs from its sets file (read by
    colopred's own sets parser); ``--campaign-dir`` with ``--sets`` and ``--jobs`` names one campaign.
    """
    from colopred.measurement.harness.plan import expand_sets
    from colopred.profile import job_of

    if not a.campaigns:
        return [(Path(a.campaign_dir), a.sets, a.jobs)]
    out = []
    for item in a.campaigns.split(","):
        d, _, sets_file = item.partition("=")
        jobs = list(dict.fromkeys(job_of(j) for members in expand_sets(sets_file, []) for j in members))
        out.append((Path(d), sets_file, jobs))
    return out


def _gpus_of(a, d: Path) -> str:
    """The --gpus of campaign ``d``: none (one GPU, as before), 0 for a one-GPU baseline of a scaling check, else --gpus."""
    if not getattr(a, "gpus", ""):
        return ""
    return "0" if d.name in getattr(a, "one_gpu_campaigns", []) else a.gpus


def run_measure(work: Path, a, d: Path, plan: list[str], park: bool, about: str, log_path: Path) -> int:
    """`colopred measure` into ``d``: resumed if ``d`` holds a campaign, else a new one planned by ``plan``."""
    args = ["measure", "--out", str(d), "--no-progress", "-v", *a.measure_extra.split()] + (["--park-idle"] if park else [])
    gpus = _gpus_of(a, d)
    if gpus:
        args += ["--gpus", gpus]
    if (d / "campaign.json").exists():
        args.append("--resume")
        log(f"resuming campaign in {d}" + (f" on GPUs {gpus}" if gpus else ""))
    else:
        args += plan
        if gpus and gpus != "0" and getattr(a, "cross_gpu_frac", 0):
            args += ["--cross-gpu-frac", str(a.cross_gpu_frac)]
        log(f"new campaign in {d}: {about}" + (f" on GPUs {gpus}" if gpus else ""))
    limit = a.budget_s - elapsed() - 10
    if getattr(a, "campaign_budget_s", None):
        limit = min(limit, a.campaign_budget_s)
    rc, sec = sh(colopred(*args), timeout=limit, log_path=log_path)
    log(f"measure {d.name} rc={rc} in {sec:.0f} s")
    return rc


def step_measure(work: Path, a) -> None:
    for d, sets, jobs in a.campaign_list:
        if elapsed() > a.budget_s - MIN_CAMPAIGN_S:
            log(f"measure {d.name}: {a.budget_s - elapsed():.0f} s of budget left (< {MIN_CAMPAIGN_S} s), not started")
            continue
        plan = ["--jobs", ",".join(jobs), "--sets", sets, "--mode", a.measure_mode, "--max-sets", str(a.max_sets),
                "--repeat-frac", str(a.repeat_frac), "--min-iters", str(a.min_iters)] + (["--bracket"] if a.bracket else [])
        run_measure(work, a, d, plan, a.park_idle, f"{len(jobs)} jobs, sets {sets}", work / f"measure-{d.name}.log")


def abba(rounds: int, first: bool):
    """(round, flag) of alternated campaigns: ``first`` then the other, in reverse order every other round (ABBA), so
    that drift over the call favours neither kind."""
    for r in range(rounds):
        for flag in ((first, not first) if r % 2 == 0 else (not first, first)):
            yield r, flag


def step_parkcheck(work: Path, a) -> None:
    """Is a solo time the same with idle workers parked (state in host memory) as resident? Short
    timeslice campaigns of the same jobs (one pair each, so parked workers exist), with and without
    --park-idle, alternated so that drift does not favour one kind."""
    import pandas as pd

    from colopred.measurement.harness.reader import park_effect, read_windows

    plan = ["--jobs", ",".join(a.parkcheck_jobs), "--sets", "pairs", "--max-sets", "1", "--mode", "timeslice",
            "--repeat-frac", "0", "--min-iters", "12"]
    dirs = []
    for r, park in abba(a.parkcheck_rounds, True):
        if elapsed() > a.budget_s - 60:
            log("parkcheck: budget spent")
            break
        d = work / "parkcheck" / f"r{r}-{'parked' if park else 'resident'}"
        run_measure(work, a, d, plan, park, f"parkcheck, park_idle={park}", work / "parkcheck.log")
        dirs.append(d)
    have = [d for d in dirs if (d / "windows.jsonl").exists()]
    if have:
        table = park_effect(pd.concat([read_windows(d) for d in have], ignore_index=True))
        table.to_csv(work / "parkcheck.csv", index=False)
        log("parkcheck:\n" + table.to_string(index=False))


def step_pincheck(work: Path, a) -> None:
    """Do launch-bound jobs' times drift less between windows with each worker pinned to its own CPUs? Short
    time-slicing campaigns of the same sets (--pincheck-sets, each measured twice), with and without --pin-cpus,
    alternated (ABBA over --pincheck-rounds) so that drift does not favour one kind (tables: research/pincheck_table.py)."""
    from colopred.measurement.harness.plan import expand_sets

    jobs = sorted({j for s in expand_sets(a.pincheck_sets, []) for j in s})
    plan = ["--jobs", ",".join(jobs), "--sets", a.pincheck_sets, "--mode", "timeslice", "--repeat-frac", "1", "--min-iters", "12"]
    for r, pin in abba(a.pincheck_rounds, False):
        if elapsed() > a.budget_s - 90:
            log("pincheck: budget spent")
            return
        d = work / "pincheck" / f"r{r}-{'pinned' if pin else 'free'}"
        run_measure(work, a, d, plan + ["--pin-cpus"] * pin, False, f"pincheck, pin_cpus={pin}", work / "pincheck.log")


def step_bygpu(work: Path, a) -> None:
    """Windows per minute per GPU and cross-GPU agreement of the campaigns measured (``colopred table --by-gpu``)."""
    dirs = [str(d) for d, _, _ in a.campaign_list if (d / "campaign.json").exists()]
    if not dirs:
        log("bygpu: no campaign")
        return
    rc, _ = sh(colopred("table", "--by-gpu", *dirs, "-o", str(work / "cross_gpu.csv")), timeout=max(a.budget_s - elapsed(), 30),
               log_path=work / "bygpu.txt")
    log(f"bygpu rc={rc}:\n" + (work / "bygpu.txt").read_text()[-3000:])


def step_ownjob(work: Path, a) -> None:
    """A job outside the zoo end to end, as the README documents it, on the shipped H100 data."""
    root = Path(__file__).resolve().parents[1]
    d = work / "ownjob"
    data = d / "mydata"
    (data / "profiles" / "ncu").mkdir(parents=True, exist_ok=True)
    lg = work / "ownjob.log"
    cmd = [PY, str(root / "examples" / "my_train.py"), "--device", a.ownjob_device]
    prof = data / "profiles" / "ncu" / "mytrain.json"
    if not prof.exists():
        rc, sec = sh(colopred("profile", "run", "--name", "mytrain", "-o", str(prof), "-v", "--", *cmd),
                     timeout=min(300, a.budget_s - elapsed() - 60), log_path=lg)
        log(f"ownjob: profile run rc={rc} in {sec:.0f} s")
        if rc != 0:
            return
    jobs_file = d / "jobs.json"
    jobs_file.write_text(json.dumps({"jobs": [{"name": "mytrain", "command": cmd, "env": {"PYTHONPATH": str(root)}}]}, indent=1))
    partners = [j for j in a.ownjob_partners.split(",") if j]
    camp = data / "campaigns" / "own1"
    run_measure(work, a, camp, ["--jobs-file", str(jobs_file), "--jobs", ",".join(["mytrain", *partners]), "--sets", "pairs",
                                "--mode", a.measure_mode, "--repeat-frac", "0", "--min-iters", str(a.min_iters)], a.park_idle,
                "mytrain against " + ",".join(partners), lg)
    for p in sorted((root / "datasets" / "h100" / "profiles" / "ncu").glob("*.json")):
        if not (data / "profiles" / "ncu" / p.name).exists():
            shutil.copy(p, data / "profiles" / "ncu" / p.name)
    for c in sorted((root / "datasets" / "h100" / "campaigns").iterdir()):
        if c.is_dir() and not (data / "campaigns" / c.name).exists():
            shutil.copytree(c, data / "campaigns" / c.name)
    rc, sec = sh(colopred("table", str(camp), "-o", str(d / "measured.csv")), timeout=120, log_path=lg)
    if importlib.util.find_spec("xgboost") is None:  # GPU machines without XGBoost: train and predict where it is installed
        log(f"ownjob: no xgboost here; train and predict from the returned {data.relative_to(work)} elsewhere")
        return
    rc, sec = sh(colopred("train", "--data", str(data), "--out", str(d / "models" / "mine"), "--no-metrics", "-v"),
                 timeout=max(60, a.budget_s - elapsed() - 30), log_path=lg)
    log(f"ownjob: train rc={rc} in {sec:.0f} s")
    for mode in ("timeslice", "mps") if a.measure_mode == "both" else (a.measure_mode,):
        for partner in partners:
            out = d / f"predict-{mode}-{partner}.json"
            with open(out, "w") as f:
                subprocess.run(colopred("predict", str(prof), str(data / "profiles" / "ncu" / f"{partner}.json"), "--mode", mode,
                                        "--model", str(d / "models" / f"mine-{mode}.json"), "--json"), stdout=f, timeout=120)
    log(f"ownjob: predictions in {d}")


STEPS = {"env": step_env, "smoke": step_smoke, "gpm": step_gpm, "ncucost": step_ncucost, "ncu": step_ncu, "timeline": step_timeline,
         "parkcheck": step_parkcheck, "pincheck": step_pincheck, "measure": step_measure, "bygpu": step_bygpu, "ownjob": step_ownjob}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="env")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--jobs", default="")
    ap.add_argument("--extra-gpm", default="")
    ap.add_argument("--ncu-jobs", default="", help="jobs for the ncu step (default: --jobs)")
    ap.add_argument("--gpm-jobs", default="", help="jobs for the gpm step (default: --jobs)")
    ap.add_argument("--gpm-no-timeline", action="store_true",
                    help="gpm step: counters only (the timeline fields come from a timeline step's tables)")
    ap.add_argument("--cost-job", default="resnet18-b64-fp32")
    ap.add_argument("--ncu-variant", default=None, help="REPLAY/METRICS, e.g. kernel/minimal (default: cheapest faithful)")
    ap.add_argument("--keep-trace-jobs", default="", help="timeline step: jobs whose raw torch trace is kept too")
    ap.add_argument("--sets", default="pairs+triples")
    ap.add_argument("--park-idle", action="store_true", help="measure with --park-idle (idle workers' state in host memory)")
    ap.add_argument("--measure-mode", default="both", choices=("both", "mps", "timeslice"), help="sharing modes of new campaigns")
    ap.add_argument("--min-iters", type=int, default=12, help="timed iterations per job and window of new campaigns")
    ap.add_argument("--repeat-frac", type=float, default=0.1, help="fraction of the sets measured twice in new campaigns")
    ap.add_argument("--bracket", action="store_true", help="new campaigns: solo windows right before and after every collocated one")
    ap.add_argument("--max-sets", type=int, default=16)
    ap.add_argument("--campaign-dir", default="runs/campaign")
    ap.add_argument("--campaigns", default="", help="DIR=SETSFILE,... measured in order, jobs from each sets file")
    ap.add_argument("--parkcheck-jobs", default="gpt2_small-b8-bf16,vgg16-b256-fp32,resnet18-b16-fp32,mobilenet_v2-b32-fp32-loader")
    ap.add_argument("--parkcheck-rounds", type=int, default=2, help="each round: one parked and one resident campaign")
    ap.add_argument("--pincheck-sets", default="scripts/sets/h100-pincheck.txt", help="pincheck step: the sets file")
    ap.add_argument("--pincheck-rounds", type=int, default=2, help="pincheck step: each round one pinned and one free campaign")
    ap.add_argument("--gpus", default="", help="measure step: spread each campaign over these GPUs (all, or 0,1,...)")
    ap.add_argument("--cross-gpu-frac", type=float, default=0.25, help="with --gpus: fraction of sets measured on two GPUs")
    ap.add_argument("--one-gpu-campaigns", default="", help="with --gpus: campaign folder names measured on GPU 0 alone (scaling baseline)")
    ap.add_argument("--campaign-budget-s", type=float, default=None, help="measure step: at most this long per campaign")
    ap.add_argument("--ownjob-partners", default="resnet18-b64-fp32,gpt2_small-b8-bf16,lstm_lm-b64-fp32",
                    help="ownjob step: zoo jobs measured against examples/my_train.py")
    ap.add_argument("--ownjob-device", default="cuda", help=argparse.SUPPRESS)  # cpu in a dry run
    ap.add_argument("--measure-extra", default="", help=argparse.SUPPRESS)  # e.g. "--device cpu --tiny" in tests
    ap.add_argument("--work", default="runs/session")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    a = ap.parse_args()
    a.jobs = [j for j in a.jobs.split(",") if j]
    a.extra_gpm = [j for j in a.extra_gpm.split(",") if j]
    a.ncu_jobs = [j for j in a.ncu_jobs.split(",") if j]
    a.gpm_jobs = [j for j in a.gpm_jobs.split(",") if j]
    a.keep_trace_jobs = [j for j in a.keep_trace_jobs.split(",") if j]
    a.parkcheck_jobs = [j for j in a.parkcheck_jobs.split(",") if j]
    a.one_gpu_campaigns = [j for j in a.one_gpu_campaigns.split(",") if j]
    a.campaign_list = _campaigns(a)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(a.out)

    def pack() -> None:
        """Results so far -> $OUT (also after every step, and when the call is killed)."""
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "results.tar.gz.tmp"
        with tarfile.open(tmp, "w:gz") as t:
            t.add(work, arcname="session")
            for d, _, _ in a.campaign_list:
                if d.exists():
                    t.add(d, arcname=f"campaigns/{d.name}")
        os.replace(tmp, out / "results.tar.gz")
        for f in sorted(work.glob("*.log")):
            shutil.copy(f, out / f.name)

    def on_term(signum, frame):  # the device call's own time limit: keep what was measured
        log(f"signal {signum}: stopping children and packing results")
        for pgid in list(CHILDREN):
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(2)  # the campaign writer appends whole lines; give it a moment to finish one
        pack()
        log("packed after signal")
        sys.exit(124)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    for name in a.steps.split(","):
        if elapsed() > a.budget_s - 20:
            log(f"skipping {name}: budget spent")
            continue
        log(f"== {name}")
        try:
            STEPS[name](work, a)
        except Exception as e:  # noqa: BLE001 - keep going, report
            log(f"step {name} failed: {e.__class__.__name__}: {e}")
        pack()
    log("done")


if __name__ == "__main__":
    main()
