"""Model files: a strict-JSON manifest beside XGBoost's own UBJ files.

  NAME.json            manifest: schema, mode, feature lists, baseline coefficients, GPU, data hash,
                       cross-validated metrics, and the SHA-256 of each model file
  NAME.point.ubj       the point model (XGBoost's binary JSON)
  NAME.interval.ubj    the interval model

Nothing is unpickled: a model file cannot run code. Loading checks the schema, the feature lists against
what this colopred computes, the baseline coefficients, that every file named lies in the manifest's own
folder, and each file's checksum. The default models ship inside the package (:func:`shipped_models_dir`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..constants import INTERVAL_COVERAGE, INTERVAL_QUANTILES, INTERVAL_SIZE_EXPONENT
from ..errors import InputError, SchemaError
from ..io import fsync_file, sha256_of, stage_file, write_text_atomic
from ..schema import loads
from ..schema import problems as schema_problems
from .baseline import BASELINE_TERMS, load_kind
from .estimator import INTERVAL_CLASS_NAMES, SlowdownModel, Trees
from .features import FEATURES, MONOTONE_INCREASING
from .sources import model_features_for

MANIFEST_SCHEMA = "colopred.model"
MANIFEST_VERSION = 10  # the history of versions is in docs/history.md
MODEL_PARTS = ("point", "interval")
DEFAULT_MODEL_STEM = "h100"


def shipped_models_dir() -> Path:
    """The shipped models: ``$COLOPRED_MODELS`` if set, else the package's own ``runtime/models``."""
    env = os.environ.get("COLOPRED_MODELS")
    return Path(env) if env else Path(str(resources.files("colopred.runtime") / "models"))


def model_stem(stem: str, mode: str, source: str = "ncu") -> str:
    """The file stem of a model of ``mode`` for ``source`` profiles: ``STEM-MODE`` (ncu), ``STEM-MODE-nvml`` (GPM)."""
    return f"{stem}-{mode}" + ("" if source == "ncu" else f"-{source}")


def default_model_path(mode: str, source: str = "ncu") -> Path:
    """The shipped manifest of ``mode`` for ``source`` profiles (``sources.PROFILE_SOURCES``)."""
    return shipped_models_dir() / f"{model_stem(DEFAULT_MODEL_STEM, mode, source)}.json"


def strict_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, so ``json.dumps(allow_nan=False)`` accepts it."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return strict_json(obj.item())
    if isinstance(obj, dict):
        return {str(k): strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def _target(offset: float, classes: str) -> str:
    """What the point trees' output f is, in words, for the manifest (:func:`estimator.compose`)."""
    base = "1 + " + " + ".join(f"baseline_coefs[{k}] * {k}" for k in BASELINE_TERMS)
    if offset == 1.0:
        return f"log(slowdown) - log({base})"
    which = " (host-bound targets: c = 1)" if classes == "host_bound" else ""
    return f"f of slowdown = 1 - c + ({base} - 1 + c) * exp(f), c = {offset:g}{which}, fitted by squared log error"


def save_model(path: str | os.PathLike, model: SlowdownModel, mode: str, /, **extra: Any) -> Path:
    """Write a fitted ``model`` as ``STEM.json`` + ``STEM.point.ubj`` + ``STEM.interval.ubj`` (``path`` is the
    manifest, ``.json`` added if missing), replacing an existing model's three files together or not at all:
    a reader (or a run killed at any moment) sees either the old model or the new one, both complete.

    The model files are written and fsynced under temporary names; a first manifest naming those temporary
    files replaces the old manifest (the commit: from here on the new model loads); links of the temporary
    files are renamed over the final names; the final manifest replaces the first; the temporary files go.
    A failure before the commit removes what was staged and leaves the old model as it was."""
    path = Path(path)
    stem = path.name[:-5] if path.name.endswith(".json") else path.name
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(folder, f"cannot create the output folder ({e.strerror or e.__class__.__name__})") from None
    man_path = folder / f"{stem}.json"
    if man_path.is_dir():
        raise InputError(man_path, "is a directory; give the model's file stem")
    parts = {"point": model.point_, "interval": model.interval_}
    if parts["interval"] is None:
        raise ValueError("the model has no interval model (fitted with interval=False): it cannot be saved")
    staged: dict[str, Path] = {}
    try:
        for part, reg in parts.items():
            tmp = staged[part] = stage_file(folder / f"{stem}.{part}.ubj")
            reg.save_model(str(tmp))
            fsync_file(tmp)
            os.chmod(tmp, 0o644)
        sums = {part: sha256_of(tmp) for part, tmp in staged.items()}
        man = {"schema": MANIFEST_SCHEMA, "schema_version": MANIFEST_VERSION, "mode": mode,
               "features": list(FEATURES), "model_features": list(model.features_),
               "monotone_increasing": list(MONOTONE_INCREASING), "params": model.tree_params_,
               "monotone": model.monotone,
               "baseline_coefs": {k: float(v) for k, v in zip(BASELINE_TERMS, model.baseline_coefs_)},
               "contention_load": model.load_, "mps_wait_cross_gate": model.wait_gate_,
               "target": _target(model.offset_, model.offset_classes_),
               "tree_target_offset": model.offset_, "tree_target_offset_classes": model.offset_classes_,
               "interval_quantiles": list(INTERVAL_QUANTILES), "interval_coverage": INTERVAL_COVERAGE,
               "conformal_log_width": model.conformal_log_width_, "interval_scale": model.interval_scale_,
               "interval_classes": model.interval_classes_,
               "conformal_class_log_widths": dict(zip(INTERVAL_CLASS_NAMES, model.conformal_class_log_widths_)),
               "interval_size_exponents": dict(zip(INTERVAL_CLASS_NAMES, model.size_exponents_)),
               "interval_quantile_floor": model.quantile_floor_, "profile_source": extra.get("profile_source", "ncu"),
               "files": {}}
        offsets = getattr(model, "job_log_offsets_", None) or {}
        if offsets:  # absent means none: no training job takes an offset of its own
            man["job_offset_weight"], man["job_offset_prior"] = model.job_offset_weight_, model.job_offset_prior_
            man["job_log_offsets"] = {str(j): float(v) for j, v in sorted(offsets.items())}
            man["job_width_factors"] = {str(j): float(v) for j, v in sorted(model.job_width_factors_.items())}
        if any(k != 1.0 for k in model.unseen_widths_):  # absent means 1: no unseen job's interval is wider
            man["interval_unseen_widths"] = dict(zip(INTERVAL_CLASS_NAMES, model.unseen_widths_))
        if model.trained_jobs_:  # the jobs a prediction serves as trained ones (offsets, the unseen job's width)
            man["jobs"] = sorted(model.trained_jobs_)
        if any(model.slowdown_exponents_):  # absent means 0: no per-row slowdown scale
            man["interval_slowdown_exponents"] = dict(zip(INTERVAL_CLASS_NAMES, model.slowdown_exponents_))
        man.update({k: v for k, v in extra.items() if k not in man})  # provenance and metrics; never the model's own fields

        def text(names: dict[str, str]) -> str:
            files = {part: {"path": names[part], "sha256": sums[part]} for part in staged}
            return json.dumps(strict_json({**man, "files": files}), indent=1, allow_nan=False, default=str) + "\n"

        write_text_atomic(man_path, text({part: tmp.name for part, tmp in staged.items()}))  # the commit
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    finals = {part: f"{stem}.{part}.ubj" for part in staged}
    for part, tmp in staged.items():
        link = stage_file(folder / finals[part])
        link.unlink()
        try:
            os.link(tmp, link)
        except OSError:  # a file system without hard links
            shutil.copyfile(tmp, link)
            fsync_file(link)
        os.replace(link, folder / finals[part])
    write_text_atomic(man_path, text(finals))
    for tmp in staged.values():
        tmp.unlink(missing_ok=True)
    return man_path


def _model_file(manifest_path: Path, entry: Any, part: str) -> Path:
    """The file a manifest's ``files[part]`` names: a plain file name in the manifest's own folder."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not isinstance(entry.get("sha256"), str):
        raise SchemaError(manifest_path, f"manifest's files.{part} must give a path and a sha256")
    name = entry["path"]
    if Path(name).name != name or name in ("", ".", ".."):
        raise SchemaError(manifest_path, f"manifest's files.{part} must name a file in the manifest's own folder, not {name!r}")
    return manifest_path.parent / name


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """A model manifest, checked against the shipped schema (``colopred/schemas/model_manifest.schema.json``:
    types, ranges, finite values, file names in the manifest's own folder) and against this colopred's features
    (the model files are not read)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory; give the model's manifest (.json)")
    try:
        man = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except UnicodeDecodeError:
        raise SchemaError(path, "not a colopred model manifest (not JSON: not UTF-8 text)") from None
    except ValueError as e:
        raise SchemaError(path, f"not a colopred model manifest (not JSON: {str(e)[:80]})") from None
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror or e.__class__.__name__})") from None
    if not isinstance(man, dict) or man.get("schema") != MANIFEST_SCHEMA:
        raise SchemaError(path, "not a colopred model manifest")
    if man.get("schema_version") != MANIFEST_VERSION:
        raise SchemaError(path, f"model schema version {repr(man.get('schema_version'))[:20]} is not supported (expected {MANIFEST_VERSION})")
    problems = schema_problems(man, "model_manifest")
    if problems:
        raise SchemaError(path, f"invalid manifest: {problems[0]}")
    mode = man["mode"]
    source = man.setdefault("profile_source", "ncu")  # manifests written before GPM models existed: ncu
    known = [list(model_features_for(mode, source, timeline)) for timeline in (True, False)]  # GPM: with or without a timeline
    if man["features"] != list(FEATURES) or man["model_features"] not in known:
        raise SchemaError(path, "model was trained on a different feature schema than this colopred computes")
    if man["contention_load"] != load_kind(mode):
        raise SchemaError(path, f"manifest's contention_load {man['contention_load']!r} is not the {mode} mode's ({load_kind(mode)!r})")
    class_widths = man.get("conformal_class_log_widths") or {}
    if class_widths and man.get("interval_classes", "none") != "none":
        missing = [c for c in INTERVAL_CLASS_NAMES if c not in class_widths]
        if missing:
            raise SchemaError(path, f"manifest's conformal_class_log_widths lacks the {missing[0]} class")
    ranges = man.get("feature_ranges", {})
    bad = [k for k, v in ranges.items() if k not in FEATURES or v[0] > v[1]]
    if bad:
        raise SchemaError(path, f"manifest's feature_ranges.{bad[0]} must name a feature and give [min, max]")
    for part in MODEL_PARTS:
        _model_file(path, man["files"][part], part)
    return man


def _check_trees(f: Path, reg: Any, part: str, n_features: int) -> None:
    """The XGBoost model read from ``f`` is one the manifest describes: as many input features as its
    ``model_features`` (trees of the other mode have another number), and the point model a mean regression,
    the interval model a quantile one."""
    booster = reg.get_booster()
    if booster.num_features() != n_features:
        raise InputError(f, f"the {part} model takes {booster.num_features()} features, the manifest's model_features "
                            f"name {n_features} (a model of the other mode?)")
    try:
        objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
    except (ValueError, KeyError, TypeError):
        raise InputError(f, f"the {part} model holds no readable training objective") from None
    if (objective == "reg:quantileerror") != (part == "interval"):
        raise InputError(f, f"the {part} model was trained with objective {objective!r}: the point and interval files are swapped?")


def load_model(path: str | os.PathLike) -> tuple[SlowdownModel, dict[str, Any]]:
    """(fitted SlowdownModel, manifest) from a manifest and its checksummed XGBoost files (read as Boosters,
    ``estimator.Trees``: loading and predicting need neither scikit-learn nor XGBoost's scikit-learn wrapper)."""
    import xgboost as xgb

    path = Path(path)
    man = read_manifest(path)
    mode = man["mode"]
    model = SlowdownModel(mode=mode, params=man.get("params"), monotone=bool(man.get("monotone", True)),
                          features=man["model_features"], load=man["contention_load"],
                          # manifests written before these fields: one width for every row, quantile band kept
                          interval_scale=man.get("interval_scale", "none"), quantile_floor=man.get("interval_quantile_floor", True),
                          interval_classes=man.get("interval_classes", "none"), offset=man.get("tree_target_offset", 1.0),
                          offset_classes=man.get("tree_target_offset_classes", "none"),
                          size_exponents=man.get("interval_size_exponents", dict.fromkeys(INTERVAL_CLASS_NAMES, INTERVAL_SIZE_EXPONENT)),
                          slowdown_exponents=man.get("interval_slowdown_exponents", dict.fromkeys(INTERVAL_CLASS_NAMES, 0.0)),
                          wait_gate=man.get("mps_wait_cross_gate", "idle"),  # the only gate before the field
                          job_offset_weight=man.get("job_offset_weight", 0.0), job_offset_prior=man.get("job_offset_prior"),
                          unseen_widths=man.get("interval_unseen_widths", dict.fromkeys(INTERVAL_CLASS_NAMES, 1.0)))
    model._resolve()
    model.conformal_log_width_ = float(man.get("conformal_log_width", 0.0))
    class_widths = man.get("conformal_class_log_widths") or {}
    model.conformal_class_log_widths_ = (tuple(float(class_widths[c]) for c in INTERVAL_CLASS_NAMES)
                                         if model.interval_classes_ != "none" and class_widths else ())
    model.job_log_offsets_ = {str(j): float(v) for j, v in man.get("job_log_offsets", {}).items()}
    model.job_width_factors_ = {str(j): float(v) for j, v in man.get("job_width_factors", {}).items()}
    model.trained_jobs_ = frozenset(map(str, man.get("jobs", ())))
    model.max_set_size_ = man.get("max_set_size")  # the interval's beyond_size scale (None: every row alike)
    model.baseline_coefs_ = np.array([float(man["baseline_coefs"][k]) for k in BASELINE_TERMS])
    for part in MODEL_PARTS:
        f = _model_file(path, man["files"][part], part)
        if not f.is_file():
            raise InputError(f, "model file listed in the manifest is missing")
        if sha256_of(f) != man["files"][part]["sha256"]:
            raise InputError(f, "checksum mismatch: the model file is corrupt or was changed")
        reg = Trees(xgb.Booster())
        try:
            reg.get_booster().load_model(str(f))
        except (xgb.core.XGBoostError, ValueError, TypeError, KeyError, OSError):
            raise InputError(f, "not a valid XGBoost model file (XGBoost cannot read it), though its checksum matches the "
                                "manifest: retrain or restore the model") from None
        _check_trees(f, reg, part, len(man["model_features"]))
        setattr(model, f"{part}_", reg)
    return model, man
