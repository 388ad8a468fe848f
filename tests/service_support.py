"""A real ``colopred serve`` process on loopback, for the service's tests (and scripts/bench_service.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "datasets" / "h100" / "profiles" / "ncu"
START_TIMEOUT_S = 120.0  # a cold start on a loaded 2-core machine imports pandas, scikit-learn and XGBoost


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``colopred serve --store STORE`` on a free loopback port; ``stop()`` sends SIGTERM, ``kill()`` SIGKILL."""

    def __init__(self, store: str | os.PathLike, *args: str, port: int | None = None, log: Path | None = None, wait: bool = True):
        self.store = str(store)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = list(args)
        default_log = (Path(tempfile.gettempdir()) if self.store.startswith("postgres") else Path(self.store).parent) / f"serve-{self.port}.log"
        self.log_path = log or default_log
        self._log = open(self.log_path, "ab")
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "colopred", "serve", "--store", self.store, "--port", str(self.port),
                                      "--log-level", "warning", *self.args],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"colopred serve exited with {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"colopred serve did not answer within {timeout:.0f} s: {self.log()[-2000:]}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def call(url: str, method: str = "GET", body=None, headers: dict | None = None, raw: bytes | None = None,
         timeout: float = 60.0) -> tuple[int, dict, bytes]:
    """One request with urllib: (status, headers, body bytes); 4xx and 5xx answers returned, not raised."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    h = {"Content-Type": "application/json", **(headers or {})} if data is not None else dict(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def profile_doc(job: str) -> dict:
    return json.loads((PROFILES / f"{job}.json").read_text())
