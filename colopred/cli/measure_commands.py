"""``colopred measure`` (GPU: solo and collocated iteration times) and ``colopred table`` (records -> slowdowns)."""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Mapping

from ..constants import CALIBRATION_REFERENCE_JOB, CALIBRATION_WINDOWS, MODES
from ..errors import ColopredError, InputError
from ..measurement.harness.mps import MPS_BASE_DIR


def cmd_measure(a) -> int:
    from ..measurement.harness.campaign import Campaign, Progress
    from ..measurement.harness.mps import visible_env
    from ..measurement.harness.plan import CampaignConfig, expand_sets
    from .common import log_of

    log = log_of(a)
    out = Path(a.out)
    if a.shard is not None:  # one GPU's part of a multi-GPU campaign, started by the coordinator
        return _measure_shard(a, out, log)
    if a.nodes is not None and (a.gpus is None or a.nodes < 1):
        raise ColopredError("--nodes needs --gpus (the GPUs of each node) and must be at least 1")
    gpus = None if a.gpus is None else _gpus(a)
    if a.resume and not a.jobs and not a.jobs_file:
        camp = Campaign(out, None, resume=True)
    else:
        if not (a.jobs or a.jobs_file) or not a.sets or not a.mode:
            raise ColopredError("--jobs (or --jobs-file), --sets and --mode are required (or --resume alone to continue a campaign)")
        jobs, commands = _campaign_jobs(a.jobs, a.jobs_file)
        sets = expand_sets(a.sets, jobs, max_sets=a.max_sets, seed=a.seed)
        if not sets:
            raise ColopredError(f"--sets {a.sets} of {len(jobs)} job(s) makes no set to measure: list more jobs")
        modes = MODES if a.mode == "both" else (a.mode,)
        try:
            shards = 1 if gpus is None else len(gpus) * (a.nodes or 1)
            cfg = CampaignConfig(jobs=tuple(jobs), sets=tuple(sets), modes=modes, seed=a.seed, solo_every=a.solo_every,
                                 repeat_frac=a.repeat_frac, min_iters=a.min_iters, max_window_s=a.max_window_s, bracket=a.bracket,
                                 shards=shards, cross_gpu_frac=a.cross_gpu_frac,
                                 commands=tuple(commands[j] for j in jobs if j in commands))
        except ValueError as e:
            raise ColopredError(str(e)) from None
        camp = Campaign(out, cfg, resume=a.resume)
    if camp.config.shards > 1:
        return _measure_sharded(a, camp, gpus, log)
    gpu_index = None
    if gpus is not None:  # one GPU of the node: its workers see only it
        if len(gpus) != 1:
            raise ColopredError(f"{out}: the campaign was planned for one GPU; --gpus names {len(gpus)}")
        (gpu_index,) = gpus
        os.environ.update(visible_env(gpu_index))
    ran = _run_pool(a, camp, log, gpu_index, progress=Progress(0, stream=None if a.quiet or a.no_progress else sys.stderr))
    log(f"{ran} windows measured; records in {camp.records_path}")
    return 0


def _run_pool(a, camp, log, gpu_index: int | None, progress=None, **pool) -> int:
    """Run ``camp`` (a one-GPU campaign, or one shard of a multi-GPU one) with a worker pool of ``a``'s options on GPU
    ``gpu_index``; ``pool``: further GpuWorkerPool settings. Returns the windows measured."""
    from ..measurement.harness.gpu_pool import make_pool_factory

    factory = make_pool_factory(device=a.device, tiny=a.tiny, use_nvml=not a.no_nvml, park_idle=a.park_idle, gpu_index=gpu_index,
                                pin_cpus=a.pin_cpus, commands={c.name: c for c in camp.config.commands}, log=log.detail, **pool)
    return camp.run(factory, progress=progress, log=log)


def _gpus(a) -> list[int]:
    from ..measurement.harness.multigpu import parse_gpus

    gpus = parse_gpus(a.gpus)
    if a.nodes is None and len(gpus) == 1 and a.cross_gpu_frac:
        raise ColopredError("--cross-gpu-frac needs a campaign over at least two GPUs")
    return gpus


def _pool_args(a) -> list[str]:
    """The worker-pool options a shard process gets from its coordinator."""
    args = ["--device", a.device, "--no-progress"] + ["-q"] * bool(a.quiet) + ["-v"] * bool(a.verbose)
    for flag in ("tiny", "no_nvml", "park_idle", "pin_cpus", "fake_gpus"):
        if getattr(a, flag):
            args.append("--" + flag.replace("_", "-"))
    return args


def _measure_shard(a, out: Path, log) -> int:
    from ..measurement.harness.campaign import Campaign

    if a.fake_gpus and a.device != "cpu":
        raise ColopredError("--fake-gpus is for CPU workers (--device cpu) only")
    camp = Campaign(out, None, resume=True, shard=a.shard)
    ran = _run_pool(a, camp, log, a.gpu_index, mps_dir=a.mps_dir, fake_gpu_uuid=f"GPU-fake-{a.gpu_index}" if a.fake_gpus else None)
    log(f"shard {a.shard}: {ran} windows measured; records in {camp.records_path}")
    return 0


def _measure_sharded(a, camp, gpus: list[int] | None, log) -> int:
    from ..measurement.harness.multigpu import ShardedCampaign, node_shards, shard_record_counts, subprocess_launcher
    from ..measurement.nvml import gpu_uuids
    from .common import err

    cfg = camp.config
    node = a.node if a.node is not None else (int(os.environ["SLURM_ARRAY_TASK_ID"]) if a.nodes and
                                              os.environ.get("SLURM_ARRAY_TASK_ID", "").isdigit() else None)
    if gpus is None:  # a resume without --gpus: the first GPUs of the node
        gpus = list(range(cfg.shards // (a.nodes or 1)))
    shards = node_shards(cfg, len(gpus), node, a.nodes)
    sharded = ShardedCampaign.of(camp)
    before = shard_record_counts(camp.out_dir) if camp.out_dir.is_dir() else {}
    t0 = time.monotonic()
    uuids = gpu_uuids(gpus) if a.device.startswith("cuda") else {}
    codes = sharded.run(gpus, subprocess_launcher(camp.out_dir, _pool_args(a), uuids=uuids), shards=shards, log=log)
    minutes = (time.monotonic() - t0) / 60
    after = shard_record_counts(camp.out_dir)
    now = sum(after.get(k, 0) - before.get(k, 0) for k in shards)
    log(f"{now} windows recorded on {len(shards)} GPU(s) in {minutes:.1f} min ({now / max(minutes, 1e-9):.1f} per minute; "
        f"per GPU: colopred table --by-gpu {camp.out_dir})")
    bad = sorted(k for k, rc in codes.items() if rc != 0)
    if bad:
        err(f"{camp.out_dir}: shard(s) {', '.join(map(str, bad))} did not finish (see logs/shard*.log there); continue with --resume")
        return 1
    log(f"all {len(shards)} shards done; records in {camp.out_dir}/windows.shard*.jsonl")
    return 0


def _campaign_jobs(names: str | None, jobs_file: str | None) -> tuple[list[str], dict]:
    """(job names in order, {name: JobCommand}): ``names`` (comma separated) are zoo jobs or entries of the jobs file;
    without ``names``, every entry of the jobs file."""
    import re

    from ..measurement.harness.commands import read_jobs_file
    from ..measurement.zoo.registry import JobSpec

    commands = read_jobs_file(jobs_file) if jobs_file else {}
    listed = [n for n in re.split(r"[,\s]+", names.strip()) if n] if names else list(commands)
    jobs: list[str] = []
    for n in listed:
        if n not in commands:
            try:
                n = JobSpec.parse(n).name
            except ValueError as e:
                raise ColopredError(f"--jobs: {e}" + (f" (nor an entry of {jobs_file})" if jobs_file else "")) from None
        if n in jobs:
            raise ColopredError(f"--jobs: job {n} is listed twice")
        jobs.append(n)
    return jobs, commands


def cmd_table(a) -> int:
    from ..io import check_output, write_csv_atomic
    from ..measurement.harness.reader import read_windows, slowdown_table
    from .common import log_of

    if a.output is not None:
        check_output(a.output, *a.paths)

    windows = read_windows(a.paths)
    if windows.empty:
        raise InputError(a.paths[0], "holds no window records")
    if a.by_gpu:
        return _table_by_gpu(a, windows)
    t = slowdown_table(windows)
    if t.empty:
        raise InputError(a.paths[0], "no collocated window with solo baselines of its jobs: nothing to tabulate")
    if a.observations:
        return _write_observations(a, t)
    if a.profiles:
        raise ColopredError("--profiles names the jobs of an observations file: give --observations FILE too")
    if a.output:
        write_csv_atomic(t, a.output, index=False)
        log_of(a)(f"wrote {a.output} ({len(t)} rows)")
    else:
        print(t.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def _write_observations(a, table) -> int:
    """``table --observations``: the measured sets as an observations file (:func:`write_observations`)."""
    from ..io import check_output
    from .common import log_of

    out = check_output(a.observations, *a.paths, what="observations file")
    n = write_observations(table, out, a.profiles, a.paths[0])
    log_of(a)(f"wrote {out} ({n} observations from {table['window_id'].nunique()} windows)")
    return 0


def write_observations(table, out: Path, profiles: str | Mapping[str, Path] | None, source) -> int:
    """Write ``table`` (``reader.slowdown_table`` rows) to ``out`` as an observations file for ``predict --observed``:
    one observation per measured (mode, set), each job's slowdown the mean of its windows there (repeats of one set
    are one collocation, not several). With ``profiles`` (a folder, or each job's profile file), each job is named by
    its profile (``profiles/JOB.json``) relative to ``out``; ``source`` names the records in errors. Returns the
    observations."""
    import json

    from ..io import write_text_atomic
    from ..runtime.observed import observations_document

    files: dict[str, Path] = {}
    if isinstance(profiles, Mapping):
        files = {job: Path(f) for job, f in profiles.items()}
    elif profiles:
        folder = Path(profiles)
        if not folder.is_dir():
            raise InputError(folder, "--profiles: not a folder of profiles")
        files = {job: folder / f"{job}.json" for job in table["job"].unique()}
    for job, f in files.items():
        if not f.is_file():
            raise InputError(f, f"--profiles: no profile of job {job}, measured in {source}")
    name = {job: Path(os.path.relpath(f.resolve(), out.resolve().parent)).as_posix() for job, f in files.items()}
    entries = []
    for (mode, _), g in table.groupby(["mode", "set"], sort=True):
        mean = g.groupby("job", sort=False)["slowdown"].mean()
        entries.append((mode, [name.get(j, j) for j in mean.index], mean.to_list()))
    write_text_atomic(out, json.dumps(observations_document(entries), indent=1) + "\n")
    return len(entries)


def cmd_calibrate(a) -> int:
    """``colopred calibrate``: measure JOB beside the reference job in each mode (a pair, ``CALIBRATION_WINDOWS``
    windows each, bracketed by solo ones), then write ``OUT/observed.json`` and say how far it moves JOB's predictions."""
    from ..io import write_text_atomic
    from ..measurement.harness.reader import read_windows, slowdown_table
    from ..runtime.reference import shipped_reference_dir
    from .common import log_of

    log = log_of(a)
    if a.job == a.reference:
        raise ColopredError(f"--reference: {a.job} is the job to calibrate; name another job to measure it beside")
    files = _calibration_profiles(a) if a.profiles else {}  # refuse before minutes of measuring, not after
    out = Path(a.out)
    argv = ["measure", "--jobs", f"{a.job},{a.reference}", "--sets", "pairs", "--mode", a.mode, "--out", str(out),
            "--bracket", "--repeat-frac", str(CALIBRATION_WINDOWS - 1), "--device", a.device, "--seed", "0"]
    argv += ["--jobs-file", a.jobs_file] if a.jobs_file else []
    argv += [f for f, on in (("--resume", a.resume), ("--tiny", a.tiny), ("--no-nvml", a.no_nvml), ("--no-progress", a.no_progress),
                             ("-q", a.quiet), ("-v", a.verbose)) if on]
    argv += ["--min-iters", str(a.min_iters), "--max-window-s", str(a.max_window_s)]
    try:
        code = cmd_measure(parse_measure_args(argv))
    except ColopredError as e:  # name the calibrate argument, not the measure one it became
        if "--jobs: " not in str(e):
            raise
        raise ColopredError(str(e).replace("--jobs: ", "job: ", 1) + ("" if a.jobs_file else " (or give its command in --jobs-file)")) from None
    if code:
        return code
    windows = read_windows([out])
    table = slowdown_table(windows)
    if table.empty:
        failed = windows[windows["status"] != "ok"]
        why = f" (first failure, {failed.iloc[0]['kind']} {failed.iloc[0]['set']}: {failed.iloc[0]['reason']})" if len(failed) else ""
        raise InputError(out, f"no calibration window succeeded{why}: nothing to feed back")
    ref = files.get(a.reference)
    if ref is not None and ref.is_relative_to(shipped_reference_dir()):  # a copy beside observed.json names it
        files[a.reference] = out / f"{a.reference}.json"
        write_text_atomic(files[a.reference], ref.read_text())
    observed = out / "observed.json"
    write_observations(table, observed, files or None, out)
    mine = table[table["job"] == a.job].groupby("mode")["slowdown"].agg(["mean", "size"])
    for mode, row in mine.iterrows():
        log(f"{mode}: {a.job} measured {row['mean']:.2f}x beside {a.reference} ({int(row['size'])} windows)"
            + (_moved(files, a.job, a.reference, mode, row["mean"]) if files else ""))
    log(f"wrote {observed}: colopred predict ... --observed {observed}")
    return 0


def _calibration_profiles(a) -> dict[str, Path]:
    """The profile files of ``calibrate``'s job (``--profiles DIR/JOB.json``) and of its reference: its profile in DIR,
    else the one the package ships for the job's profile source (``runtime.reference``)."""
    from ..profile import JobProfile
    from ..runtime.reference import shipped_reference_profile

    folder = Path(a.profiles)
    if not folder.is_dir():
        raise InputError(folder, "--profiles: not a folder of profiles")
    mine = folder / f"{a.job}.json"
    if not mine.is_file():
        raise InputError(mine, f"--profiles: no profile of job {a.job} (profile it first: colopred profile)")
    ref = folder / f"{a.reference}.json"
    if not ref.is_file():
        ref = shipped_reference_profile(a.reference, JobProfile.from_json(mine).source)
        if ref is None:
            raise InputError(folder / f"{a.reference}.json", f"--profiles: no profile of the reference job {a.reference} "
                             f"(profile it first: colopred profile; the package ships {CALIBRATION_REFERENCE_JOB}'s)")
    return {a.job: mine, a.reference: ref}


def _moved(files: Mapping[str, Path], job: str, reference: str, mode: str, measured: float) -> str:
    """', predicted P: its later predictions x F' for the calibration pair under the shipped model of ``mode``."""
    from ..profile import JobProfile
    from ..runtime.observed import Observation
    from ..runtime.predictor import Predictor

    profiles = [JobProfile.from_json(files[n]) for n in (job, reference)]
    try:
        pred = Predictor.for_profiles(mode, profiles)
    except ValueError as e:
        raise InputError(files[job], f"--profiles: {e}") from None
    predicted, other = pred.predict(profiles).slowdown  # its warnings (GPM model's error, other GPU) are said here once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        factor = pred.observe([Observation(tuple(profiles), (measured, other))]).predict(profiles).slowdown[0] / predicted
    return f"; predicted {predicted:.2f}x: its later predictions x {factor:.3f}"


def _table_by_gpu(a, windows) -> int:
    """Windows per minute on each GPU (and per campaign; against the one-GPU campaigns given) and the cross-GPU
    agreement of the slowdowns of sets measured on several GPUs."""
    from ..io import write_csv_atomic
    from ..measurement.harness.reader import cross_gpu_agreement, throughput_by_gpu
    from .common import log_of

    rate = throughput_by_gpu(windows)
    per_gpu = rate[rate["gpu_key"] != "all"]
    n_gpus = per_gpu.groupby("campaign")["gpu_key"].nunique()
    one = rate[(rate["gpu_key"] == "all") & rate["campaign"].map(n_gpus == 1)]
    if len(one):  # the one-GPU campaigns given: each rate against their mean
        rate["vs_one_gpu"] = rate["windows_per_min"] / one["windows_per_min"].mean()
    agree = cross_gpu_agreement(windows)
    if a.output:
        write_csv_atomic(agree, a.output, index=False)
        log_of(a)(f"wrote {a.output} ({len(agree)} rows)")
    fmt = {"float_format": lambda x: f"{x:.2f}", "index": False}
    print("windows per minute, per GPU and per campaign ('all'):")
    print(rate.to_string(**fmt))
    print("\ncross-GPU agreement of slowdowns (sets measured on two or more GPUs; d = % against the other GPUs):")
    print(agree.to_string(**fmt) if len(agree) else "  no set was measured on two GPUs")
    return 0


def _add_window_options(p) -> None:
    """The options of the windows and their workers, shared by ``measure`` and ``calibrate`` (which passes them on)."""
    p.add_argument("--min-iters", type=int, default=12, help="timed iterations per job and window")
    p.add_argument("--max-window-s", type=float, default=20.0, help="longest window, seconds")
    p.add_argument("--device", default="cuda", help="torch device of the workers")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests: tiny models on the CPU
    p.add_argument("--no-nvml", action="store_true", help="do not sample GPM counters")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs); progress lines still print")


def parse_measure_args(argv: list[str]) -> argparse.Namespace:
    """``argv`` (``measure`` and its options) parsed as ``colopred measure`` parses it."""
    from .common import HelpFormatter

    ap = argparse.ArgumentParser(prog="colopred", formatter_class=HelpFormatter)
    add_commands(ap.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return ap.parse_args(argv)


def add_commands(sub) -> None:
    from .common import command

    p = command(sub, "measure", "measure solo and collocated iteration times on the GPU", cmd_measure,
                "Measure solo and collocated iteration times of zoo jobs and training commands on the GPU (a campaign).")
    p.add_argument("--jobs", help="jobs, comma separated: zoo jobs, or entries of --jobs-file")
    p.add_argument("--jobs-file", help="JSON naming training commands to measure beside zoo jobs (docs/formats.md); "
                                       "without --jobs, all its entries")
    p.add_argument("--sets", help="pairs | triples | pairs+triples | FILE (one set per line, jobs joined by +)")
    p.add_argument("--mode", choices=(*MODES, "both"), help="sharing mode(s) to measure")
    p.add_argument("--out", required=True, help="campaign directory")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out")
    p.add_argument("--max-sets", type=int, default=None, help="sample at most N sets of each size")
    p.add_argument("--seed", type=int, default=0, help="seed of the window order and sampled sets")
    p.add_argument("--solo-every", type=int, default=3, help="a solo window after every N collocated ones")
    p.add_argument("--repeat-frac", type=float, default=0.1, help="fraction of sets measured twice; above 1, every set is measured 1 + floor(F) times and a fraction "
                        "F - floor(F) of them once more (labels averaged over several windows of one run)")
    p.add_argument("--bracket", action="store_true",
                   help="solo windows of each member right before and after every collocated window (instead of --solo-every): "
                        "baselines seconds away from each slowdown, whatever the drift between windows")
    _add_window_options(p)
    p.add_argument("--park-idle", action="store_true",
                   help="keep idle workers' weights and optimizer state in host memory between windows "
                        "(for campaigns whose jobs do not all fit on the GPU at once)")
    p.add_argument("--pin-cpus", action="store_true",
                   help="run each job's worker on its own block of this machine's CPUs (a multi-GPU campaign's shards each split "
                        "all CPUs among their own jobs); measured without a clear effect on window-to-window noise")
    p.add_argument("--gpus", default=None,
                   help="GPUs of this node to spread the campaign over: indices (0,1,2,3) or all; one shard process, worker "
                        "pool and MPS daemon per GPU (docs/campaigns.md). Default: one GPU, in this process")
    p.add_argument("--cross-gpu-frac", type=float, default=0.0,
                   help="fraction of the sets measured on a second GPU too (checks that the GPUs agree)")
    p.add_argument("--nodes", type=int, default=None, help="the campaign spans N nodes of --gpus GPUs each (Slurm array)")
    p.add_argument("--node", type=int, default=None, help="this node's number, 0..N-1 (default: $SLURM_ARRAY_TASK_ID)")
    p.add_argument("--shard", type=int, default=None, help=argparse.SUPPRESS)  # set by the coordinator
    p.add_argument("--gpu-index", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--mps-dir", default=MPS_BASE_DIR, help=argparse.SUPPRESS)
    p.add_argument("--fake-gpus", action="store_true", help=argparse.SUPPRESS)  # tests: CPU workers with fake GPU UUIDs

    p = command(sub, "calibrate", "measure a job once beside a reference job; feed it back to predict --observed",
                cmd_calibrate,
                "A calibration co-run on the GPU (the measurement side: torch, and for MPS the MPS control daemon's tools): "
                f"measure JOB beside a fixed reference job in each mode, the pair in {CALIBRATION_WINDOWS} windows each "
                "bracketed by solo ones (a few minutes a mode), and write OUT/observed.json, which moves JOB's later "
                "predictions toward what was measured (predict --observed; docs/model.md, 'One calibration co-run').")
    p.add_argument("job", help="the job to calibrate: a zoo job, or an entry of --jobs-file")
    p.add_argument("--reference", default=CALIBRATION_REFERENCE_JOB,
                   help="the zoo job to measure it beside (chosen on the development architectures: research/probe_study.py)")
    p.add_argument("--jobs-file", help="JSON naming the training command of JOB (docs/formats.md)")
    p.add_argument("--mode", choices=(*MODES, "both"), default="both", help="sharing mode(s) to measure")
    p.add_argument("--out", required=True, help="campaign directory; observed.json is written in it")
    p.add_argument("--profiles", metavar="DIR",
                   help="folder holding JOB.json (and the reference's profile, else the shipped one of "
                        f"{CALIBRATION_REFERENCE_JOB} is used): observed.json names them, and the shift of JOB's predictions is printed")
    p.add_argument("--resume", action="store_true", help="continue an interrupted calibration in --out")
    _add_window_options(p)

    p = command(sub, "table", "tidy slowdown table of measurement records", cmd_table,
                "One row per (collocated window, job): solo and collocated ms, slowdown, δ, throughput.")
    p.add_argument("paths", nargs="+", help="campaign directories or windows.jsonl files")
    p.add_argument("-o", "--output", help="CSV to write (default: print; with --by-gpu: the agreement table)")
    p.add_argument("--observations", metavar="FILE",
                   help="write the measured sets as an observations file for colopred predict --observed (one per "
                        "mode and set, slowdowns averaged over its windows) instead of the table")
    p.add_argument("--profiles", metavar="DIR",
                   help="with --observations: name each job by its profile DIR/JOB.json (relative to FILE), so that "
                        "predict finds profiles not given on its command line")
    p.add_argument("--by-gpu", action="store_true",
                   help="windows per minute per GPU and the cross-GPU agreement of sets measured on several GPUs")
