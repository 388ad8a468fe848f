"""Jobs that are not in the zoo: any training command whose loop uses :class:`colopred.window.ProfileWindow`.

A jobs file (``colopred measure --jobs-file jobs.json``) names them::

    {"jobs": [{"name": "mytrain", "command": ["python", "examples/my_train.py", "--device", "cuda"],
               "env": {"OMP_NUM_THREADS": "4"}, "cwd": ".", "peak_memory_gib": 3.1}]}

``command`` is an argv list (no shell); ``env`` adds environment variables; ``cwd`` is the folder it runs in
(relative to the jobs file's folder; default: where ``measure`` runs); ``peak_memory_gib`` (or ``profile``, a
JobProfile whose ``peak_memory_gib`` is taken) sizes the pool's memory plan before the job's first window
(without either, the job's own report when it starts counts). The entry is kept in the campaign's
``campaign.json`` and in every record of a window the job runs in (``commands``), so a resumed campaign runs
the same commands and the records say what was measured.

In the campaign the command runs as a worker of the pool (:class:`CommandProcess`): it is started with
``COLOPRED_WINDOW=worker`` and one end of a socket pair as ``COLOPRED_WORKER_FD``, over which its
``ProfileWindow`` speaks the zoo workers' protocol (:mod:`colopred.measurement.harness.worker`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...constants import MAX_GPU_MEMORY_GIB
from ...errors import InputError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,99}$")
"""A job name fits a window id (``MODE:N:KIND:A+B:rR``) and a file name: no ``+``, ``:``, ``,``, ``/`` or space."""
WARMUP_ITERS = 5  # iterations before the worker reports ready, as a zoo worker's


@dataclass(frozen=True)
class JobCommand:
    name: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    peak_memory_gib: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "command": list(self.command)}
        if self.env:
            d["env"] = dict(self.env)
        if self.cwd is not None:
            d["cwd"] = self.cwd
        if self.peak_memory_gib is not None:
            d["peak_memory_gib"] = self.peak_memory_gib
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "a job", base: Path | None = None) -> "JobCommand":
        """An entry, checked: raises ValueError with a short reason naming ``where``."""
        if not isinstance(d, dict):
            raise ValueError(f"{where} is not a JSON object")
        unknown = set(d) - {"name", "command", "env", "cwd", "peak_memory_gib", "profile"}
        if unknown:
            raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r} (name, command, env, cwd, peak_memory_gib, profile)")
        name = d.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise ValueError(f"{where}: name {str(name)[:40]!r} must be 1-100 letters, digits, _ . = - (no + : , / or spaces)")
        cmd = d.get("command")
        if not isinstance(cmd, list) or not cmd or not all(isinstance(x, str) and x for x in cmd):
            raise ValueError(f"job {name}: command must be a non-empty list of strings (argv, no shell)")
        env = d.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in env.items()):
            raise ValueError(f"job {name}: env must map variable names to strings")
        if any(k.startswith("COLOPRED_") for k in env):
            raise ValueError(f"job {name}: env must not set COLOPRED_* variables (the harness sets them)")
        cwd = d.get("cwd")
        if cwd is not None:
            if not isinstance(cwd, str) or not cwd:
                raise ValueError(f"job {name}: cwd must be a folder name")
            if base is not None:
                cwd = os.path.normpath(base / cwd)
        peak = d.get("peak_memory_gib")
        if "profile" in d:
            if peak is not None:
                raise ValueError(f"job {name}: give peak_memory_gib or profile, not both")
            from ...profile import JobProfile

            prof = Path(str(d["profile"]))
            prof = base / prof if base is not None and not prof.is_absolute() else prof
            try:
                peak = JobProfile.from_json(prof).peak_memory_gib
            except InputError as e:
                raise ValueError(f"job {name}: profile {e}") from None
        if peak is not None and (isinstance(peak, bool) or not isinstance(peak, (int, float)) or not 0 < peak <= MAX_GPU_MEMORY_GIB):
            raise ValueError(f"job {name}: peak_memory_gib must be a number of GiB in (0, {MAX_GPU_MEMORY_GIB:g}]")
        return cls(name, tuple(cmd), tuple(sorted(env.items())), cwd, None if peak is None else float(peak))


def read_jobs_file(path: str | os.PathLike) -> dict[str, JobCommand]:
    """The jobs of a jobs file by name; every problem is one InputError naming the file."""
    from ..zoo.registry import JobSpec

    from ...io import read_json

    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list) or not doc["jobs"]:
        raise InputError(path, 'not a jobs file: expected {"jobs": [{"name": ..., "command": [...]}, ...]}')
    out: dict[str, JobCommand] = {}
    for i, entry in enumerate(doc["jobs"], 1):
        try:
            job = JobCommand.from_dict(entry, f"job {i}", base=path.parent.resolve())
        except ValueError as e:
            raise InputError(path, str(e)) from None
        if job.name in out:
            raise InputError(path, f"job {job.name} is named twice")
        try:
            JobSpec.parse(job.name)
        except ValueError:
            pass
        else:
            raise InputError(path, f"job {job.name}: that is a zoo job's name; name your command otherwise")
        out[job.name] = job
    return out


class CommandProcess:
    """A worker that is a command (a ``subprocess.Popen``), with the parts of ``multiprocessing.Process`` the pool
    uses. Its stderr goes to a temporary file whose last lines explain a worker that dies."""

    def __init__(self, job: JobCommand, child_fd: int):
        self.job = job
        self._log = tempfile.TemporaryFile()
        env = {**os.environ, **dict(job.env), "COLOPRED_WINDOW": "worker",
               "COLOPRED_WORKER_FD": str(child_fd), "COLOPRED_WARMUP": str(WARMUP_ITERS), "PYTHONUNBUFFERED": "1"}
        try:
            self.popen = subprocess.Popen(list(job.command), env=env, cwd=job.cwd, pass_fds=(child_fd,),
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
        except OSError as e:
            self.popen = None
            self.start_error = f"cannot start {job.command[0]!r} ({e.strerror or e.__class__.__name__})"
        else:
            self.start_error = None

    def is_alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def join(self, timeout: float | None = None) -> None:
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                pass

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()

    def tail(self) -> str:
        """Why the command ended: its start error or the last line of its stderr."""
        if self.start_error:
            return self.start_error
        try:
            self._log.seek(0)
            lines = [l for l in self._log.read().decode("utf-8", "replace").splitlines() if l.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1].strip()[:200] if lines else ""


def spawn_command(ctx, job: JobCommand):
    """(process, the pool's end of the connection) of a command worker."""
    parent, child = ctx.Pipe()
    proc = CommandProcess(job, child.fileno())
    child.close()
    return proc, parent
