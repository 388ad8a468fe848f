"""``colopred campaign sbatch`` (a Slurm job array measuring one campaign over several nodes) and ``colopred campaign
merge`` (its per-node folders -> one campaign folder); ``docs/campaigns.md``."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

SLURM_TIME = re.compile(r"^(?:\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2}|unlimited|infinite)$",
                        re.IGNORECASE)
"""Slurm's ``--time`` formats (sbatch(1)): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
days-hours:minutes, days-hours:minutes:seconds, or UNLIMITED / INFINITE."""


def check_measure_plan(plan: list[str]) -> None:
    """Refuse (:class:`ColopredError`, one line) measure options that ``colopred measure`` would refuse on the nodes:
    options it does not know or values it rejects (its own parser), a missing --jobs/--sets/--mode, and job names
    or set choices that plan no set. A ``--jobs-file`` is read where it can be (it may only exist on the nodes)."""
    from ..errors import ColopredError
    from ..measurement.harness.plan import expand_sets
    from .measure_commands import _campaign_jobs, parse_measure_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = parse_measure_args(["measure", *plan, "--out", "campaign"])
    except SystemExit:
        why = err.getvalue().strip().splitlines()[-1:] or ["invalid options"]
        raise ColopredError(f"the measure options after --: {why[0].split('error: ', 1)[-1]}") from None
    if not (a.jobs or a.jobs_file) or not a.sets or not a.mode:
        raise ColopredError("the measure options after -- need --jobs (or --jobs-file), --sets and --mode")
    if a.jobs_file and not Path(a.jobs_file).is_file():
        return  # only on the nodes: the tasks check it
    jobs, _ = _campaign_jobs(a.jobs, a.jobs_file)
    if not expand_sets(a.sets, jobs, max_sets=a.max_sets, seed=a.seed):
        raise ColopredError(f"the measure options after --: --sets {a.sets} of {len(jobs)} job(s) makes no set to measure")


def cmd_sbatch(a) -> int:
    from ..errors import ColopredError
    from ..io import check_output, write_text_atomic
    from ..measurement.harness.multigpu import sbatch_script
    from .common import log_of

    plan = a.measure_args[1:] if a.measure_args[:1] == ["--"] else a.measure_args
    for bad in ("--out", "--gpus", "--nodes", "--node", "--resume"):
        if any(x == bad or x.startswith(bad + "=") for x in plan):
            raise ColopredError(f"{bad} is set by the script; give the campaign's other measure options after --")
    if not SLURM_TIME.match(a.time):
        raise ColopredError(f"--time {a.time!r} is not a Slurm time limit (minutes, HH:MM:SS, D-HH:MM:SS, ... or UNLIMITED)")
    check_measure_plan(plan)
    pool = [x for x in plan if x in ("--tiny", "--no-nvml", "--park-idle", "--fake-gpus", "-v", "-q", "--no-progress")]
    plan = [x for x in plan if x not in pool]
    text = sbatch_script(Path(a.root).resolve(), nodes=a.nodes, gpus=a.gpus_per_node, plan_args=plan, pool_args=pool + ["--no-progress"],
                         name=a.name, time_limit=a.time, setup=a.setup, workdir=a.workdir, python=a.python, extra_sbatch=a.sbatch)
    if a.output:
        check_output(a.output)
        (Path(a.root) / "logs").mkdir(parents=True, exist_ok=True)  # Slurm writes the tasks' output there
        write_text_atomic(a.output, text)
        log_of(a)(f"wrote {a.output}: sbatch {a.output}, then colopred campaign merge {a.root}/nodes/node-* --out {a.root}/merged")
    else:
        print(text, end="")
    return 0


def cmd_merge(a) -> int:
    from ..errors import InputError
    from ..measurement.harness.multigpu import merge_campaigns
    from .common import log_of

    log = log_of(a)
    sources = [Path(p) for p in a.sources]
    for s in sources:
        if not s.is_dir():
            raise InputError(s, "not a campaign folder")
    counts = merge_campaigns(sources, Path(a.out), log=log.detail)
    log(f"merged {len(counts)} shard(s), {sum(counts.values())} records, into {a.out}")
    return 0


def add_commands(sub) -> None:
    from .common import command

    p = sub.add_parser("campaign", help="campaigns over several nodes: Slurm job array script, merge of per-node folders",
                       description="Campaigns over several nodes (docs/campaigns.md).")
    csub = p.add_subparsers(dest="campaign_command", required=True, metavar="SUBCOMMAND")
    q = command(csub, "sbatch", "write an sbatch script: one Slurm array task per node, each measuring its GPUs' shards", cmd_sbatch)
    q.add_argument("--root", required=True, help="shared folder of the campaign: nodes/node-K/ per array task, logs/")
    q.add_argument("--nodes", type=int, required=True, help="array tasks (nodes)")
    q.add_argument("--gpus-per-node", type=int, required=True, help="GPUs each task measures with (--gres=gpu:N)")
    q.add_argument("--name", default="colopred", help="Slurm job name")
    q.add_argument("--time", default="24:00:00", help="Slurm time limit per task")
    q.add_argument("--setup", default="", help="shell lines run before measuring (module load ..., source venv/bin/activate)")
    q.add_argument("--workdir", default=None, help="folder the tasks run in (default: this one)")
    q.add_argument("--python", default="python3", help="Python of the nodes")
    q.add_argument("--sbatch", action="append", default=[], help="another #SBATCH line, e.g. --sbatch=--partition=gpu (repeatable)")
    q.add_argument("-o", "--output", help="script to write (default: print)")
    q.add_argument("measure_args", nargs=argparse.REMAINDER,
                   help="-- then the campaign's colopred measure options (--jobs, --sets, --mode, ...)")
    q = command(csub, "merge", "merge the per-node folders of one campaign into one campaign folder", cmd_merge)
    q.add_argument("sources", nargs="+", help="per-node campaign folders (nodes/node-*)")
    q.add_argument("--out", required=True, help="merged campaign folder (created; merged again, it takes the new records)")
