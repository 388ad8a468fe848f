"""``colopred predict``, ``train`` and ``evaluate`` (XGBoost is imported when they run)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings

from ..constants import MODES
from ..errors import ColopredError, InputError

DEFAULT_TRACE = "datasets/traces/gavel-msr/0e4a51.trace"
DEFAULT_DATA = "datasets/h100"


def _relabel_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-relabel", action="store_true",
                   help="label the time-slicing sets re-measured under DATA/relabel/ by their campaigns' windows, not by "
                        "the mean of their re-measured windows")


@contextlib.contextmanager
def _naming(path: str):
    """An InputError about the dataset as a whole (no file of its own) names the dataset folder."""
    try:
        yield
    except InputError as e:
        if e.path is None:
            raise InputError(path, e.problem) from None
        raise


def cmd_predict(a) -> int:
    if a.explain is not None and a.explain < 1:
        raise ColopredError(f"--explain: give a positive number of contributions per job, not {a.explain}")
    if a.server and a.explain is not None:
        raise ColopredError("--explain: the prediction is explained here, from a model file; leave out --server")
    if a.server:
        from .serve_commands import remote_predict

        return remote_predict(a)
    from ..profile import load_profiles
    from .common import load_predictor

    if len(a.profiles) < 2:
        raise ColopredError("predict needs at least two profiles")
    profiles = load_profiles(a.profiles)
    first: dict[str, tuple[str, object]] = {}
    for path, p in zip(a.profiles, profiles):  # one name, one job: the same profile again is a copy of it (JOB#2)
        at, q = first.setdefault(p.name, (path, p))
        if q != p:
            raise InputError(path, f"holds another profile of job {p.name!r} than {at} does: give one of them another "
                             "\"name\" (the same profile given twice is two copies of the job)")
    pred = load_predictor(a.model, a.mode, profiles, "predict")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if a.observed:
            from ..runtime.observed import read_observations

            observed = read_observations(a.observed, a.mode, profiles)
            try:
                pred = pred.observe(observed)
            except (ValueError, TypeError) as e:
                raise ColopredError(f"{a.observed}: {e}") from None
        try:
            result = pred.predict(profiles)
        except (ValueError, TypeError) as e:
            raise ColopredError(f"predict: {e}") from None
    notes = [str(x.message) for x in caught]
    for n in notes:
        print(f"colopred: warning: {n}", file=sys.stderr)
    why = result.explain(a.explain) if a.explain is not None else None
    if a.json:
        from ..runtime.documents import prediction_document

        print(json.dumps(prediction_document(result, pred.profile_source, notes, why), indent=1))
    else:
        print(result.summary())
        if pred.profile_source != "ncu":
            print(f"(model for {pred.profile_source} GPM profiles)")
        if why is not None:
            print("why (each job's largest contributions to its slowdown):")
            print(why.text())
    return 0


def _profile_source(data: str, given: str | None, log) -> str:
    """The profiles ``--profiles`` names, or without it the dataset's own: ``profiles/ncu``, else ``profiles/nvml``
    where that is all it has (``colopred import`` writes profiles built from table columns there). A named folder
    the dataset lacks is refused pointing at the one it has."""
    from pathlib import Path

    from ..runtime.sources import PROFILE_SOURCES

    have = [s for s in PROFILE_SOURCES if (Path(data) / "profiles" / s).is_dir()]
    if given is None:
        if "ncu" in have or not have:
            return "ncu"  # (none: the reader names the folder it lacks)
        log(f"reading {data}/profiles/{have[0]} (the dataset has no profiles/ncu; --profiles {have[0]})")
        return have[0]
    if given not in have and have:
        raise InputError(Path(data) / "profiles" / given, f"no such folder of profiles: this dataset's profiles are in "
                         f"profiles/{have[0]} (give --profiles {have[0]}, or leave --profiles out)")
    return given


def _groups(a) -> dict[str, str] | None:
    """``--groups FILE``: {job: architecture} for leave-architecture-out (``colopred.research.arch_groups``)."""
    from ..research.arch_groups import read_groups

    return read_groups(a.groups) if a.groups else None


def _groups_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--groups", metavar="FILE",
                   help="JSON object {job: architecture}: the groups leave-architecture-out holds out (default: a profile's "
                        "meta.arch, else the part of the job's name before -b)")


def cmd_train(a) -> int:
    from pathlib import Path

    from .common import log_of, need, parse_modes

    need("train", "sklearn", "scipy")
    from ..research.training import train

    if a.store:
        from .learning_commands import cmd_train_store

        return cmd_train_store(a)
    if not a.data:
        raise ColopredError("--data: give the dataset folder to train on (or --store: a version from a service's observations)")
    if a.model:
        raise ColopredError("--model: only with --store (the models a store's servers started with)")
    if not a.out or Path(a.out).name in ("", ".", ".."):
        raise ColopredError(f"--out needs a file stem (OUT in OUT-MODE.json), not {a.out!r}")
    source = _profile_source(a.data, a.profiles, log_of(a))
    groups = _groups(a)
    with _naming(a.data):
        paths = train(a.data, a.out, modes=parse_modes(a.modes), with_metrics=not a.no_metrics, log=log_of(a), profile_source=source,
                      relabel=not a.no_relabel, groups=groups)
    if not paths:
        raise ColopredError(f"{a.data}: no model trained (no measurements)")
    return 0


def cmd_evaluate(a) -> int:
    from pathlib import Path

    from .common import log_of, need, parse_modes

    need("evaluate", "sklearn", "scipy", *(["matplotlib"] if a.out else []))
    from ..research.arch_groups import regrouped
    from ..research.dataset import load_dataset
    from ..research.report import evaluate

    log = log_of(a)
    modes = parse_modes(a.modes)
    if a.out and Path(a.out).exists() and not Path(a.out).is_dir():
        raise InputError(a.out, "is a file; --out names a folder for the report")
    log(f"reading {a.data}")
    source = _profile_source(a.data, a.profiles, log)
    groups = _groups(a)
    with _naming(a.data):
        ds = regrouped(load_dataset(a.data, profile_source=source, relabel=not a.no_relabel), groups, log=log)
        table = evaluate(ds, a.out, modes=modes, log=log)
    cols = ["mode", "split", "method", "slowdown_mape_pct", "delta_mae", "pays_off_agreement_pct", "partner_rank_corr"]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if a.out:
        log(f"report written to {a.out}/report.md")
    return 0


def cmd_simulate(a) -> int:
    from .common import log_of, need, parse_modes

    need("simulate", "sklearn", "scipy", *(["matplotlib"] if a.out else []))
    from ..research.simulation import run_study

    counts = []
    for x in a.gpus.split(","):
        try:
            counts.append(int(x))
        except ValueError:
            raise ColopredError(f"--gpus: {x!r} is not a number of GPUs") from None
    if not counts or min(counts) < 1:
        raise ColopredError("--gpus: give one or more positive numbers of GPUs, comma separated")
    from pathlib import Path

    for given, default, what in ((a.trace, DEFAULT_TRACE, "--trace FILE (a Gavel msr trace)"),
                                 (a.data, DEFAULT_DATA, "--data FOLDER (measured sets and profiles)")):
        if given == default and not Path(default).exists():  # the defaults are folders of the source checkout
            raise InputError(default, f"not found: the default ships with colopred's source checkout (run from it), or give {what}")
    if a.server is None:
        for flag, value in (("--replicate", a.replicate != 1), ("--max-events", a.max_events is not None),
                            ("--max-wall-s", a.max_wall_s is not None)):
            if value:
                raise ColopredError(f"{flag}: only with --server URL (a replay through a running colopred serve)")
    else:
        from ..research.replay import run_replay

        if a.replicate < 1:
            raise ColopredError(f"--replicate: give a positive number of copies of the trace, not {a.replicate}")
        if a.max_events is not None and a.max_events < 1:
            raise ColopredError(f"--max-events: give a positive number of events, not {a.max_events}")
        if a.max_wall_s is not None and not a.max_wall_s > 0:
            raise ColopredError(f"--max-wall-s: give a positive number of seconds, not {a.max_wall_s}")
        table, _ = run_replay(a.server, a.data, a.trace, counts, parse_modes(a.modes), max_per_gpu=a.max_per_gpu,
                              copies=a.replicate, max_events=a.max_events, max_wall_s=a.max_wall_s, out_dir=a.out,
                              token=getattr(a, "token", None), log=log_of(a))
        print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
        return 0
    table = run_study(a.data, a.trace, counts, a.out, modes=parse_modes(a.modes), max_per_gpu=a.max_per_gpu, log=log_of(a))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return 0


def add_commands(sub) -> None:
    from ..runtime.sources import PROFILE_SOURCES
    from .common import command

    p = command(sub, "predict", "predict the slowdown of jobs sharing one GPU", cmd_predict,
                "Predict each job's slowdown, δ and normalised throughput when the profiled jobs share one GPU.", verbosity=False)
    p.add_argument("profiles", nargs="+", help="profile JSON files (colopred profile ...), two or more; a file given n "
                                               "times is n copies of its job, named JOB#1 .. JOB#n")
    p.add_argument("--mode", choices=MODES, required=True, help="sharing mode")
    p.add_argument("--model", help="model manifest (default: the shipped H100 model of --mode for the profiles: "
                                   "the GPM model where any profile is a GPM profile)")
    p.add_argument("--json", action="store_true", help="machine-readable output (with any warnings)")
    p.add_argument("--explain", nargs="?", type=int, const=3, default=None, metavar="K",
                   help="also say why: each job's K largest contributions to its predicted slowdown, in words (default K: 3)")
    p.add_argument("--observed", metavar="FILE",
                   help="measured collocations of these or other jobs (colopred/schemas/observations.schema.json): each "
                        "observed job's prediction moves toward what was measured of it")
    from .serve_commands import add_server_option

    add_server_option(p)

    p = command(sub, "train", "train models on a dataset folder (profiles + campaigns), or a new version from a "
                "service's observations (--store)", cmd_train,
                "Fit one model per mode on a dataset folder and write OUT-MODE.json with its model files. With --store, "
                "fit each served model again on the dataset (default datasets/h100) plus the store's observations, write "
                "it as a new version to the store's models folder and promote it if it beats the version serving on the "
                "most recent observations (docs/service.md, \"Learning from observations\").")
    p.add_argument("--data", help="dataset folder: profiles/ncu/*.json and campaigns/*/windows.jsonl (with --store, "
                                  "default datasets/h100)")
    p.add_argument("--out", help="output stem: writes OUT-MODE.json, OUT-MODE.point.ubj, OUT-MODE.interval.ubj "
                                 "(OUT-MODE-nvml.* with --profiles nvml)")
    p.add_argument("--store", help="a service's store (a folder, or a postgresql:// URL): train a new version of each "
                                   "served model from its observations")
    p.add_argument("--models-dir", help="with --store: the folder of model versions (default: STORE/models)")
    p.add_argument("--model", action="append", metavar="MANIFEST",
                   help="with --store: the models the store's servers started with, as for colopred serve (default: the "
                        "shipped ones)")
    p.add_argument("--no-promote", action="store_true", help="with --store: record the version, never promote it")
    p.add_argument("--profiles", choices=PROFILE_SOURCES, default=None,
                   help="profiles describing the jobs: profiles/ncu, or profiles/nvml (GPM) for the model of GPM profiles "
                        "(default: profiles/ncu, or profiles/nvml where the dataset has only those)")
    p.add_argument("--modes", default=",".join(MODES), help="modes to train, comma separated")
    p.add_argument("--no-metrics", action="store_true", help="skip the cross-validated metrics in the manifest")
    _groups_option(p)
    _relabel_option(p)

    p = command(sub, "evaluate", "cross-validated evaluation against baselines, with a report", cmd_evaluate,
                "Cross-validate colopred and the baselines on a dataset; with --out, write report.md and plots.")
    p.add_argument("--data", default="datasets/h100", help="dataset folder")
    p.add_argument("--out", help="folder for report.md, metrics.csv and figures")
    p.add_argument("--profiles", choices=PROFILE_SOURCES, default=None,
                   help="profiles describing the jobs: profiles/ncu, or profiles/nvml (GPM) for the model of GPM profiles "
                        "(default: profiles/ncu, or profiles/nvml where the dataset has only those)")
    p.add_argument("--modes", default=",".join(MODES), help="modes to evaluate, comma separated")
    _groups_option(p)
    _relabel_option(p)

    p = command(sub, "simulate", "replay a cluster trace under four placement policies (outcomes from measurements)", cmd_simulate,
                "Replay a Gavel/Philly trace: one job per GPU, random packing, utilisation-threshold packing and "
                "colopred-guided packing, with co-located jobs running at their measured slowdowns.")
    p.add_argument("--trace", default=DEFAULT_TRACE, help="Gavel msr trace (tab-separated)")
    p.add_argument("--data", default=DEFAULT_DATA, help="dataset folder: measured sets and profiles")
    p.add_argument("--gpus", default="4,5,6", help="cluster sizes to simulate, comma separated")
    p.add_argument("--max-per-gpu", type=int, default=2, help="jobs per GPU at most")
    p.add_argument("--modes", default=",".join(MODES), help="modes to simulate, comma separated")
    p.add_argument("--out", help="folder for simulation.md, simulation.csv and the plot (with --server: each replay's "
                                 "jobs, decisions and observations as CSV)")
    p.add_argument("--server", metavar="URL",
                   help="replay the trace through a running colopred serve as a scheduler would: register the jobs' "
                        "profiles, ask POST /v1/pack at every arrival and completion, post each set's measured slowdowns "
                        "as observations (outcomes still from measurements); use a fresh store per replay")
    p.add_argument("--replicate", type=int, default=1, metavar="N", help="with --server: the trace N times over (copies "
                                                                        "interleaved), for a cluster of 1,000 GPUs")
    p.add_argument("--max-events", type=int, default=None, help="with --server: stop after this many events")
    p.add_argument("--max-wall-s", type=float, default=None, help="with --server: stop after this many seconds")
