"""The ``colopred`` command line: a thin layer over the library.

Errors a user can cause print one line (``colopred: error: FILE: problem``) and exit
non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .errors import ColopredError


def _err(msg: str) -> None:
    print(f"colopred: error: {msg}", file=sys.stderr)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------- profile
def cmd_profile_ncu(a) -> int:
    from .profiling.ncu_csv import read_ncu_csv
    from .profiling.ncu_profile import profile_from_ncu

    report = read_ncu_csv(a.report, process_id=a.process, device=a.device)
    p = profile_from_ncu(report, name=a.name, iteration_ms=a.iter_ms, iterations=a.iterations, peak_memory_gib=a.mem_gib,
                         meta={"ncu_report": Path(a.report).name})
    p.to_json(a.output)
    _log(f"wrote {a.output}: M = {p.dram_util_pct:.2f} %, occupancy = {p.achieved_occupancy_pct:.2f} %, "
         f"busy = {p.busy_fraction:.3f}, {p.kernels_per_iteration:.0f} kernels/iteration")
    return 0


def cmd_profile_show(a) -> int:
    from .profile import JobProfile

    for path in a.profiles:
        p = JobProfile.from_json(path)
        print(json.dumps(p.to_dict(), indent=2) if a.json else p.summary())
    return 0


def cmd_profile_retime(a) -> int:
    from .profile import JobProfile

    p = JobProfile.from_json(a.profile)
    try:
        r = p.retimed(a.iter_ms)
    except ValueError as e:
        raise ColopredError(f"{a.profile}: --iter-ms: {e}") from None
    r.to_json(a.output)
    _log(f"wrote {a.output}: {p.name} re-timed from {p.iteration_ms:.2f} ms to {r.iteration_ms:.2f} ms per iteration, "
         f"busy fraction {p.busy_fraction:.3f} -> {r.busy_fraction:.3f}")
    return 0


def cmd_profile_overlap(a) -> int:
    from dataclasses import replace

    from .profile import JobProfile
    from .profiling.timeline import overlap_of

    p = JobProfile.from_json(a.profile)
    overlap = overlap_of(a.timeline)
    replace(p, stream_overlap=overlap).to_json(a.output)
    _log(f"wrote {a.output}: {p.name} stream overlap {overlap:.3f} (kernel time / time a kernel runs, from {a.timeline})")
    return 0


def _target_command(a) -> tuple[list[str], str]:
    from .profiling.runner import zoo_command

    if a.zoo and a.cmd:
        raise ColopredError("give either --zoo JOB or a command after --, not both")
    if a.zoo:
        from .zoo.registry import JobSpec

        try:
            spec = JobSpec.parse(a.zoo)
        except ValueError as e:
            raise ColopredError(str(e)) from None
        return zoo_command(spec.name), a.name or spec.name
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        raise ColopredError("no command to profile: give --zoo JOB or `-- COMMAND ...`")
    if not a.name:
        raise ColopredError("--name is required when profiling a command")
    return cmd, a.name


def cmd_profile_run(a) -> int:
    from .profiling.runner import profile_command

    cmd, name = _target_command(a)
    p = profile_command(cmd, name=name, iterations=a.iterations, warmup=a.warmup, replay_mode=a.replay_mode,
                        metric_set=a.metric_set, keep_csv=Path(a.keep_csv) if a.keep_csv else None, log=_log)
    p.to_json(a.output)
    _log(f"wrote {a.output}")
    return 0


def cmd_profile_nvml(a) -> int:
    from .profiling.runner import profile_command_gpm

    cmd, name = _target_command(a)
    p = profile_command_gpm(cmd, name=name, warmup=a.warmup, timing_iters=a.timing_iters, interval_s=a.interval)
    p.to_json(a.output)
    _log(f"wrote {a.output}")
    return 0


# ----------------------------------------------------------------------- measure
def cmd_measure(a) -> int:
    from .harness.campaign import Campaign, Progress
    from .harness.plan import CampaignConfig, expand_sets
    from .zoo.registry import parse_jobs

    out = Path(a.out)
    if a.resume and not a.jobs:
        camp = Campaign(out, None, resume=True)
    else:
        if not a.jobs or not a.sets or not a.mode:
            raise ColopredError("--jobs, --sets and --mode are required (or --resume alone to continue a campaign)")
        try:
            jobs = [s.name for s in parse_jobs(a.jobs)]
        except ValueError as e:
            raise ColopredError(str(e)) from None
        sets = expand_sets(a.sets, jobs, max_sets=a.max_sets, seed=a.seed)
        modes = ("timeslice", "mps") if a.mode == "both" else (a.mode,)
        try:
            cfg = CampaignConfig(jobs=tuple(jobs), sets=tuple(sets), modes=modes, seed=a.seed, solo_every=a.solo_every,
                                 repeat_frac=a.repeat_frac, min_iters=a.min_iters, max_window_s=a.max_window_s)
        except ValueError as e:
            raise ColopredError(str(e)) from None
        camp = Campaign(out, cfg, resume=a.resume)
    from .harness.gpu_pool import make_pool_factory

    factory = make_pool_factory(device=a.device, tiny=a.tiny, use_nvml=not a.no_nvml, park_idle=a.park_idle,
                                log=_log if a.verbose else (lambda s: None))
    ran = camp.run(factory, progress=Progress(0, stream=None if a.quiet else sys.stderr), log=_log)
    _log(f"{ran} windows measured; records in {camp.records_path}")
    return 0


def cmd_measure_table(a) -> int:
    from .harness.reader import read_windows, slowdown_table

    t = slowdown_table(read_windows(a.paths))
    if a.output:
        t.to_csv(a.output, index=False)
        _log(f"wrote {a.output} ({len(t)} rows)")
    else:
        print(t.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    ap = argparse.ArgumentParser(prog="colopred", description="Predict the slowdown of training jobs collocated on one GPU.")
    ap.add_argument("--version", action="version", version=f"colopred {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    prof = sub.add_parser("profile", help="profile a job alone on the GPU, or turn a report into a profile")
    psub = prof.add_subparsers(dest="profile_command", required=True)

    p = psub.add_parser("ncu", help="turn an `ncu --csv --page raw` report into a profile")
    p.add_argument("report", help="ncu CSV (plain or .gz)")
    p.add_argument("--name", required=True, help="job name")
    p.add_argument("--iter-ms", type=float, required=True, help="solo iteration time in milliseconds, measured without the profiler")
    p.add_argument("--iterations", type=int, default=1, help="training iterations the report covers (default 1)")
    p.add_argument("--mem-gib", type=float, default=None, help="peak GPU memory of the job, GiB")
    p.add_argument("--process", type=int, default=None, help="process ID to keep when the report has several")
    p.add_argument("--device", type=int, default=None, help="device to keep when the report has several")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write")
    p.set_defaults(func=cmd_profile_ncu)

    p = psub.add_parser("show", help="print profiles readably")
    p.add_argument("profiles", nargs="+")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=cmd_profile_show)

    p = psub.add_parser("retime", help="re-time a profile: the job's solo iteration time on the machine where it will run")
    p.add_argument("profile", help="profile JSON")
    p.add_argument("--iter-ms", type=float, required=True,
                   help="solo iteration time in milliseconds, measured alone on the target machine (kernel time is kept)")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write (may be the input)")
    p.set_defaults(func=cmd_profile_retime)

    p = psub.add_parser("overlap", help="set a profile's stream overlap from the job's solo timeline")
    p.add_argument("profile", help="profile JSON")
    p.add_argument("--timeline", required=True,
                   help="the job's solo timeline: a torch.profiler Chrome trace with CUDA activity (.json, .json.gz) or "
                        "`python -m colopred.profiling.timeline`'s table (.csv.gz)")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write (may be the input)")
    p.set_defaults(func=cmd_profile_overlap)

    for name, helptext in (("run", "profile a command under ncu (GPU)"), ("nvml", "profile a command with NVML GPM counters (GPU)")):
        p = psub.add_parser(name, help=helptext)
        p.add_argument("--zoo", help="a zoo job to profile, e.g. resnet18-b64-fp32")
        p.add_argument("--name", help="job name (default: the zoo job's)")
        p.add_argument("--warmup", type=int, default=10, help="iterations before the window (default 10)")
        p.add_argument("-o", "--output", required=True)
        if name == "run":
            p.add_argument("--iterations", type=int, default=1, help="iterations profiled by ncu (default 1)")
            p.add_argument("--replay-mode", choices=("kernel", "application"), default="kernel")
            p.add_argument("--metric-set", choices=("full", "minimal"), default="full")
            p.add_argument("--keep-csv", help="also keep the ncu CSV here")
            p.set_defaults(func=cmd_profile_run)
        else:
            p.add_argument("--timing-iters", type=int, default=50, help="iterations timed while sampling (default 50)")
            p.add_argument("--interval", type=float, default=0.1, help="GPM sampling interval, s")
            p.set_defaults(func=cmd_profile_nvml)
        p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ... (its loop uses colopred.window.ProfileWindow)")

    p = sub.add_parser("measure", help="measure solo and collocated iteration times on the GPU")
    p.add_argument("--jobs", help="zoo jobs, comma separated")
    p.add_argument("--sets", help="pairs | triples | pairs+triples | FILE (one set per line, jobs joined by +)")
    p.add_argument("--mode", choices=("timeslice", "mps", "both"))
    p.add_argument("--out", required=True, help="campaign directory")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out")
    p.add_argument("--max-sets", type=int, default=None, help="sample at most N sets of each size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--solo-every", type=int, default=3, help="a solo window after every N collocated ones")
    p.add_argument("--repeat-frac", type=float, default=0.1, help="fraction of sets measured twice")
    p.add_argument("--min-iters", type=int, default=12, help="timed iterations per job and window")
    p.add_argument("--max-window-s", type=float, default=20.0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-nvml", action="store_true", help="do not sample GPM counters")
    p.add_argument("--park-idle", action="store_true",
                   help="keep idle workers' weights and optimizer state in host memory between windows "
                        "(for campaigns whose jobs do not all fit on the GPU at once)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("table", help="tidy slowdown table of measurement records")
    p.add_argument("paths", nargs="+", help="campaign directories or windows.jsonl files")
    p.add_argument("-o", "--output", help="CSV to write (default: print)")
    p.set_defaults(func=cmd_measure_table)

    try:
        from .modeling import cli as model_cli

        model_cli.add_commands(sub)
    except ImportError:  # pragma: no cover - modeling needs xgboost
        pass
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        return a.func(a) or 0
    except ColopredError as e:
        _err(str(e))
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted; completed windows are saved (continue with --resume)" if a.command == "measure" else "interrupted")
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
