"""The server's settings (``colopred serve``'s options), passed to each worker process through one environment
variable so that every worker builds the same app."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from ..constants import MAX_SET_SIZE

CONFIG_ENV = "COLOPRED_SERVE_CONFIG"
DEFAULT_STORE = "colopred-store"


@dataclass(frozen=True)
class Limits:
    """What one request may ask (every limit a 413 or 422 naming the field when passed)."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_set_size: int = MAX_SET_SIZE
    max_sets: int = 10_000
    """predict_many: sets per request."""
    max_jobs: int = 5_000
    """pack: jobs per request; rank: candidates per request."""
    max_gpus: int = 5_000
    max_nodes: int = 10_000
    """/k8s: nodes per request; a node report's GPUs are at most ``max_gpus_per_node``."""
    max_gpus_per_node: int = 64
    max_name_chars: int = 200
    max_observations_listed: int = 1_000


@dataclass(frozen=True)
class ServiceConfig:
    store: str = DEFAULT_STORE
    """A folder (SQLite) or a postgresql:// URL."""
    models: tuple[str, ...] = ()
    """Model manifests to serve; empty: the shipped models."""
    token_file: str | None = None
    """A file holding the bearer token every writing endpoint requires (``--token-file``; each worker reads it, so the
    token never travels in an environment variable); None: no token."""
    limits: Limits = field(default_factory=Limits)
    max_per_gpu: int = 3
    """The extender's default limit of jobs per GPU (a pod annotation may lower it)."""
    max_slowdown: float | None = None
    """The extender's default limit of any job's predicted slowdown (a pod annotation may set it)."""
    models_dir: str | None = None
    """The folder of trained model versions (``colopred train --store``); None: ``STORE/models`` for a folder store,
    none for a database URL (``colopred.service.versions``)."""

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServiceConfig":
        text = os.environ.get(CONFIG_ENV)
        if not text:
            return cls()
        d = json.loads(text)
        d["models"] = tuple(d.get("models") or ())
        d["limits"] = Limits(**d.get("limits", {}))
        return cls(**d)
