"""Model versions: where their files live, how a server loads one, and the rule that promotes a new one.

A *model name* is a served model's (``h100-mps``, ``h100-timeslice-nvml``, or a ``--model`` manifest's stem). Its
version 0 is the model the server was started with; versions 1, 2, ... are trained by ``colopred train --store``
from the shipped data plus the store's observations, written to the models folder as the usual files (a strict-JSON
manifest with the checksums of its XGBoost UBJ files; never a pickle), and recorded in the store
(:meth:`Store.add_model_version`). The store's latest model event of a name (:meth:`Store.active_versions`) says which
version serves it; every server applies a new event at its next request, as it applies new observations.

  MODELS_DIR/NAME/SHA12/NAME.json           the version's manifest (SHA12: the first 12 hex digits of its SHA-256)
  MODELS_DIR/NAME/SHA12/NAME.point.ubj      its XGBoost files
  MODELS_DIR/NAME/SHA12/training_rows.csv   the observations it was trained on, one row per job, with provenance

The models folder is ``STORE/models`` for a SQLite store (``--store FOLDER``); a PostgreSQL store names one with
``--models-dir``, a folder every replica reads (a shared volume).

**Promotion** (:func:`compare`): the most recent ``HOLDOUT_SHARE`` of a name's usable observations are held out of
the training; the version serving and the new one each predict them as a server would (each with the job offsets of
the observations before them); the new version is promoted only if, over at least ``MIN_HELD_OUT_ROWS`` job rows,
its mean absolute % error is lower by more than ``MARGIN_POINTS`` and the lower end of the one-sided 95% bootstrap
interval of that gain (observations resampled, ``BOOTSTRAP_DRAWS``, seeded) is above 0. docs/service.md states the
rule and how the constants were chosen (``reports/h100/promotion``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..io import sha256_of
from ..profile import JobProfile
from ..runtime.observed import Observation
from ..runtime.predictor import Predictor

MODELS_FOLDER = "models"
"""The models folder inside a SQLite store's folder."""

HOLDOUT_SHARE = 0.25
"""The most recent share of a name's usable observations held out of a retraining to judge it."""
MIN_HELD_OUT_ROWS = 40
"""Least held-out job rows a promotion needs: with fewer, a version no better than the one serving (another tree
seed) was promoted in up to 8.5% of simulated streams, with 40 in at most 4.8% (``research/promotion_rule.py``,
``reports/h100/promotion``)."""
MARGIN_POINTS = 0.0
"""The gain in mean absolute % error (percentage points) a promotion must exceed. The simulation's rule took the
smallest margin of 0, 0.1 and 0.25 keeping the no-better version's promotions at 5% or fewer: 0 (0.1 promoted it as
often; 0.25 less often, and a better version less often too). The bootstrap bound does the guarding."""
CONFIDENCE = 0.95
"""One-sided confidence that the gain is above 0."""
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0


class VersionError(Exception):
    """A model version that cannot be loaded or recorded (one line naming the file)."""


def models_dir_of(store: str, models_dir: str | None = None) -> Path | None:
    """The models folder: ``models_dir`` if given, else ``STORE/models`` for a folder store; None for a database
    URL without one (its servers serve version 0 only)."""
    if models_dir:
        return Path(models_dir)
    if "://" in store:
        return None
    return Path(store) / MODELS_FOLDER


def version_folder(models_dir: Path, name: str, sha256: str) -> Path:
    return models_dir / name / sha256[:12]


def model_id(name: str, sha256: str) -> str:
    """``NAME@SHA256[:12]``: how answers, observation records and versions name a model."""
    return f"{name}@{sha256[:12]}"


def load_version(models_dir: Path | None, path: str, sha256: str) -> Predictor:
    """The predictor of a recorded version (its manifest at ``path`` in ``models_dir``), after checking that the
    manifest is the one recorded (``sha256``) and, as every model load does, its files' checksums."""
    if models_dir is None:
        raise VersionError("no models folder: give --models-dir (a folder every replica reads) to serve trained versions")
    p = Path(path)
    if p.is_absolute() or ".." in p.parts:
        raise VersionError(f"{path}: a version's path lies inside the models folder")
    manifest = models_dir / p
    if not manifest.is_file():
        raise VersionError(f"{manifest}: the version's manifest is missing")
    if sha256_of(manifest) != sha256:
        raise VersionError(f"{manifest}: checksum mismatch: not the manifest the store recorded")
    return Predictor.load(manifest)


def previous_version(events: Sequence[Any]) -> int | None:
    """The version that served before the latest of a name's model ``events`` (0 before any), or None where no other
    version ever served: what a rollback without a version goes back to."""
    if not events:
        return None
    current = events[-1].version
    for ev in reversed(events[:-1]):
        if ev.version != current:
            return ev.version
    return 0 if current != 0 else None


# --------------------------------------------------------------------------------------------- promotion
@dataclass(frozen=True)
class Comparison:
    """The version serving and a candidate on the same held-out observations, and the rule's verdict."""

    observations: int
    rows: int
    jobs: int
    current_mape_pct: float
    candidate_mape_pct: float
    gain_points: float
    """current − candidate mean absolute % error (positive: the candidate is better)."""
    gain_lower_points: float
    """The lower end of the one-sided bootstrap interval of the gain at ``CONFIDENCE``."""
    promote: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return {**d, "rule": {"holdout_share": HOLDOUT_SHARE, "min_held_out_rows": MIN_HELD_OUT_ROWS,
                              "margin_points": MARGIN_POINTS, "confidence": CONFIDENCE}}


def split_held_out(items: Sequence[Any], share: float = HOLDOUT_SHARE) -> tuple[list, list]:
    """(earlier, held out): the held-out part is the most recent ``share`` of ``items`` (oldest first), counted in
    observations, at least one observation where there are two or more."""
    items = list(items)
    if len(items) < 2:
        return items, []
    n = max(1, round(share * len(items)))
    return items[:-n], items[-n:]


def served_errors(predictor: Predictor, earlier: Sequence[Observation], held_out: Sequence[Observation]) -> np.ndarray:
    """Absolute % error of each held-out job row as ``predictor`` would serve it: with the job offsets of the
    ``earlier`` observations (``Predictor.observe``)."""
    pred = replace(predictor, offsets={})
    if earlier:
        pred = pred.observe(list(earlier))
    s_hat = pred.predict_many([o.profiles for o in held_out])["slowdown"].to_numpy()
    s = np.array([x for o in held_out for x in o.slowdowns])
    return 100.0 * np.abs(s_hat - s) / s


def verdict(current_ape: np.ndarray, candidate_ape: np.ndarray, sizes: np.ndarray, min_rows: int = MIN_HELD_OUT_ROWS,
            margin: float = MARGIN_POINTS, confidence: float = CONFIDENCE, draws: int = BOOTSTRAP_DRAWS,
            seed: int = BOOTSTRAP_SEED) -> tuple[bool, float, float]:
    """The rule on paired absolute % errors of held-out job rows (``sizes``: rows per observation, in order):
    (promote, mean gain in points, the lower end of its one-sided bootstrap interval, observations resampled)."""
    gain_rows = np.asarray(current_ape, float) - np.asarray(candidate_ape, float)
    sizes = np.asarray(sizes, int)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    per_obs = np.add.reduceat(gain_rows, starts)  # each observation's summed gain: its rows share a window's noise
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sizes), size=(draws, len(sizes)))
    boot = per_obs[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    lower = float(np.quantile(boot, 1.0 - confidence))
    gain = float(gain_rows.mean())
    return bool(len(gain_rows) >= min_rows and gain > margin and lower > 0.0), gain, lower


def compare(current: Predictor, candidate: Predictor, earlier: Sequence[Observation], held_out: Sequence[Observation],
            min_rows: int = MIN_HELD_OUT_ROWS, margin: float = MARGIN_POINTS, confidence: float = CONFIDENCE,
            draws: int = BOOTSTRAP_DRAWS, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """The promotion rule (module doc): paired absolute % errors of the two versions on the held-out rows."""
    n_rows = sum(len(o.slowdowns) for o in held_out)
    jobs = len({p.name for o in held_out for p in o.profiles})
    if n_rows == 0:
        return Comparison(0, 0, 0, math.nan, math.nan, math.nan, math.nan, False,
                          f"no held-out observations: a promotion needs at least {min_rows} held-out job rows")
    cur = served_errors(current, earlier, held_out)
    cand = served_errors(candidate, earlier, held_out)
    promote, gain, lower = verdict(cur, cand, np.array([len(o.slowdowns) for o in held_out]), min_rows, margin, confidence,
                                   draws, seed)
    if n_rows < min_rows:
        reason = f"{n_rows} held-out job rows, fewer than the {min_rows} a promotion needs"
    elif gain <= margin:
        reason = (f"gain {gain:+.2f} points ({cur.mean():.2f}% -> {cand.mean():.2f}%) on {n_rows} held-out rows, "
                  f"not above {margin:g}")
    elif lower <= 0.0:
        reason = (f"gain {gain:+.2f} points on {n_rows} held-out rows, but its {confidence:.0%} lower bound is "
                  f"{lower:+.2f}: not surely above 0")
    else:
        reason = (f"gain {gain:+.2f} points ({cur.mean():.2f}% -> {cand.mean():.2f}%) on {n_rows} held-out rows of "
                  f"{len(held_out)} observations, {confidence:.0%} lower bound {lower:+.2f}")
    return Comparison(len(held_out), n_rows, jobs, float(cur.mean()), float(cand.mean()), gain, lower, promote, reason)


def retimed_profiles(profiles: Sequence[JobProfile], solo_ms: Sequence[float] | None) -> list[JobProfile]:
    """The profiles as a training row describes the jobs: re-timed to the solo iteration times the observation gave
    (``JobProfile.retimed``, as the shipped data's rows are), else as registered."""
    if not solo_ms:
        return list(profiles)
    out = []
    for p, t in zip(profiles, solo_ms):
        try:
            out.append(p.retimed(float(t)))
        except ValueError:
            out.append(p)
    return out


def ensure_folder(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise VersionError(f"{path}: cannot create the models folder ({e.strerror or e})") from None
    if not os.access(path, os.W_OK):
        raise VersionError(f"{path}: the models folder is not writable")
