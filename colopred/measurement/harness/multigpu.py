"""A campaign over several GPUs of a node (one shard process per GPU), Slurm job arrays across nodes, and the merge
of per-node campaign folders (``docs/campaigns.md``).

The coordinator (``colopred measure --gpus 0,1,2,3``) holds the campaign's lock, writes ``campaign.json`` and starts
one ``colopred measure --shard K`` process per GPU with ``CUDA_VISIBLE_DEVICES`` set to that GPU (in PCI bus order,
so CUDA's and NVML's indices agree) and, under MPS, its own MPS pipe and log folders: each shard has its own worker
pool and MPS control daemon, writes only its own ``windows.shardK.jsonl`` and holds its own lock. A shard that dies
(killed, crashed) is started again with ``--resume`` semantics up to ``MAX_SHARD_RESTARTS`` times; what it recorded
stays, and the windows it had not finished are measured again.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Protocol

from ...errors import ColopredError, InputError
from ...io import write_text_atomic
from .campaign import CONFIG_FILE, Campaign, CampaignLock, read_config, write_config
from .mps import MPS_BASE_DIR, visible_env
from .plan import CampaignConfig
from .records import iter_records
from .sharding import records_name, shard_of_file

MAX_SHARD_RESTARTS = 2
"""Times a shard that died is started again by the coordinator before the campaign gives up on it (a shard that
keeps dying is the GPU or a job, not bad luck; ``--resume`` later tries again)."""
NO_RESTART_CODES = (0, 2, 130)  # done, bad input (would fail again), interrupted on purpose (SIGINT/SIGTERM)


class Process(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


Launcher = Callable[[int, int], Process]  # (shard, GPU index) -> a started shard process


def parse_gpus(spec: str, count: Callable[[], int] | None = None) -> list[int]:
    """``0,1,2,3`` or ``all`` (every GPU NVML sees, or those in ``CUDA_VISIBLE_DEVICES`` where set) -> indices."""
    spec = spec.strip()
    if spec == "all":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible:
            spec = visible
        else:
            n = (count or nvml_device_count)()
            if n < 1:
                raise ColopredError("--gpus all: no GPU found")
            return list(range(n))
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ColopredError(f"--gpus: {part!r} is not a GPU index (give indices such as 0,1,2,3, or all)")
        out.append(int(part))
    if len(set(out)) != len(out):
        raise ColopredError(f"--gpus: a GPU is listed twice ({spec})")
    return out


def nvml_device_count() -> int:
    from ...errors import GpuError
    from ..nvml import device_count

    try:
        return device_count()
    except Exception as e:  # noqa: BLE001 - no NVML, no driver
        raise GpuError(f"--gpus all: cannot count the GPUs through NVML ({e.__class__.__name__}); list them instead") from None


def node_shards(config: CampaignConfig, n_gpus: int, node: int | None, nodes: int | None) -> list[int]:
    """The shards one node runs: all of them on one node; node K of N (each with ``n_gpus`` GPUs) runs K·n .. K·n+n−1."""
    if nodes is None:
        if n_gpus != config.shards:
            raise ColopredError(f"the campaign is spread over {config.shards} GPUs; --gpus names {n_gpus}")
        return list(range(config.shards))
    if node is None or not 0 <= node < nodes:
        raise ColopredError(f"--node must be one of 0..{nodes - 1} (or set SLURM_ARRAY_TASK_ID)")
    if n_gpus * nodes != config.shards:
        raise ColopredError(f"the campaign is spread over {config.shards} GPUs; --nodes {nodes} x --gpus {n_gpus} is {n_gpus * nodes}")
    return list(range(node * n_gpus, (node + 1) * n_gpus))


def shard_env(gpu_index: int, base: dict[str, str] | None = None, uuid: str | None = None) -> dict[str, str]:
    """The environment of a shard process: ``base`` (default: this process's) with only its GPU visible
    (:func:`mps.visible_env`)."""
    return {**(os.environ if base is None else base), **visible_env(gpu_index, uuid)}


def shard_command(out_dir: Path, shard: int, gpu_index: int, pool_args: list[str], mps_base: str = MPS_BASE_DIR) -> list[str]:
    """The command line of shard ``shard`` on GPU ``gpu_index``: its own MPS folders under ``mps_base``."""
    return [sys.executable, "-m", "colopred", "measure", "--out", str(out_dir), "--resume", "--shard", str(shard),
            "--gpu-index", str(gpu_index), "--mps-dir", f"{mps_base}/gpu{gpu_index}", *pool_args]


def _die_with_parent() -> None:
    """In a shard process before it runs (Linux): SIGTERM it when the coordinator dies, even by SIGKILL, so no
    orphaned shard goes on measuring (a shard stops its workers and MPS daemon on SIGTERM)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def subprocess_launcher(out_dir: Path, pool_args: list[str], uuids: dict[int, str] | None = None) -> Launcher:
    """Starts shard processes in the coordinator's process group (a signal to the group stops them all; on Linux
    they are also stopped when the coordinator dies), each logging to ``logs/shardK.log`` in the campaign folder."""
    logs = Path(out_dir) / "logs"

    def launch(shard: int, gpu_index: int) -> subprocess.Popen:
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"shard{shard}.log", "a") as f:
            return subprocess.Popen(shard_command(out_dir, shard, gpu_index, pool_args), stdout=f,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=shard_env(gpu_index, uuid=(uuids or {}).get(gpu_index)),
                                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    return launch


class ShardedCampaign:
    """A campaign over several GPUs: validates and stores its settings as :class:`Campaign` does, and runs its
    shards, one process per GPU, under the campaign's lock."""

    def __init__(self, out_dir: str | Path, config: CampaignConfig | None = None, *, resume: bool = False):
        self.campaign = Campaign(out_dir, config, resume=resume)
        self.config = self.campaign.config
        self.out_dir = self.campaign.out_dir

    @classmethod
    def of(cls, campaign: Campaign) -> "ShardedCampaign":
        """The sharded campaign of an already checked :class:`Campaign` (new or resumed)."""
        self = cls.__new__(cls)
        self.campaign, self.config, self.out_dir = campaign, campaign.config, campaign.out_dir
        return self

    def shard(self, k: int) -> Campaign:
        return Campaign(self.out_dir, None, resume=True, shard=k)

    def pending(self, k: int) -> int:
        """Windows shard ``k`` still has to run."""
        return _pending(self.shard(k))

    def run(self, gpus: list[int], launch: Launcher, *, shards: list[int] | None = None,
            log: Callable[[str], None] = lambda s: None, poll_s: float = 0.5, progress_s: float = 60.0) -> dict[int, int]:
        """Run ``shards`` (default: all) on ``gpus`` (one each, in order) until each finished, failed for good, or
        died more than ``MAX_SHARD_RESTARTS`` times. Returns each shard's last exit code (0: its plan is done)."""
        shards = list(range(self.config.shards)) if shards is None else shards
        if len(shards) != len(gpus):
            raise ColopredError(f"{len(shards)} shards to run on {len(gpus)} GPUs")
        with CampaignLock(self.out_dir):
            write_config(self.out_dir, self.config)
            gpu_of = dict(zip(shards, gpus))
            codes: dict[int, int] = {}
            running: dict[int, Process] = {}
            restarts = dict.fromkeys(shards, 0)
            parts = {k: self.shard(k) for k in shards}  # each shard's plan built once
            for k in shards:
                left = _pending(parts[k])
                if left == 0:
                    codes[k] = 0
                    continue
                log(f"shard {k} on GPU {gpu_of[k]}: {left} windows to run")
                running[k] = launch(k, gpu_of[k])
            total = sum(len(parts[k].plan) for k in shards)
            shown = time.monotonic()
            try:
                while running:
                    time.sleep(poll_s)
                    if time.monotonic() - shown >= progress_s:  # records so far (retries included), from the files' lines
                        shown = time.monotonic()
                        lines = sum(_lines(self.out_dir / records_name(k)) for k in shards)
                        log(f"{lines} of {total} windows recorded; {len(running)} shard(s) measuring")
                    for k, p in list(running.items()):
                        rc = p.poll()
                        if rc is None:
                            continue
                        del running[k]
                        codes[k] = rc
                        if rc in NO_RESTART_CODES:
                            log(f"shard {k} on GPU {gpu_of[k]}: {'done' if rc == 0 else f'stopped (exit {rc})'}")
                        elif restarts[k] < MAX_SHARD_RESTARTS:
                            restarts[k] += 1
                            log(f"shard {k} on GPU {gpu_of[k]} died (exit {rc}); starting it again ({restarts[k]}/{MAX_SHARD_RESTARTS})")
                            running[k] = launch(k, gpu_of[k])
                        else:
                            log(f"shard {k} on GPU {gpu_of[k]} died (exit {rc}) {MAX_SHARD_RESTARTS + 1} times; left for --resume")
            except BaseException:
                stop_all(running.values())
                raise
        return codes


def _pending(shard: Campaign) -> int:
    """Windows a shard's campaign still has to run."""
    return len(shard.plan) - len(shard.done_ids())


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def stop_all(procs) -> None:
    """SIGTERM every shard (each records nothing half-done: a window is one appended line), then SIGKILL stragglers."""
    procs = list(procs)
    for p in procs:
        try:
            p.send_signal(signal.SIGTERM)
        except (ProcessLookupError, OSError):
            pass
    deadline = time.monotonic() + 30
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()


# --------------------------------------------------------------------------------------------- across nodes
def merge_campaigns(sources: list[Path], out_dir: Path, log: Callable[[str], None] = lambda s: None) -> dict[int, int]:
    """Merge the folders of one campaign measured in parts (one per node of a Slurm job array) into ``out_dir``.

    Every source must hold the same settings and plan; each shard's records come from the one source that has
    them. The merged folder's shard file is the source's, byte for byte, written atomically; a shard already in
    ``out_dir`` is replaced only by a longer file that starts with it (records are append-only: a merge again
    after more windows were measured adds them, and never drops or rewrites one). Records are checked against the
    shard's plan (``Campaign.attempts``). Returns {shard: records} of the merged folder."""
    if not sources:
        raise ColopredError("nothing to merge")
    ref: tuple[CampaignConfig, str | None] | None = None
    found: dict[int, Path] = {}
    for src in sources:
        cfg_path = src / CONFIG_FILE
        if not cfg_path.is_file():
            raise InputError(src, f"no {CONFIG_FILE}: not a campaign folder")
        cfg, fp = read_config(cfg_path)
        if ref is None:
            ref = (cfg, fp)
        elif (cfg, fp) != ref:
            raise InputError(cfg_path, f"settings differ from {sources[0] / CONFIG_FILE}: not parts of one campaign")
        if (src / records_name(None)).exists():
            raise InputError(src / records_name(None), "a one-GPU record file: only campaigns over several GPUs are merged")
        for f in sorted(src.iterdir()):
            k = shard_of_file(f.name)
            if k is None:
                continue
            if k in found:
                raise InputError(f, f"shard {k}'s records are also in {found[k]}: measured twice? Keep one")
            found[k] = f
    cfg, fp = ref
    if cfg.shards < 2:
        raise InputError(sources[0] / CONFIG_FILE, "a one-GPU campaign: nothing to merge")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with CampaignLock(out_dir):
        out_cfg = out_dir / CONFIG_FILE
        if out_cfg.exists():
            if read_config(out_cfg) != ref:
                raise InputError(out_cfg, "holds another campaign's settings")
        else:
            write_text_atomic(out_cfg, (sources[0] / CONFIG_FILE).read_text())
        counts = {}
        for k, f in sorted(found.items()):
            Campaign(f.parent, None, resume=True, shard=k).attempts()  # every record is of shard k's plan
            data = f.read_bytes()
            dest = out_dir / f.name
            if dest.exists():
                old = dest.read_bytes()
                if not data.startswith(old):
                    raise InputError(f, f"does not extend {dest} (records are append-only): not the same shard's records")
                if data == old:
                    counts[k] = data.count(b"\n")
                    continue
            write_text_atomic(dest, data.decode("utf-8"))
            counts[k] = data.count(b"\n")
            log(f"shard {k}: {counts[k]} records from {f.parent}")
    return counts


SBATCH_TEMPLATE = """#!/bin/bash
# colopred campaign over {nodes} node(s) x {gpus} GPU(s): one Slurm array task per node (docs/campaigns.md).
# Each task measures its node's shards into {root}/nodes/node-$SLURM_ARRAY_TASK_ID; a task that is requeued or
# submitted again resumes there. When the array is done: colopred campaign merge {root}/nodes/node-* --out {root}/merged
#SBATCH --job-name={name}
#SBATCH --array=0-{last}
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:{gpus}
#SBATCH --exclusive
#SBATCH --time={time}
#SBATCH --output={root}/logs/node-%a.out
{extra}
set -euo pipefail
{setup}
cd {workdir}
node_dir={root}/nodes/node-$SLURM_ARRAY_TASK_ID
if [ -f "$node_dir/campaign.json" ]; then
  exec {python} -m colopred measure --out "$node_dir" --resume --gpus all --nodes {nodes} --node "$SLURM_ARRAY_TASK_ID" {pool_args}
else
  exec {python} -m colopred measure --out "$node_dir" --gpus all --nodes {nodes} --node "$SLURM_ARRAY_TASK_ID" {plan_args} {pool_args}
fi
"""


def sbatch_script(root: Path, *, nodes: int, gpus: int, plan_args: list[str], pool_args: list[str], name: str = "colopred",
                  time_limit: str = "24:00:00", setup: str = "", workdir: str | None = None, python: str = "python3",
                  extra_sbatch: list[str] = ()) -> str:
    """An sbatch script of a Slurm job array measuring one campaign over ``nodes`` nodes of ``gpus`` GPUs each."""
    if nodes < 1 or gpus < 1:
        raise ColopredError("--nodes and --gpus-per-node must be at least 1")
    q = shlex.quote
    return SBATCH_TEMPLATE.format(nodes=nodes, gpus=gpus, root=q(str(root)), name=q(name), last=nodes - 1, time=time_limit,
                                  extra="\n".join(f"#SBATCH {x}" for x in extra_sbatch), setup=setup,
                                  workdir=q(workdir or os.getcwd()), python=q(python),
                                  plan_args=" ".join(map(q, plan_args)), pool_args=" ".join(map(q, pool_args)))


def shard_record_counts(out_dir: Path) -> dict[int, int]:
    """Records in each shard file of a campaign folder (for summaries)."""
    out = {}
    for f in sorted(Path(out_dir).iterdir()):
        k = shard_of_file(f.name)
        if k is not None:
            out[k] = sum(1 for _ in iter_records(f))
    return out

