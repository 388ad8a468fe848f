"""The slowdown model and the scheduler-facing ``Predictor``.

One model per sharing mode predicts the slowdown of each job in a set as a contention
baseline times a learned correction:

  s = (1 + α · L + β_full · W · φ_j + β_small · W · (1 − φ_j)) · exp(f(x))
  L = Σ_{k≠j} busy_k · min(1, busy_j)              (contention_load: co-runners' share of GPU time;
                                                     under MPS each term weighted by who holds the SMs longer
                                                     and by the share of SMs the co-runner's grids fill)
  W = K_j / t_j · Σ_{k≠j} busy_k · w_k · √busy_j   (wait_load: MPS, one wait per serial launch, K_j = kernels /
                                                     stream overlap; a host-bound job's idle time absorbs part)
  φ_j = JobProfile.launch_fill_pct / 100            (the target's mean share of the GPU per launch)

(w_k = JobProfile.mps_wait_us; W counts as 0 and φ as 1 for profiles without kernel data, GPM;
features.baseline_terms.) α, β_full, β_small ≥ 0 are fitted per mode by least squares; f is
XGBoost on set-size-free features (the target's profile and the mean/max/min of its co-runners'), monotone in co-runner demand. The
baseline carries the set size, so sets larger than any in training stay in the trees'
range. A second XGBoost model gives the 5th/95th percentile of f (``reg:quantileerror``)
for the interval. δ and throughput are derived from the
predicted slowdowns, so they are always consistent with them:

  δ = Σ_j t_j / max_j (t_j s_j)        throughput = Σ_j 1 / s_j

Files: ``NAME.json`` (manifest: schema, feature list, GPU, mode, data hash, metrics,
SHA-256 of each model file), ``NAME.point.ubj`` and ``NAME.interval.ubj`` (XGBoost's
own binary JSON). Nothing is unpickled: a model file cannot run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError, SchemaError
from ..harness.campaign import CONTEXT_OVERHEAD_GIB
from ..profile import JobProfile
from .features import (BASELINE_TERMS, FEATURES, LOAD_KINDS, MONOTONE_INCREASING, baseline_terms, feature_matrix, load_kind,
                       model_features, profile_matrix)

MANIFEST_SCHEMA = "colopred.model"
MANIFEST_VERSION = 7  # 3: the baseline's wait term (wait_beta); 4: the wait is JobProfile.mps_wait_us, load kind per mode;
# 5: dram_util_p25 feature, MPS share load weighted by the co-runners' SM fill; 6: the wait split by the target's
# per-launch SM fill (baseline_coefs replace contention_alpha and wait_beta); 7: launches counted per stream
# (kernels / JobProfile.stream_overlap) and the wait gated by √busy
INTERVAL_QUANTILES = (0.05, 0.95)
INTERVAL_COVERAGE = 0.90
DEFAULT_PARAMS = {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.8,
                  "colsample_bytree": 0.8, "min_child_weight": 2, "n_jobs": 1, "random_state": 0}


def models_dir() -> Path:
    """Shipped models: ``$COLOPRED_MODELS`` or the repository's ``models/``."""
    env = os.environ.get("COLOPRED_MODELS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "models"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _booster(reg, n_rows: int):
    """The regressor's booster, using every core for large batches (one thread for small ones,
    where starting threads costs more than it saves)."""
    b = reg.get_booster()
    if n_rows >= 10_000:
        b.set_param({"nthread": os.cpu_count() or 1})
    return b


class SlowdownModel:
    """scikit-learn-style estimator of per-job slowdown from FEATURES rows."""

    def __init__(self, params: dict | None = None, monotone: bool = True, features: Sequence[str] | None = None,
                 load: str = "symmetric"):
        """``features``: the FEATURES columns the trees see (default: ``model_features()``); ``load``: the
        baseline's contention load (``features.contention_load`` kind). :meth:`for_mode` sets both for a mode."""
        if load not in LOAD_KINDS:
            raise ValueError(f"unknown contention load {load!r} (one of {', '.join(LOAD_KINDS)})")
        self.load = load
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self.monotone = monotone
        self.features = tuple(features) if features is not None else model_features()
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown model features: {unknown}")
        self._cols = np.array([FEATURES.index(f) for f in self.features])
        self.point = None
        self.interval = None
        self.baseline_coefs = np.zeros(len(BASELINE_TERMS))
        self.conformal_log_width = 0.0

    @classmethod
    def for_mode(cls, mode: str, params: dict | None = None) -> "SlowdownModel":
        """The model of a sharing mode: ``model_features(mode)`` in the trees, ``load_kind(mode)`` in the baseline."""
        return cls(params, features=model_features(mode), load=load_kind(mode))

    def _constraints(self) -> str:
        return "(" + ",".join("1" if (self.monotone and f in MONOTONE_INCREASING) else "0" for f in self.features) + ")"

    def _fit_point(self, Xm, r):
        import xgboost as xgb

        m = xgb.XGBRegressor(objective="reg:squarederror", monotone_constraints=self._constraints(), **self.params)
        return m.fit(Xm, r)

    @staticmethod
    def fit_coefs(terms: np.ndarray, slowdown: np.ndarray) -> np.ndarray:
        """Least-squares coefficients c ≥ 0 of s − 1 = terms · c (``terms``: rows x BASELINE_TERMS)."""
        from scipy.optimize import nnls  # scipy comes with scikit-learn

        coefs, _ = nnls(np.asarray(terms, float), np.asarray(slowdown, float) - 1.0)
        return coefs

    @staticmethod
    def _base(coefs: np.ndarray, terms: np.ndarray) -> np.ndarray:
        return 1.0 + terms @ coefs

    def baseline(self, X: np.ndarray) -> np.ndarray:
        """The contention baseline 1 + α · L + β_full · W · φ + β_small · W · (1 − φ) of each row."""
        return self._base(self.baseline_coefs, baseline_terms(X, self.load))

    def _fit_parts(self, Xm: np.ndarray, terms: np.ndarray, s: np.ndarray):
        """The baseline's coefficients and the point model on r = log(s) − log(baseline); returns (coefs, r, model)."""
        coefs = self.fit_coefs(terms, s)
        r = np.log(s) - np.log(self._base(coefs, terms))
        return coefs, r, self._fit_point(Xm, r)

    def fit(self, X: np.ndarray, slowdown: np.ndarray, groups: np.ndarray | None = None, calibrate: bool = True,
            interval: bool = True) -> "SlowdownModel":
        """Fit the baseline's coefficients, then f on r = log(s) − log(baseline). With ``groups`` (one label per row:
        its set, or its architectures for intervals that must hold on unseen jobs), the
        interval is also calibrated by split-conformal prediction: an inner 3-fold CV over
        groups gives out-of-fold log residuals, and the interval is widened to at least
        their ``INTERVAL_COVERAGE`` quantile. ``interval=False`` fits the point model alone (no
        intervals; for experiments that need only out-of-sample point predictions)."""
        import xgboost as xgb

        X = np.asarray(X, dtype=np.float64)
        s = np.asarray(slowdown, float)
        terms = baseline_terms(X, self.load)
        Xm = X[:, self._cols]
        self.baseline_coefs, r, self.point = self._fit_parts(Xm, terms, s)
        if not interval:
            self.interval = None
            return self
        self.interval = xgb.XGBRegressor(objective="reg:quantileerror", quantile_alpha=np.array(INTERVAL_QUANTILES),
                                         **self.params)
        self.interval.fit(Xm, r)
        if calibrate and groups is not None:
            groups = np.asarray(groups)
            uniq = np.unique(groups)
            if len(uniq) >= 3:
                rng = np.random.default_rng(0)
                fold_of = dict(zip(rng.permutation(uniq), np.arange(len(uniq)) % 3))
                folds = np.array([fold_of[g] for g in groups])
                resid = np.empty(len(r))
                for k in range(3):
                    te = folds == k
                    c, _, m = self._fit_parts(Xm[~te], terms[~te], s[~te])
                    resid[te] = np.log(s[te]) - np.log(self._base(c, terms[te])) - m.get_booster().inplace_predict(Xm[te])
                n = len(resid)
                q = min(1.0, np.ceil((n + 1) * INTERVAL_COVERAGE) / n)
                self.conformal_log_width = float(np.quantile(np.abs(resid), q))
        return self

    def _point(self, Xm: np.ndarray, base: np.ndarray) -> np.ndarray:
        return base * np.exp(_booster(self.point, len(Xm)).inplace_predict(Xm))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Slowdown (> 0) of each row."""
        X = np.asarray(X, dtype=np.float64)
        return self._point(X[:, self._cols], self.baseline(X))

    def predict_interval(self, X: np.ndarray) -> np.ndarray:
        """(lo, hi) slowdown of each row; always contains the point prediction."""
        return self.predict_with_interval(X)[1]

    def predict_with_interval(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slowdown, (lo, hi)) of each row, sharing one pass over the features."""
        X = np.asarray(X, dtype=np.float64)
        Xm = X[:, self._cols]
        base = self.baseline(X)
        p = self._point(Xm, base)
        q = np.exp(np.asarray(_booster(self.interval, len(X)).inplace_predict(Xm)).reshape(len(X), -1)) * base[:, None]
        w = np.exp(self.conformal_log_width)
        return p, np.column_stack([np.minimum(q[:, 0], p / w), np.maximum(q[:, -1], p * w)])

    def feature_importance(self) -> pd.Series:
        imp = self.point.get_booster().get_score(importance_type="gain")
        return pd.Series({f: imp.get(f"f{i}", imp.get(f, 0.0)) for i, f in enumerate(self.features)}).sort_values(ascending=False)


@dataclass(frozen=True)
class Prediction:
    """Predicted outcome of running ``jobs`` together in ``mode``."""

    mode: str
    jobs: tuple[str, ...]
    slowdown: tuple[float, ...]
    interval: tuple[tuple[float, float], ...]
    solo_iteration_ms: tuple[float, ...]
    fits_memory: bool
    memory_gib: float | None = None

    @property
    def collocated_iteration_ms(self) -> tuple[float, ...]:
        return tuple(t * s for t, s in zip(self.solo_iteration_ms, self.slowdown))

    @property
    def delta(self) -> float:
        """Tabrizian's δ (eq. 4.1): Σ t_j / max t'_j."""
        return sum(self.solo_iteration_ms) / max(self.collocated_iteration_ms)

    @property
    def throughput(self) -> float:
        """Normalised throughput Σ t_j / t'_j = Σ 1 / s_j (> 1: the collocation pays)."""
        return float(sum(1.0 / s for s in self.slowdown))

    @property
    def pays_off(self) -> bool:
        return self.fits_memory and self.throughput > 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "jobs": [{"name": n, "slowdown": s, "interval": list(i), "solo_iteration_ms": t}
                     for n, s, i, t in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms)],
            "delta": self.delta,
            "throughput": self.throughput,
            "fits_memory": self.fits_memory,
        }

    def summary(self) -> str:
        lines = [f"mode {self.mode}: {len(self.jobs)} jobs"]
        for n, s, (lo, hi), t in zip(self.jobs, self.slowdown, self.interval, self.solo_iteration_ms):
            lines.append(f"  {n:<32} slowdown {s:5.2f}  [{lo:.2f}, {hi:.2f}]  {t:7.2f} ms -> {t * s:7.2f} ms")
        verdict = "pays off" if self.pays_off else ("does not fit in memory" if not self.fits_memory else "does not pay off")
        lines.append(f"  delta {self.delta:.2f}   normalised throughput {self.throughput:.2f}   ({verdict})")
        return "\n".join(lines)


@dataclass
class Predictor:
    """Predicts slowdowns for sets of :class:`JobProfile` in one sharing mode."""

    model: SlowdownModel
    mode: str
    manifest: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ loading
    @classmethod
    def default(cls, mode: str = "mps") -> "Predictor":
        path = models_dir() / f"h100-{mode}.json"
        if not path.exists():
            raise InputError(path, f"no shipped default model for mode {mode!r}")
        return cls.load(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Predictor":
        """Load a manifest and its XGBoost files, checking schema, features and checksums."""
        import xgboost as xgb

        path = Path(path)
        if path.is_dir():
            raise InputError(path, "is a directory; give the model's manifest (.json)")
        try:
            man = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(path, "no such file") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise SchemaError(path, "not a colopred model manifest (not JSON)") from None
        if not isinstance(man, dict) or man.get("schema") != MANIFEST_SCHEMA:
            raise SchemaError(path, "not a colopred model manifest")
        if man.get("schema_version") != MANIFEST_VERSION:
            raise SchemaError(path, f"model schema version {man.get('schema_version')!r} is not supported (expected {MANIFEST_VERSION})")
        if list(man.get("features", [])) != list(FEATURES) or list(man.get("model_features", [])) != list(model_features(man.get("mode"))):
            raise SchemaError(path, "model was trained on a different feature schema than this colopred computes")
        if man.get("contention_load") != load_kind(man.get("mode")):
            raise SchemaError(path, f"manifest's contention_load {man.get('contention_load')!r} is not the {man.get('mode')} mode's "
                                    f"({load_kind(man.get('mode'))!r})")
        coefs = man.get("baseline_coefs")
        if not isinstance(coefs, dict) or set(coefs) != set(BASELINE_TERMS):
            raise SchemaError(path, f"manifest's baseline_coefs must name {', '.join(BASELINE_TERMS)}")
        bad = [k for k, v in coefs.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v < 0]
        if bad:
            raise SchemaError(path, f"manifest's baseline_coefs {', '.join(sorted(bad))} must be non-negative numbers")
        model = SlowdownModel(man.get("params"), man.get("monotone", True), features=man["model_features"], load=man["contention_load"])
        model.conformal_log_width = float(man.get("conformal_log_width", 0.0))
        model.baseline_coefs = np.array([float(coefs[k]) for k in BASELINE_TERMS])
        for part in ("point", "interval"):
            entry = man.get("files", {}).get(part)
            if not entry:
                raise SchemaError(path, f"manifest lists no {part} model file")
            f = path.parent / entry["path"]
            if not f.exists():
                raise InputError(f, "model file listed in the manifest is missing")
            if _sha256(f) != entry["sha256"]:
                raise InputError(f, "checksum mismatch: the model file is corrupt or was changed")
            reg = xgb.XGBRegressor()
            try:
                reg.load_model(str(f))
            except xgb.core.XGBoostError as e:
                raise InputError(f, f"not a valid XGBoost model ({str(e).splitlines()[0][:120]})") from None
            setattr(model, part, reg)
        return cls(model=model, mode=man["mode"], manifest=man)

    def save(self, path: str | os.PathLike, **manifest_extra: Any) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        stem = path.name[:-5] if path.name.endswith(".json") else path.name
        files = {}
        for part in ("point", "interval"):
            f = path.parent / f"{stem}.{part}.ubj"
            getattr(self.model, part).save_model(str(f))
            files[part] = {"path": f.name, "sha256": _sha256(f)}
        man = {"schema": MANIFEST_SCHEMA, "schema_version": MANIFEST_VERSION, "mode": self.mode,
               "features": list(FEATURES), "model_features": list(self.model.features),
               "monotone_increasing": list(MONOTONE_INCREASING), "params": self.model.params,
               "monotone": self.model.monotone,
               "baseline_coefs": {k: float(v) for k, v in zip(BASELINE_TERMS, self.model.baseline_coefs)},
               "contention_load": self.model.load,
               "target": "log(slowdown) - log(1 + " + " + ".join(f"baseline_coefs[{k}] * {k}" for k in BASELINE_TERMS) + ")",
               "interval_quantiles": list(INTERVAL_QUANTILES), "interval_coverage": INTERVAL_COVERAGE,
               "conformal_log_width": self.model.conformal_log_width, "files": files, **self.manifest, **manifest_extra}
        man_path = path if path.name.endswith(".json") else path.with_suffix(".json")
        tmp = man_path.with_name(man_path.name + ".tmp")
        tmp.write_text(json.dumps(man, indent=1, default=str) + "\n")
        os.replace(tmp, man_path)
        self.manifest = man
        return man_path

    # --------------------------------------------------------------- predicting
    def _check_gpu(self, profiles: Sequence[JobProfile]) -> None:
        gpu = self.manifest.get("gpu")
        if not gpu:
            return
        for p in profiles:
            if p.gpu.name != gpu:
                warnings.warn(f"profile {p.name} was measured on {p.gpu.name}, the model on {gpu}: predictions may be off",
                              stacklevel=3)
                return

    def _check_wait(self, profiles: Sequence[JobProfile]) -> None:
        if self.mode != "mps":
            return
        for p in profiles:
            if p.source == "ncu" and p.mps_wait_us is None:
                warnings.warn(f"profile {p.name} has no mps_wait_us (made by an older colopred): its MPS wait counts as 0; "
                              "rebuild it from its ncu report (colopred profile ncu) for full accuracy", stacklevel=3)
                return

    def predict(self, profiles: Sequence[JobProfile]) -> Prediction:
        """Slowdown of each job when ``profiles`` run together."""
        if len(profiles) < 2:
            raise ValueError("a collocation needs at least two jobs")
        self._check_gpu(profiles)
        self._check_wait(profiles)
        P = profile_matrix(list(profiles))
        X, _, pos = feature_matrix(P, np.arange(len(profiles))[None, :])
        s = np.empty(len(profiles))
        iv = np.empty((len(profiles), 2))
        s[pos], iv[pos] = self.model.predict_with_interval(X)
        mem = [p.peak_memory_gib for p in profiles]
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        need = sum(m or 0.0 for m in mem) + CONTEXT_OVERHEAD_GIB * len(profiles)
        return Prediction(self.mode, tuple(p.name for p in profiles), tuple(map(float, s)),
                          tuple((float(a), float(b)) for a, b in iv), tuple(p.iteration_ms for p in profiles),
                          fits_memory=need <= gpu_mem, memory_gib=need)

    def predict_many(self, sets: Sequence[Sequence[JobProfile]]) -> pd.DataFrame:
        """Vectorised: one row per set with ``slowdowns`` (tuple), ``delta``, ``throughput``, ``fits_memory``."""
        profiles: list[JobProfile] = []
        index: dict[int, int] = {}
        for s in sets:
            for p in s:
                if id(p) not in index:
                    index[id(p)] = len(profiles)
                    profiles.append(p)
        k = max(len(s) for s in sets)
        idx = np.full((len(sets), k), -1, dtype=np.int64)
        for i, s in enumerate(sets):
            idx[i, : len(s)] = [index[id(p)] for p in s]
        self._check_wait(profiles)
        return self._predict_index(profiles, idx)

    def _predict_index(self, profiles: list[JobProfile], idx: np.ndarray) -> pd.DataFrame:
        P = profile_matrix(profiles)
        # Identical sets (the same members in any order) are predicted once: sort each set's
        # members, predict the distinct sorted sets, and put the slowdowns back in order.
        order = np.argsort(idx, axis=1, kind="stable")
        key = np.take_along_axis(idx, order, axis=1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        X, set_of, pos = feature_matrix(P, uniq)
        s_uniq = np.full(uniq.shape, np.nan)
        s_uniq[set_of, pos] = self.model.predict(X)
        s = np.empty(idx.shape)
        np.put_along_axis(s, order, s_uniq[inv.reshape(-1)], axis=1)
        t = np.array([p.iteration_ms for p in profiles])[np.where(idx >= 0, idx, 0)]
        t = np.where(idx >= 0, t, np.nan)
        mem = np.array([p.peak_memory_gib or 0.0 for p in profiles])[np.where(idx >= 0, idx, 0)]
        need = np.where(idx >= 0, mem + CONTEXT_OVERHEAD_GIB, 0).sum(1)
        gpu_mem = max(p.gpu.memory_gib for p in profiles)
        delta = np.nansum(t, 1) / np.nanmax(t * s, 1)
        thr = np.nansum(1.0 / s, 1)
        rows = s.tolist()
        slowdowns = [tuple(x for x in r if x == x) for r in rows] if np.isnan(s).any() else list(map(tuple, rows))
        return pd.DataFrame({"slowdowns": slowdowns, "delta": delta, "throughput": thr,
                             "fits_memory": need <= gpu_mem})

    def rank_partners(self, job: JobProfile, candidates: Sequence[JobProfile], k: int | None = None) -> pd.DataFrame:
        """Candidates ranked by predicted normalised throughput of the pair (best first)."""
        res = self.predict_many([[job, c] for c in candidates])
        res.insert(0, "partner", [c.name for c in candidates])
        res["job_slowdown"] = [s[0] for s in res["slowdowns"]]
        res = res.sort_values("throughput", ascending=False).reset_index(drop=True)
        return res.head(k) if k else res

    def pack(self, jobs: Sequence[JobProfile], n_gpus: int, max_per_gpu: int = 3,
             max_slowdown: float | None = None) -> list[list[str]]:
        """Place jobs on ``n_gpus`` GPUs to maximise total predicted normalised throughput
        (Σ over GPUs of Σ_j 1/s_j; a job alone counts 1).

        Greedy start (one job per GPU, largest GPU time first, then each remaining job where
        the predicted gain is largest), then local search: moves of one job and swaps of two
        jobs between GPUs, kept while they raise the total. Every GPU respects memory,
        ``max_per_gpu`` and ``max_slowdown``; a job that fits nowhere raises ``ValueError``.
        """
        cache: dict[tuple[str, ...], float | None] = {}

        def value(g: list[JobProfile]) -> float | None:
            """Predicted throughput of one GPU's jobs, or None where the limits forbid them."""
            if len(g) <= 1:
                return float(len(g))
            if len(g) > max_per_gpu:
                return None
            key = tuple(sorted(p.name for p in g))
            if key not in cache:
                pred = self.predict(g)
                ok = pred.fits_memory and (max_slowdown is None or max(pred.slowdown) <= max_slowdown)
                cache[key] = pred.throughput if ok else None
            return cache[key]

        order = sorted(jobs, key=lambda p: -p.gpu_busy_ms)
        gpus: list[list[JobProfile]] = [[p] for p in order[:n_gpus]]
        gpus += [[] for _ in range(n_gpus - len(gpus))]
        for p in order[n_gpus:]:
            best, best_gain = None, -np.inf
            for g in gpus:
                new, old = value(g + [p]), value(g)
                if new is not None and new - old > best_gain:
                    best, best_gain = g, new - old
            if best is None:
                raise ValueError(f"job {p.name} fits on no GPU under the limits given")
            best.append(p)
        for _ in range(100):  # local search: take the best move or swap while it raises the total
            best_step, best_gain = None, 1e-9
            for i in range(n_gpus):
                for k in range(n_gpus):
                    if i == k:
                        continue
                    gi, gk = gpus[i], gpus[k]
                    before = value(gi) + value(gk)
                    for a in gi:
                        for b in [None, *gk]:
                            if b is not None and k < i:
                                continue  # each swap once
                            ni = [p for p in gi if p is not a] + ([b] if b is not None else [])
                            nk = [p for p in gk if p is not b] + [a]
                            vi, vk = value(ni), value(nk)
                            if vi is not None and vk is not None and vi + vk - before > best_gain:
                                best_step, best_gain = (i, k, ni, nk), vi + vk - before
            if best_step is None:
                break
            i, k, gpus[i], gpus[k] = best_step
        return [[p.name for p in g] for g in gpus]
