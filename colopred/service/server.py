"""Running the service under uvicorn (``colopred serve``): one process, or a supervisor and N worker processes
sharing the port and the store."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from ..errors import ColopredError
from .config import CONFIG_ENV, ServiceConfig


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, a port another process holds (before the models are loaded)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise ColopredError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


def retrain_command(config: ServiceConfig, data: str) -> list[str]:
    """``colopred train --store`` for the store and models this server serves."""
    cmd = [sys.executable, "-m", "colopred", "train", "--store", config.store, "--data", data, "-q"]
    for m in config.models:
        cmd += ["--model", m]
    if config.models_dir:
        cmd += ["--models-dir", config.models_dir]
    return cmd


def start_retrainer(config: ServiceConfig, every_s: float, min_new: int, data: str, log: logging.Logger) -> threading.Thread:
    """A daemon thread of the serving process: every ``every_s`` seconds, when ``min_new`` observations or more arrived
    since the last retraining it started, one ``colopred train --store`` run, in a subprocess (the training code stays
    out of the server's processes; the run records its version, and the servers load it if it was promoted)."""
    from .store import open_store

    def loop() -> None:
        store = open_store(config.store)
        done_at = store.observation_count()
        while True:
            time.sleep(every_s)
            try:
                count = store.observation_count()
            except Exception as e:  # noqa: BLE001 (a store that cannot be read now may be readable at the next turn)
                log.error("scheduled retraining: cannot read the store (%s)", e)
                continue
            if count - done_at < min_new:
                continue
            log.info("scheduled retraining: %d new observations, running colopred train --store", count - done_at)
            r = subprocess.run(retrain_command(config, data), capture_output=True, text=True)
            if r.returncode != 0:
                log.error("scheduled retraining failed (exit %d): %s", r.returncode, (r.stderr.strip().splitlines() or [""])[-1])
            else:
                log.info("scheduled retraining: %s", " ".join(r.stdout.split())[:400])
            done_at = count

    t = threading.Thread(target=loop, name="colopred-retrain", daemon=True)
    t.start()
    return t


def serve(config: ServiceConfig, host: str = "127.0.0.1", port: int = 8000, workers: int = 1, access_log: bool = False,
          log_level: str = "info", retrain: tuple[float, int, str] | None = None) -> int:
    import uvicorn

    from .app import create_app, read_token
    from .store import StoreError, open_store

    check_port(host, port)
    read_token(config.token_file)
    options = dict(host=host, port=port, access_log=access_log, log_level=log_level, http="httptools",
                   loop="uvloop" if _has("uvloop") else "asyncio", timeout_keep_alive=30, backlog=4096, server_header=False)
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(levelname)s: %(message)s")
    log = logging.getLogger("colopred.service")
    if host not in ("127.0.0.1", "localhost", "::1") and config.token_file is None:
        log.warning("colopred serve: listening on %s without --token-file: anyone who reaches the port can register "
                    "profiles and post observations", host)
    if retrain is not None:
        start_retrainer(config, *retrain, log)
    if workers <= 1:
        try:
            app = create_app(config)
        except StoreError as e:
            raise ColopredError(str(e)) from None
        state = app.state.service
        log.info("colopred serve: http://%s:%d  store %s  %d profiles, %d observations  models %s", host, port, state.store.url,
                 len(state.profiles), sum(state.observation_counts.values()), ", ".join(state.models))
        uvicorn.run(app, **options)
        return 0
    try:  # the store opens (and its schema is made) once here, before the workers race to it
        open_store(config.store).close()
    except StoreError as e:
        raise ColopredError(str(e)) from None
    os.environ[CONFIG_ENV] = config.to_env()
    metrics_dir = tempfile.mkdtemp(prefix="colopred-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # the workers' counters, added up at each scrape
    log.info("colopred serve: http://%s:%d  store %s  %d workers", host, port, config.store, workers)
    try:
        uvicorn.run("colopred.service.app:app_from_environment", factory=True, workers=workers, **options)
    finally:
        import shutil

        shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None and sys.platform != "win32"
