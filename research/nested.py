"""Nested cross-validation of the interval's calibration over architectures (the honest protocol's complement to the
locked split).

The locked split holds out five architectures, too few to tell a ±3-point calibration error from the draw
(``protocol.coverage_spread``). Here every architecture is held out once, in an **outer fold**, and the interval's
constants are chosen again for each outer fold, by the same rules, on the sets without any of its architectures:

1. the per-row slowdown scale p̂^c (``interval_rules.slowdown_scale``), its predictions made with the growth beyond the
   trained sizes at its default (``beyond_size``, a = ``INTERVAL_SIZE_EXPONENT`` for every job);
2. the growth's exponents a and which growth (``interval_rules.size_exponent``) from those predictions at the chosen
   c, the growth in use (``constants.INTERVAL_SCALE_OF_SOURCE``) the incumbent of its hysteresis rule.

Each row of the fold's architectures is then predicted with those constants, as the report's splits predict it
(``evaluation.splits``: leave-arch by a model fitted without any set holding the row's own architecture, the
extrapolating splits by one fitted on every set of the training sizes), and as the locked protocol does, fold by fold
(a model fitted without any set holding one of the fold's architectures; on pairs → triples an unseen job in a larger
set) (:data:`TRAINING`). Either way the constants never saw the row's architecture, and each row is tested once per
split and training. Each row is also predicted by a model with the shipped constants fitted on the same rows, so that
what re-choosing moves shows.

Outer fold 0 is the locked split itself; the development architectures are dealt to the other folds
(:func:`outer_folds`). What is nested is the interval's calibration. The point model's design and constants (the
contention baseline's γ, ε and half-wave threshold, the tree settings, the tree features) were chosen on every
architecture before the lock, or on the development ones after it, so the point MAPE of folds 1.. is not a figure no
choice saw (the locked fold's is, as in ``protocol``); nor are the conformal folds and classes
(``CONFORMAL_FOLDS``, ``INTERVAL_CLASSES``), chosen on the development rows.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from colopred.constants import INTERVAL_SCALE_OF_SOURCE, INTERVAL_SIZE_EXPONENT, INTERVAL_UNSEEN_WIDTHS
from colopred.measurement.zoo.registry import ARCH_FAMILY
from colopred.runtime.estimator import INTERVAL_CLASS_NAMES
from colopred.runtime.features import FEATURES
from colopred.research.dataset import Dataset
from colopred.research.evaluation import covered, job_fit_args, new_model
from research.interval_rules import size_exponent, slowdown_scale, target_class, unseen_width
from colopred.research.protocol import LOCKED_KINDS, hits_by_arch, is_locked

OUTER_FOLDS = 6
"""Outer folds: the locked split and five of the development architectures, about as many architectures each as the
locked split holds (5 of 29), so that a fold's choice is made on as many rows as the locked split's was."""
OUTER_SEED = 23
"""Seed of the deal of the development architectures to the outer folds (the locked split's), fixed before any run."""
BOOTSTRAP_DRAWS = 2000
"""Draws of architectures behind a nested coverage's standard error (its SE then moves by ~1.6% of itself)."""
BOOTSTRAP_SEED = 23
RAW_WIDTH = {"unseen_widths": dict.fromkeys(INTERVAL_CLASS_NAMES, 1.0)}
"""What the fold predictions' models are given: κ = 1, so that the unseen-width rule can score every κ from them."""
NEEDED = ("hi", "pred", "slowdown", "t_busy", "window_id", "mode", "split", "n_jobs", "co_sum_busy")
"""Columns of the development predictions the size-exponent rules score."""


def outer_folds(archs: Sequence[str], locked: Sequence[str], folds: int = OUTER_FOLDS, seed: int = OUTER_SEED) -> list[list[str]]:
    """Fold 0: the ``locked`` architectures (those of ``archs``). Folds 1 … ``folds`` − 1: the other architectures,
    families in sorted order (``ARCH_FAMILY``, cnn by default), each family's architectures in an order drawn by
    ``numpy.random.default_rng(seed)``, dealt in turn, so that a family spreads over the folds."""
    if folds < 2:
        raise ValueError("nested cross-validation needs the locked fold and at least one more")
    lock = sorted(set(locked) & set(archs))
    families: dict[str, list[str]] = {}
    for a in sorted(set(archs) - set(lock)):
        families.setdefault(ARCH_FAMILY.get(a, "cnn"), []).append(a)
    rng = np.random.default_rng(seed)
    order = [str(a) for fam in sorted(families) for a in rng.permutation(families[fam])]
    out: list[list[str]] = [lock] + [[] for _ in range(folds - 1)]
    for i, a in enumerate(order):
        out[1 + i % (folds - 1)].append(a)
    return [sorted(f) for f in out]


def choose_constants(dev_by_mode: Mapping[str, pd.DataFrame], source: str = "ncu", timeline: bool = True,
                     log: Callable[[str], None] = lambda s: None) -> dict[str, dict]:
    """The interval's constants of each mode chosen on ``dev_by_mode`` (one mode's development rows each) by the rules
    of ``interval_rules`` (module doc): ``{mode: {"slowdown_exponents", "size_exponents", "interval_scale"}}``, the
    keyword arguments of :func:`evaluation.new_model`."""
    default_growth = {"size_exponents": dict.fromkeys(INTERVAL_CLASS_NAMES, INTERVAL_SIZE_EXPONENT),
                      "interval_scale": "beyond_size"}
    pred = slowdown_scale.predictions(dev_by_mode, source=source, timeline=timeline, model_kw=default_growth,
                                      keep=NEEDED, log=log)
    c_of, _ = slowdown_scale.choose(slowdown_scale.cells(pred))
    # a class's c changes only its own scores and widths (one conformal width per class), so a row of the run at its
    # class's chosen c is the row of a model with both chosen c's
    chosen_c = np.array([c_of[m][k] for m, k in zip(pred["mode"], target_class(pred["t_busy"]))])
    ext = pred[(pred["split"] != "random") & (pred["c"].to_numpy() == chosen_c)].reset_index(drop=True)
    cov = size_exponent.coverage_by_exponent(ext)
    a_of = size_exponent.choose(cov)
    objective = size_exponent.design_objective(size_exponent.cell_coverage(ext, a_of))
    se = size_exponent.objective_difference_se(ext, a_of)
    scale = size_exponent.choose_scale(objective, se, INTERVAL_SCALE_OF_SOURCE.get(source, "beyond_size"))
    return {mode: {"slowdown_exponents": dict(c_of[mode]), "size_exponents": dict(a_of[scale][mode]),
                   "interval_scale": scale} for mode in dev_by_mode}


TRAINING = ("split", "fold-out")
"""What a fold's test rows are predicted from. ``split``: the split as the report makes it (``evaluation.splits``):
leave-arch without any set holding the row's own architecture, the extrapolating splits from every set of the training
sizes. ``fold-out``: without any set holding one of the fold's architectures (the locked protocol, fold by fold; on
the extrapolating splits an unseen job in a larger set)."""


def _fits(df: pd.DataFrame, fold: Sequence[str], kind: str, training: str):
    """Yield (test rows, training rows) of one kind of split and ``training`` (:data:`TRAINING`) for ``fold``."""
    train_size, test_size = LOCKED_KINDS[kind]
    n, arch = df["n_jobs"].to_numpy(), df["arch"].to_numpy()
    if training == "fold-out":
        groups = [list(fold)]
    elif kind == "leave-arch":
        groups = [[a] for a in fold]
    else:
        groups = [[]]
    for g in groups:
        tr = np.flatnonzero(~is_locked(df, g) & train_size(n)) if g else np.flatnonzero(train_size(n))
        te = np.flatnonzero(np.isin(arch, g if kind == "leave-arch" or training == "fold-out" else list(fold)) & test_size(n))
        if len(tr) and len(te):
            yield te, tr


def fold_predictions(ds: Dataset, fold: Sequence[str], constants: Mapping[str, dict], modes: Sequence[str]) -> pd.DataFrame:
    """The rows of ``fold``'s architectures on each kind of split (``protocol.LOCKED_KINDS``), predicted from each
    :data:`TRAINING` (column ``training``) with the fold's ``constants`` (``pred``, ``lo``, ``hi``) and with the shipped
    ones (``pred_shipped``, ``lo_shipped``, ``hi_shipped``), an unseen job's interval in a larger set as wide as a
    trained job's (:data:`RAW_WIDTH`; :func:`with_unseen_widths` widens it)."""
    out = []
    for mode in modes:
        df = ds.for_mode(mode)
        if df.empty:
            continue
        X, s = df[list(FEATURES)].to_numpy(), df["slowdown"].to_numpy()
        for kind in LOCKED_KINDS:
            for training in TRAINING:
                for te, tr in _fits(df, fold, kind, training):
                    cols = {}
                    for tag, kw in (("", constants[mode]), ("_shipped", {})):
                        m = new_model(mode, ds.profile_source, ds.timeline, **kw, **RAW_WIDTH).fit(
                            X[tr], s[tr], groups=df["arch"].to_numpy()[tr], **job_fit_args(df.iloc[tr]))
                        p, iv = m.predict_with_interval(X[te], jobs=df["job"].to_numpy()[te])
                        cols.update({f"pred{tag}": p, f"lo{tag}": iv[:, 0], f"hi{tag}": iv[:, 1]})
                    out.append(df.iloc[te][["window_id", "set", "job", "arch", "n_jobs", "t_busy", "slowdown"]]
                               .assign(mode=mode, split=kind, training=training, **cols))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def with_unseen_widths(pred: pd.DataFrame, source: str = "ncu") -> tuple[pd.DataFrame, dict[int, dict]]:
    """(``pred`` (:func:`fold_predictions`) with the intervals of its unseen jobs in larger sets (the fold-out rows of
    the extrapolating splits) widened by κ (log half-width times κ): the fold's columns by the κ its rule chooses on the
    other development folds (``interval_rules.unseen_width.nested_covered``), the shipped columns by the shipped
    ``constants.INTERVAL_UNSEEN_WIDTHS`` of ``source``; each fold's κ, ``{fold: {mode: {class: κ}}}``)."""
    out = pred.copy()
    rows = np.flatnonzero(((pred["training"] == "fold-out") & pred["split"].isin(unseen_width.EXTRAPOLATING)).to_numpy())
    if not len(rows):
        return out, {}
    sub = pred.iloc[rows].reset_index(drop=True)
    cls = target_class(sub["t_busy"])
    _, chosen_of = unseen_width.nested_covered(sub)
    shipped = INTERVAL_UNSEEN_WIDTHS.get(source, {})
    for tag, kappa in (("", [chosen_of[f][m][c] for f, m, c in zip(sub["fold"], sub["mode"], cls)]),
                       ("_shipped", [shipped.get(m, {}).get(c, 1.0) for m, c in zip(sub["mode"], cls)])):
        p, k = sub[f"pred{tag}"].to_numpy(float), np.asarray(kappa, float)
        out.loc[out.index[rows], f"hi{tag}"] = p * (sub[f"hi{tag}"].to_numpy(float) / p) ** k
        out.loc[out.index[rows], f"lo{tag}"] = p * (sub[f"lo{tag}"].to_numpy(float) / p) ** k
    return out, chosen_of


def coverage_se(pred: pd.DataFrame, lo: str = "lo", hi: str = "hi", draws: int = BOOTSTRAP_DRAWS,
                seed: int = BOOTSTRAP_SEED) -> float:
    """Standard error (points) of the coverage of ``pred``'s rows with their architectures drawn with replacement
    (``draws`` times): an unseen job's error is mostly its own bias, shared by its rows, so the architecture, not the
    row, is the unit of sampling."""
    hits, rows = hits_by_arch(pred, lo, hi)
    if len(rows) < 2:
        return float("nan")
    pick = np.random.default_rng(seed).integers(0, len(rows), (draws, len(rows)))
    return float(np.std(100 * hits[pick].sum(axis=1) / rows[pick].sum(axis=1), ddof=1))


def summary(pred: pd.DataFrame) -> pd.DataFrame:
    """Per mode, kind of split and training (:data:`TRAINING`): rows, architectures, MAPE (%), coverage (%) with
    the fold's constants and its architecture-bootstrap SE, coverage with the shipped constants, and the coverage of
    each class of target job."""
    rows = []
    for (mode, kind, training), g in pred.groupby(["mode", "split", "training"], sort=False):
        cls = target_class(g["t_busy"])
        inside = covered(g["slowdown"], g["lo"], g["hi"]).to_numpy()
        rows.append({
            "mode": mode, "split": kind, "training": training, "rows": len(g), "architectures": g["arch"].nunique(),
            "slowdown_mape_pct": float(np.mean(np.abs(g["pred"] - g["slowdown"]) / g["slowdown"]) * 100),
            "coverage_pct": float(inside.mean() * 100), "coverage_se_pct": coverage_se(g),
            "coverage_shipped_constants_pct": float(covered(g["slowdown"], g["lo_shipped"], g["hi_shipped"]).mean() * 100),
            **{f"coverage_{k}_pct": float(inside[cls == k].mean() * 100) if (cls == k).any() else float("nan")
               for k in ("saturating", "host_bound")}})
    return pd.DataFrame(rows)
