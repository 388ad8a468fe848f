"""``colopred profile ...``: turn a report into a profile, show, re-time, set the stream overlap, profile on a GPU."""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

from ..errors import ColopredError, InputError


def check_name(name: str | None, flag: str = "--name") -> None:
    """A job name as profiles accept it: non-empty, one line, at most MAX_NAME_LENGTH characters."""
    from ..constants import MAX_NAME_LENGTH

    if name is None:
        return
    if not name.strip():
        raise ColopredError(f"{flag} must not be empty")
    if len(name) > MAX_NAME_LENGTH or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ColopredError(f"{flag} must be one line of at most {MAX_NAME_LENGTH} characters")


def check_number(value: float | None, flag: str, *, positive: bool = True, maximum: float | None = None, unit: str = "") -> None:
    """A numeric option: finite, positive where asked, at most ``maximum``."""
    import math

    if value is None:
        return
    if not math.isfinite(value) or (positive and value <= 0):
        raise ColopredError(f"{flag} must be a finite positive number{unit}, not {value!r}")
    if maximum is not None and value > maximum:
        raise ColopredError(f"{flag} {value:g} is more than {maximum:g}{unit}: a unit mistake?")


def cmd_ncu(a) -> int:
    from ..constants import MAX_GPU_MEMORY_GIB
    from ..io import check_output
    from ..measurement.profiling.ncu_csv import read_ncu_csv
    from ..measurement.profiling.ncu_profile import profile_from_ncu
    from ..measurement.profiling.ncu_rep import export_ncu_rep, is_ncu_rep
    from .common import log_of, print_warnings

    check_name(a.name)
    check_number(a.mem_gib, "--mem-gib", maximum=MAX_GPU_MEMORY_GIB, unit=" GiB")
    if a.iterations < 1:
        raise ColopredError(f"--iterations must be a positive integer, not {a.iterations}")
    check_output(a.output, a.report)
    with warnings.catch_warnings(record=True) as caught:  # an optional metric left out: said once, on stderr
        warnings.simplefilter("always")
        if is_ncu_rep(a.report):  # Nsight Compute's binary report: ncu exports it to the CSV read below
            with tempfile.TemporaryDirectory() as d:
                csv_path = Path(d) / (Path(a.report).name + ".csv")
                export_ncu_rep(a.report, csv_path)
                try:
                    report = read_ncu_csv(csv_path, process_id=a.process, device=a.device)
                except InputError as e:
                    raise InputError(a.report, f"exported by ncu: {e.problem}") from None
        else:
            report = read_ncu_csv(a.report, process_id=a.process, device=a.device)
        p = profile_from_ncu(report, name=a.name, iteration_ms=a.iter_ms, iterations=a.iterations, peak_memory_gib=a.mem_gib,
                             meta={"ncu_report": Path(a.report).name})
    print_warnings(caught)
    p.to_json(a.output)
    log_of(a)(f"wrote {a.output}: M = {p.dram_util_pct:.2f} %, occupancy = {p.achieved_occupancy_pct:.2f} %, "
              f"busy = {p.busy_fraction:.3f}, {p.kernels_per_iteration:.0f} kernels/iteration")
    return 0


def cmd_show(a) -> int:
    from ..profile import JobProfile

    profiles = [JobProfile.from_json(path) for path in a.profiles]  # every file read before anything is printed
    for p in profiles:
        print(json.dumps(p.to_dict(), indent=2) if a.json else p.summary())
    return 0


def cmd_retime(a) -> int:
    from ..constants import MAX_BUSY_FRACTION_FROM_NCU
    from ..io import check_output
    from ..profile import JobProfile
    from .common import log_of

    check_output(a.output)
    p = JobProfile.from_json(a.profile)
    try:  # the bound `profile ncu` sets on kernel time per iteration over the iteration time
        r = p.retimed(a.iter_ms, max_busy_fraction=MAX_BUSY_FRACTION_FROM_NCU)
    except ValueError as e:
        raise ColopredError(f"{a.profile}: --iter-ms {a.iter_ms:g}: {e}") from None
    r.to_json(a.output)
    log_of(a)(f"wrote {a.output}: {p.name} re-timed from {p.iteration_ms:.2f} ms to {r.iteration_ms:.2f} ms per iteration, "
              f"busy fraction {p.busy_fraction:.3f} -> {r.busy_fraction:.3f}")
    return 0


def cmd_add_timeline(a) -> int:
    from ..io import check_output
    from ..measurement.profiling.timeline import with_timeline
    from ..profile import JobProfile
    from ..runtime.sources import timeline_fields_of
    from .common import log_of

    if a.iterations is not None and a.iterations < 1:
        raise ColopredError(f"--iterations must be a positive integer, not {a.iterations}")
    check_output(a.output, a.timeline)
    p = JobProfile.from_json(a.profile)
    new = with_timeline(p, a.timeline, a.iterations)
    new.to_json(a.output)
    log_of(a)(f"wrote {a.output}: {p.name} " + ", ".join(f"{f} {getattr(new, f):.3f}" for f in timeline_fields_of(p.source))
              + f" (from {a.timeline})")
    return 0


def _target_command(a) -> tuple[list[str], str]:
    from ..measurement.profiling.runner import zoo_command

    if a.zoo and a.cmd:
        raise ColopredError("give either --zoo JOB or a command after --, not both")
    if a.zoo:
        from ..measurement.zoo.registry import JobSpec

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
    check_name(a.name)
    return cmd, a.name


def cmd_run(a) -> int:
    from ..io import check_output
    from ..measurement.profiling.runner import profile_command
    from .common import log_of

    cmd, name = _target_command(a)
    check_output(a.output)
    log = log_of(a)
    p = profile_command(cmd, name=name, iterations=a.iterations, warmup=a.warmup, replay_mode=a.replay_mode,
                        metric_set=a.metric_set, keep_csv=Path(a.keep_csv) if a.keep_csv else None, timeline=not a.no_timeline,
                        log=log)
    p.to_json(a.output)
    log(f"wrote {a.output}")
    return 0


def cmd_nvml(a) -> int:
    from ..io import check_output
    from ..measurement.profiling.runner import profile_command_gpm
    from .common import log_of

    cmd, name = _target_command(a)
    check_output(a.output)
    p = profile_command_gpm(cmd, name=name, warmup=a.warmup, timing_iters=a.timing_iters, interval_s=a.interval,
                            timeline=not a.no_timeline, log=log_of(a))
    p.to_json(a.output)
    log_of(a)(f"wrote {a.output}")
    return 0


def cmd_timeline(a) -> int:  # pragma: no cover - GPU
    from ..measurement.profiling.timeline import capture
    from .common import log_of

    try:
        from ..measurement.zoo.registry import JobSpec

        job = JobSpec.parse(a.zoo).name
    except ValueError as e:
        raise ColopredError(str(e)) from None
    m = capture(job, a.out, a.iterations, a.warmup, a.keep_trace)
    plain = sum(m["iter_ms_plain"]) / len(m["iter_ms_plain"])
    traced = sum(m["iter_ms_traced"]) / len(m["iter_ms_traced"])
    log_of(a)(f"{job}: {m['kernels']} kernels in {m['iterations']} iterations, {plain:.2f} ms plain, {traced:.2f} ms traced")
    return 0


def add_commands(sub) -> None:
    from ..constants import TIMELINE_ITERS, TIMELINE_WARMUP_ITERS
    from .common import HelpFormatter, command

    prof = sub.add_parser("profile", help="profile a job alone on the GPU, or turn a report into a profile", formatter_class=HelpFormatter)
    psub = prof.add_subparsers(dest="profile_command", required=True, metavar="SUBCOMMAND")

    p = command(psub, "ncu", "turn an ncu report (`ncu --csv --page raw` CSV, or .ncu-rep) into a profile", cmd_ncu)
    p.add_argument("report", help="ncu CSV report (plain or .gz), or an .ncu-rep file (read through `ncu --import`)")
    p.add_argument("--name", required=True, help="job name")
    p.add_argument("--iter-ms", type=float, required=True, help="solo iteration time in milliseconds, measured without the profiler")
    p.add_argument("--iterations", type=int, default=1, help="training iterations the report covers")
    p.add_argument("--mem-gib", type=float, default=None, help="peak GPU memory of the job, GiB (unknown if not given)")
    p.add_argument("--process", type=int, default=None, help="process ID to keep when the report has several")
    p.add_argument("--device", type=int, default=None, help="device to keep when the report has several")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write")

    p = command(psub, "show", "print profiles readably", cmd_show)
    p.add_argument("profiles", nargs="+", help="profile JSON files")
    p.add_argument("--json", action="store_true", help="print the JSON document")

    p = command(psub, "retime", "re-time a profile to the job's solo iteration time on the machine where it will run", cmd_retime)
    p.add_argument("profile", help="profile JSON")
    p.add_argument("--iter-ms", type=float, required=True,
                   help="solo iteration time in milliseconds, measured alone on the target machine (kernel time is kept)")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write (may be the input)")

    for name in ("add-timeline", "overlap"):  # "overlap": the command's name before it also completed GPM profiles
        what = ("set a profile's fields from the job's solo timeline: the stream overlap; for a GPM profile also the kernel "
                "count and MPS wait its model reads")
        p = command(psub, name, what if name == "add-timeline" else "the former name of add-timeline (kept for scripts)",
                    cmd_add_timeline)
        p.add_argument("profile", help="profile JSON")
        p.add_argument("--timeline", required=True,
                       help="the job's solo timeline: a torch.profiler Chrome trace with CUDA activity (.json, .json.gz) or "
                            "`colopred profile timeline`'s table (.csv.gz, with its .json beside it)")
        p.add_argument("--iterations", type=int, help="training iterations the trace holds (a GPM profile from a trace)")
        p.add_argument("-o", "--output", required=True, help="profile JSON to write (may be the input)")

    for name, helptext in (("run", "profile a command under ncu (GPU)"), ("nvml", "profile a command with NVML GPM counters (GPU)")):
        p = command(psub, name, helptext, cmd_run if name == "run" else cmd_nvml)
        p.add_argument("--zoo", help="a zoo job to profile, e.g. resnet18-b64-fp32")
        p.add_argument("--name", help="job name (default: the zoo job's)")
        p.add_argument("--warmup", type=int, default=10, help="iterations before the window")
        p.add_argument("-o", "--output", required=True, help="profile JSON to write")
        if name == "run":
            p.add_argument("--iterations", type=int, default=1, help="iterations profiled by ncu")
            p.add_argument("--replay-mode", choices=("kernel", "application"), default="kernel", help="ncu replay mode")
            p.add_argument("--metric-set", choices=("full", "minimal"), default="minimal",
                           help="ncu metrics: minimal (duration, DRAM, occupancy, and the launch statistics ncu adds to any "
                                "set: all the models read) or full (also SM throughput and L2 hit rate, which no model reads; "
                                "3-5x the profiling time, docs/model.md)")
            p.add_argument("--keep-csv", help="also keep the ncu CSV here")
            p.add_argument("--no-timeline", action="store_true",
                           help="skip the traced run that sets the stream overlap from a solo timeline (then it counts as 1)")
        else:
            p.add_argument("--timing-iters", type=int, default=50,
                           help="iterations timed while sampling (more until the window lasts 20 sampling intervals)")
            p.add_argument("--interval", type=float, default=0.1, help="GPM sampling interval, s")
            p.add_argument("--no-timeline", action="store_true",
                           help="skip the traced run that gives the kernel count and MPS wait (the GPM model then refuses "
                                "the profile until `colopred profile add-timeline` adds them)")
        p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ... (its loop uses colopred.window.ProfileWindow)")

    p = command(psub, "timeline", "record a zoo job's solo timeline with torch.profiler (GPU)", cmd_timeline)
    p.add_argument("--zoo", required=True, help="zoo job, e.g. lstm_lm-b64-fp32")
    p.add_argument("--out", required=True, help="folder for JOB.timeline.csv.gz and JOB.timeline.json")
    p.add_argument("--iterations", type=int, default=TIMELINE_ITERS, help="iterations timed, then traced")
    p.add_argument("--warmup", type=int, default=TIMELINE_WARMUP_ITERS, help="iterations before timing")
    p.add_argument("--keep-trace", action="store_true", help="also keep torch's Chrome trace (gzipped)")
