"""The CUDA MPS control daemon, started and stopped by the harness with its own directories.

Never touches clocks, compute mode or MIG: MPS works in the default compute mode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from ...errors import GpuError

CONTROL = "nvidia-cuda-mps-control"
MPS_BASE_DIR = "/tmp/colopred-mps"  # the harness's own MPS pipe and log directories live under it (one per GPU)


def visible_env(gpu_index: int, uuid: str | None = None) -> dict[str, str]:
    """The environment variables that show CUDA only GPU ``gpu_index`` of the node: by UUID where known, else by index
    in PCI bus order (NVML's order). The MPS server remaps the GPUs CUDA_VISIBLE_DEVICES gives its daemon (the daemon's
    GPU is its clients' device 0): a UUID names the same GPU to the daemon and its clients, an index does not, so
    :meth:`MpsDaemon.start` keeps a UUID in its clients' environment and drops an index (NVIDIA MPS docs, "Environment
    Variables")."""
    return {"CUDA_VISIBLE_DEVICES": uuid or str(gpu_index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _names_by_uuid(visible: str) -> bool:
    """Whether a CUDA_VISIBLE_DEVICES value names its GPUs by UUID (``GPU-...``, ``MIG-...``) alone."""
    return all(v.strip().startswith(("GPU-", "MIG-")) for v in visible.split(","))


class MpsDaemon:
    """``start()`` launches ``nvidia-cuda-mps-control -d`` with private pipe/log directories and
    points this process's environment (inherited by workers) at it; ``stop()`` sends ``quit``."""

    def __init__(self, base_dir: str | os.PathLike = MPS_BASE_DIR):
        base = Path(base_dir)
        self.pipe_dir = base / "pipe"
        self.log_dir = base / "log"
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}
        self.running = False
        self._client_visible: str | None = None

    def _control(self, command: str, timeout: float = 15.0) -> str:
        env = {**os.environ, **self.env}
        try:
            p = subprocess.run([CONTROL], input=command + "\n", env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GpuError(f"MPS control did not answer {command!r} within {timeout:.0f} s") from None
        if p.returncode != 0:
            raise GpuError(f"MPS control {command!r} failed: {(p.stderr or p.stdout).strip()}")
        return p.stdout

    def start(self) -> None:
        if shutil.which(CONTROL) is None:
            raise GpuError(f"{CONTROL} is not on PATH: MPS mode needs the CUDA MPS tools")
        if (self.pipe_dir / "control").exists():
            # A daemon left over from an interrupted campaign: stop it first.
            try:
                self._control("quit", timeout=10)
                time.sleep(1.0)
            except GpuError:
                pass
        self.pipe_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        p = subprocess.run([CONTROL, "-d"], env=env, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise GpuError(f"cannot start the MPS daemon: {(p.stderr or p.stdout).strip()}")
        os.environ.update(self.env)
        # A client keeping an index the MPS server remapped fails (visible_env): a daemon started for GPU 2 of a node,
        # say, leaves its workers without the index.
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and not _names_by_uuid(visible):
            self._client_visible = os.environ.pop("CUDA_VISIBLE_DEVICES")
        self.running = True
        time.sleep(0.5)

    def server_pids(self) -> list[int]:
        out = self._control("get_server_list")
        return [int(x) for x in out.split() if x.strip().isdigit()]

    def check_in_use(self) -> list[int]:
        """Raise unless an MPS server is running (it starts when the first client connects)."""
        pids = self.server_pids()
        if not pids:
            raise GpuError("MPS daemon is up but no MPS server is running: the workers are not using MPS")
        return pids

    def stop(self) -> None:
        if not self.running:
            return
        try:
            self._control("quit", timeout=20)
        finally:
            self.running = False
            for k in self.env:
                os.environ.pop(k, None)
            if self._client_visible is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = self._client_visible
                self._client_visible = None
            # Wait for the control pipe to go away so a following start is clean.
            for _ in range(40):
                if not (self.pipe_dir / "control").exists():
                    break
                time.sleep(0.25)
