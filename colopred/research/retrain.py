"""``colopred train --store``: a new model version from the shipped data plus the service's observations.

For each served model name of the modes asked (``h100-mps``, ``h100-timeslice``, their GPM twins, or ``--model``
manifests), the store's accepted observations of its mode whose jobs' profiles are of its profile source become
training rows with their provenance: each job of each observation one row, its registered profile at the version the
observation was taken with, re-timed to the solo time the observation gave (``solo_ms``), as the shipped data's rows
are; the observation's id, when it arrived and when it ran, the GPU, and the model version that predicted it. Quarantined
observations are never read. The most recent ``versions.HOLDOUT_SHARE`` of them are held out; the model is fitted
(as ``colopred train`` fits the shipped one) on the shipped data plus the others, written atomically to the models
folder (a strict-JSON manifest with its XGBoost files' checksums, and ``training_rows.csv``), compared with the
version serving the name on the held-out observations (``versions.compare``), and recorded in the store, with its
promotion where the rule says so. Servers load a promoted version at their next request.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import ColopredError
from ..io import sha256_of, write_text_atomic
from ..profile import JobProfile
from ..runtime.features import FEATURES, feature_matrix, profile_matrix
from ..runtime.observed import Observation
from ..runtime.predictor import Predictor
from ..runtime.sources import source_of
from ..service.store import ObservationRecord, Store
from ..service.versions import (Comparison, VersionError, compare, ensure_folder, load_version, model_id, retimed_profiles,
                                split_held_out, version_folder)
from .dataset import Dataset, arch_of, load_dataset
from .evaluation import job_fit_args, new_model
from .training import experience

PROVENANCE_COLUMNS = ("origin", "observation", "received_at", "time", "gpu", "gpu_type", "predicted_by", "mode", "set",
                      "job", "slowdown", "solo_ms")


@dataclass
class Usable:
    """An accepted observation a model of one profile source can learn from."""

    record: ObservationRecord
    profiles: list[JobProfile]
    """As registered when it was taken (what a server predicts from)."""

    @property
    def observation(self) -> Observation:
        return Observation(tuple(self.profiles), tuple(j.slowdown for j in self.record.jobs))


def read_observations(store: Store, mode: str, source: str, page: int = 5_000) -> tuple[list[Usable], int]:
    """The store's accepted observations of ``mode`` whose jobs' profiles are of ``source``, oldest first, and how
    many of the mode's were left out (a profile version missing, or another source)."""
    cache: dict[tuple[str, Any], JobProfile | None] = {}

    def profile(job: str, version: Any) -> JobProfile | None:
        if (job, version) not in cache:
            rec = store.profile(job, version)
            cache[(job, version)] = (None if rec is None or rec.document is None
                                     else JobProfile.from_dict({**rec.document, "meta": {}}, f"store profile {job} v{version}"))
        return cache[(job, version)]

    out, skipped, after = [], 0, 0
    while True:
        records = store.observations_between(mode, after, limit=page)
        if not records:
            return out, skipped
        for r in records:
            versions = r.detail.get("profile_versions") or [None] * len(r.jobs)
            profiles = [profile(j.job, v) for j, v in zip(r.jobs, versions)]
            if any(p is None for p in profiles):
                skipped += 1
                continue
            try:
                ok = source_of(profiles) == source
            except ValueError:
                ok = False
            if ok:
                out.append(Usable(r, profiles))
            else:
                skipped += 1
        after = records[-1].seq


def observation_rows(usable: Sequence[Usable]) -> pd.DataFrame:
    """One training row per job of each observation: FEATURES (the jobs described by their registered profiles,
    re-timed to the observation's ``solo_ms`` where it gave them), ``slowdown``, ``job``, ``arch`` and provenance
    (:data:`PROVENANCE_COLUMNS`)."""
    if not usable:
        return pd.DataFrame(columns=[*FEATURES, "slowdown", "arch", *PROVENANCE_COLUMNS])
    profiles: list[JobProfile] = []
    k = max(len(u.profiles) for u in usable)
    idx = np.full((len(usable), k), -1)
    for i, u in enumerate(usable):
        ps = retimed_profiles(u.profiles, u.record.detail.get("solo_ms"))
        idx[i, : len(ps)] = np.arange(len(profiles), len(profiles) + len(ps))
        profiles += ps
    X, set_of, pos = feature_matrix(profile_matrix(profiles), idx)
    order = np.lexsort((pos, set_of))
    X, set_of, pos = X[order], set_of[order], pos[order]
    prov = []
    for s, p in zip(set_of, pos):
        r = usable[s].record
        solo = r.detail.get("solo_ms")
        prov.append({"origin": "observation", "observation": r.seq, "received_at": r.received_at, "time": r.detail.get("time"),
                     "gpu": r.detail.get("gpu"), "gpu_type": r.detail.get("gpu_type"), "predicted_by": r.model, "mode": r.mode,
                     "set": "+".join(sorted(j.job for j in r.jobs)), "job": r.jobs[p].job, "slowdown": r.jobs[p].slowdown,
                     "solo_ms": None if not solo else float(solo[p])})
    rows = pd.concat([pd.DataFrame(X, columns=list(FEATURES)), pd.DataFrame(prov)], axis=1)
    return rows.assign(arch=rows["job"].map(arch_of))


def provenance_csv(rows: pd.DataFrame) -> str:
    buf = io.StringIO()
    rows[list(PROVENANCE_COLUMNS)].to_csv(buf, index=False, quoting=csv.QUOTE_MINIMAL, float_format="%.6g")
    return buf.getvalue()


def fit(ds: Dataset, mode: str, extra: pd.DataFrame):
    """The model of ``mode`` fitted as ``colopred train`` fits the shipped one, on ``ds``'s rows plus ``extra``."""
    df = ds.for_mode(mode)
    both = pd.concat([df[[*FEATURES, "slowdown", "job", "arch"]], extra[[*FEATURES, "slowdown", "job", "arch"]]],
                     ignore_index=True)
    model = new_model(mode, ds.profile_source, ds.timeline).fit(both[list(FEATURES)].to_numpy(), both["slowdown"].to_numpy(),
                                                                 groups=both["arch"].to_numpy(), **job_fit_args(both))
    return model, df, both


def write_version(models_dir: Path, name: str, predictor: Predictor, manifest_extra: dict[str, Any], rows_csv: str) -> tuple[Path, str]:
    """The version's files in a fresh folder, renamed into ``MODELS_DIR/NAME/SHA12`` once complete (a reader never sees
    a half-written version); returns the manifest's path and its SHA-256."""
    parent = models_dir / name
    ensure_folder(parent)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=parent))
    try:
        manifest = predictor.save(staging / f"{name}.json", **manifest_extra)
        write_text_atomic(staging / "training_rows.csv", rows_csv)
        sha = sha256_of(manifest)
        final = version_folder(models_dir, name, sha)
        if final.exists():  # the same model trained again: keep the first
            shutil.rmtree(staging)
        else:
            os.replace(staging, final)
        _fsync_dir(parent)
        return final / manifest.name, sha
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def current_predictor(store: Store, models_dir: Path | None, name: str, base: Predictor) -> tuple[int, Predictor]:
    """The version serving ``name`` (the store's latest event; 0: ``base``) and its predictor."""
    ev = store.active_versions().get(name)
    if ev is None or ev.version == 0:
        return 0, base
    mv = store.model_version(name, ev.version)
    if mv is None:
        raise ColopredError(f"{name}: the store serves version {ev.version}, which it does not record")
    try:
        return ev.version, load_version(models_dir, mv.path, mv.sha256)
    except VersionError as e:
        raise ColopredError(f"{name}: cannot load version {ev.version}, the one serving ({e})") from None


def retrain(store: Store, data_dir: str | Path, models_dir: Path, bases: dict[str, Path], modes: Sequence[str],
            promote: bool = True, log: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    """One new version per served name of ``modes`` with observations to learn from (module doc); returns what
    happened to each name: ``version`` recorded (or None), ``comparison``, ``promoted``."""
    datasets: dict[str, Dataset] = {}
    results = []
    for name, base_path in bases.items():
        base = Predictor.load(base_path)
        mode, source = base.mode, base.profile_source
        if mode not in modes:
            continue
        usable, skipped = read_observations(store, mode, source)
        if not usable:
            log(f"{name}: no {mode} observation of {source} profiles to learn from; no version trained")
            results.append({"name": name, "version": None, "reason": "no observations"})
            continue
        earlier, held = split_held_out(usable)
        rows = observation_rows(earlier)
        if source not in datasets:
            log(f"reading {data_dir} ({source} profiles)")
            datasets[source] = load_dataset(data_dir, profile_source=source)
        ds = datasets[source]
        current_version, current = current_predictor(store, models_dir, name, base)
        log(f"{name}: fitting on {ds.for_mode(mode)['window_id'].nunique()} measured sets and {len(earlier)} observations "
            f"({len(rows)} job rows); {len(held)} held out; {skipped} left out")
        model, df, both = fit(ds, mode, rows)
        profiles = {**{j: ds.profiles[j] for j in df["job"].unique()}, **{p.name: p for u in earlier for p in u.profiles}}
        provenance = {"store": store.url, "observations": len(earlier), "rows": len(rows),
                      "through_observation": earlier[-1].record.seq if earlier else None,
                      "held_out": len(held), "held_out_from_observation": held[0].record.seq if held else None,
                      "left_out": skipped}
        extra = {"profile_source": source, "gpu": ds.gpu or base.manifest.get("gpu"), "data_hash": ds.data_hash,
                 "data_dir": str(data_dir), "n_sets": int(df["window_id"].nunique()) + len(earlier), "n_rows": len(both),
                 "jobs": sorted(both["job"].unique()), "relabelled": ds.relabelled, "metrics": {},
                 "inputs": base.manifest.get("inputs", "profiles as they are"), "observations": provenance,
                 "trained_from": {"name": name, "version": current_version}, **experience(both, list(profiles.values()))}
        candidate = Predictor(model=model, mode=mode)
        path, sha = write_version(models_dir, name, candidate, extra, provenance_csv(rows))
        candidate = Predictor.load(path)  # what a server will load, checksums and all
        with warnings.catch_warnings():  # extrapolation notes on the observed sets, once per model: not the user's to act on
            warnings.simplefilter("ignore")
            result = compare(current, candidate, [u.observation for u in earlier], [u.observation for u in held])
        log(f"{name}: {'promote' if result.promote else 'keep version ' + str(current_version)}: {result.reason}")
        detail = {"training": {**provenance, "data_dir": str(data_dir), "data_hash": ds.data_hash,
                               "dataset_rows": len(df)},
                  "evaluation": {"against": {"version": current_version, "id": _id_of(name, current, base_path, store, current_version)},
                                 **result.to_dict()}}
        rel = path.relative_to(models_dir).as_posix()
        mv, ev = store.add_model_version(name, model_id(name, sha), sha, rel, mode, source, detail,
                                         promote=result.reason if (promote and result.promote) else None)
        log(f"{name}: recorded version {mv.version} ({mv.model_id})" + (", promoted" if ev else ""))
        results.append({"name": name, "version": mv.version, "id": mv.model_id, "promoted": ev is not None,
                        "comparison": result})
    return results


def _id_of(name: str, current: Predictor, base_path: Path, store: Store, version: int) -> str:
    if version == 0:
        return model_id(name, sha256_of(base_path))
    mv = store.model_version(name, version)
    return mv.model_id if mv is not None else f"{name}@?"


__all__ = ["Comparison", "observation_rows", "read_observations", "retrain"]
