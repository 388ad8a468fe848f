"""``colopred measure`` (GPU: solo and collocated iteration times) and ``colopred table`` (records -> slowdowns)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..constants import MODES
from ..errors import ColopredError, InputError


def cmd_measure(a) -> int:
    from ..measurement.harness.campaign import Campaign, Progress
    from ..measurement.harness.plan import CampaignConfig, expand_sets
    from . import log_of

    log = log_of(a)
    out = Path(a.out)
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
            cfg = CampaignConfig(jobs=tuple(jobs), sets=tuple(sets), modes=modes, seed=a.seed, solo_every=a.solo_every,
                                 repeat_frac=a.repeat_frac, min_iters=a.min_iters, max_window_s=a.max_window_s,
                                 commands=tuple(commands[j] for j in jobs if j in commands))
        except ValueError as e:
            raise ColopredError(str(e)) from None
        camp = Campaign(out, cfg, resume=a.resume)
    from ..measurement.harness.gpu_pool import make_pool_factory

    factory = make_pool_factory(device=a.device, tiny=a.tiny, use_nvml=not a.no_nvml, park_idle=a.park_idle,
                                commands={c.name: c for c in camp.config.commands}, log=log.detail)
    ran = camp.run(factory, progress=Progress(0, stream=None if a.quiet or a.no_progress else sys.stderr), log=log)
    log(f"{ran} windows measured; records in {camp.records_path}")
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
    from . import log_of

    if a.output:
        check_output(a.output, *a.paths)

    windows = read_windows(a.paths)
    if windows.empty:
        raise InputError(a.paths[0], "holds no window records")
    t = slowdown_table(windows)
    if t.empty:
        raise InputError(a.paths[0], "no collocated window with solo baselines of its jobs: nothing to tabulate")
    if a.output:
        write_csv_atomic(t, a.output, index=False)
        log_of(a)(f"wrote {a.output} ({len(t)} rows)")
    else:
        print(t.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def add_commands(sub) -> None:
    from . import command

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
    p.add_argument("--repeat-frac", type=float, default=0.1, help="fraction of sets measured twice")
    p.add_argument("--min-iters", type=int, default=12, help="timed iterations per job and window")
    p.add_argument("--max-window-s", type=float, default=20.0, help="longest window, seconds")
    p.add_argument("--device", default="cuda", help="torch device of the workers")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-nvml", action="store_true", help="do not sample GPM counters")
    p.add_argument("--park-idle", action="store_true",
                   help="keep idle workers' weights and optimizer state in host memory between windows "
                        "(for campaigns whose jobs do not all fit on the GPU at once)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs); progress lines still print")

    p = command(sub, "table", "tidy slowdown table of measurement records", cmd_table,
                "One row per (collocated window, job): solo and collocated ms, slowdown, δ, throughput.")
    p.add_argument("paths", nargs="+", help="campaign directories or windows.jsonl files")
    p.add_argument("-o", "--output", help="CSV to write (default: print)")
