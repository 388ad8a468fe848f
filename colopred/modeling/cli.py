"""CLI commands of the model: ``predict``, ``train``, ``evaluate`` (xgboost imported lazily)."""

from __future__ import annotations

import json
import sys
import warnings

from ..errors import ColopredError


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_predict(a) -> int:
    from ..profile import load_profiles
    from .predictor import Predictor

    if len(a.profiles) < 2:
        raise ColopredError("predict needs at least two profiles")
    profiles = load_profiles(a.profiles)
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ColopredError("two profiles have the same job name; give each job once")
    pred = Predictor.load(a.model) if a.model else Predictor.default(a.mode)
    if pred.mode != a.mode:
        raise ColopredError(f"{a.model}: model is for mode {pred.mode!r}, not {a.mode!r}")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        result = pred.predict(profiles)
    for x in w:
        _log(f"colopred: warning: {x.message}")
    print(json.dumps(result.to_dict(), indent=1) if a.json else result.summary())
    return 0


def cmd_train(a) -> int:
    from .train import train

    paths = train(a.data, a.out, modes=tuple(a.modes.split(",")), with_metrics=not a.no_metrics, log=_log)
    if not paths:
        raise ColopredError(f"{a.data}: no model trained (no measurements)")
    return 0


def cmd_evaluate(a) -> int:
    from .dataset import load_dataset
    from .evaluate import evaluate

    ds = load_dataset(a.data)
    table = evaluate(ds, a.out, modes=tuple(a.modes.split(",")), log=_log)
    cols = ["mode", "split", "method", "slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct", "partner_rank_corr"]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if a.out:
        _log(f"report written to {a.out}/report.md")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("predict", help="predict slowdowns of jobs collocated on one GPU")
    p.add_argument("profiles", nargs="+", help="profile JSON files (colopred profile ...)")
    p.add_argument("--mode", choices=("mps", "timeslice"), required=True)
    p.add_argument("--model", help="model manifest (default: the shipped H100 model for --mode)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("train", help="train models on a dataset directory (profiles/ncu + campaigns)")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True, help="output stem: writes OUT-MODE.json + model files")
    p.add_argument("--modes", default="timeslice,mps")
    p.add_argument("--no-metrics", action="store_true", help="skip cross-validated metrics in the manifest")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="cross-validated evaluation against baselines, with a report")
    p.add_argument("--data", default="datasets/h100")
    p.add_argument("--out", help="directory for report.md and figures")
    p.add_argument("--modes", default="timeslice,mps")
    p.set_defaults(func=cmd_evaluate)
