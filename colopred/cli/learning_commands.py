"""``colopred train --store`` (a new model version from the service's observations) and ``colopred models``
(list the versions of a store, roll back, promote): the learning loop of ``colopred serve`` (docs/service.md,
"Learning from observations"). The store and the versions are read without the serve extra."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ColopredError, InputError

DEFAULT_DATA = "datasets/h100"


def _open(a):
    from ..service.store import StoreError, open_store
    from ..service.versions import models_dir_of

    try:
        store = open_store(a.store)
    except StoreError as e:
        raise ColopredError(str(e)) from None
    return store, models_dir_of(a.store, getattr(a, "models_dir", None))


def _bases(models: list[str] | None) -> dict[str, Path]:
    """Each served name's version 0: the ``--model`` manifests, or every shipped model (as ``colopred serve``)."""
    from ..constants import MODES
    from ..runtime.manifest import default_model_path
    from ..runtime.sources import PROFILE_SOURCES

    paths = [Path(m) for m in models] if models else [default_model_path(m, s) for m in MODES for s in PROFILE_SOURCES
                                                        if default_model_path(m, s).exists()]
    out = {}
    for p in paths:
        if not p.is_file():
            raise InputError(p, "no such model manifest (--model)")
        name = p.name[:-5] if p.name.endswith(".json") else p.name
        if name in out:
            raise ColopredError(f"--model: two models named {name!r}: give each manifest its own file name")
        out[name] = p
    return out


def cmd_train_store(a) -> int:
    from ..research.retrain import retrain
    from ..service.versions import VersionError
    from .common import log_of, parse_modes

    if a.out:
        raise ColopredError("--out: with --store, a version is written to the store's models folder (--models-dir)")
    data = a.data or DEFAULT_DATA
    if not Path(data).is_dir():
        raise InputError(data, "dataset directory not found: the shipped data is the source checkout's datasets/h100 "
                               "(run from it), or give --data FOLDER")
    store, models_dir = _open(a)
    if models_dir is None:
        raise ColopredError(f"--store {store.url}: a database store needs --models-dir, a folder its servers read")
    log = log_of(a)
    try:
        results = retrain(store, data, models_dir, _bases(a.model), parse_modes(a.modes), promote=not a.no_promote, log=log)
    except VersionError as e:
        raise ColopredError(str(e)) from None
    finally:
        store.close()
    print(json.dumps([{k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in r.items()} for r in results], indent=1))
    return 0


def cmd_models_list(a) -> int:
    store, _ = _open(a)
    try:
        active = store.active_versions()
        doc = {"versions": [{**v.to_dict(), "serving": (active.get(v.name) is not None and active[v.name].version == v.version)}
                            for v in store.model_versions(a.name)],
               "events": [e.to_dict() for e in store.model_events(a.name)]}
    finally:
        store.close()
    if a.json:
        print(json.dumps(doc, indent=1))
        return 0
    serving = {n: e.version for n, e in active.items()}
    for v in doc["versions"]:
        ev = v.get("evaluation", {})
        mark = "*" if v["serving"] else " "
        print(f"{mark} {v['name']:<24} v{v['version']:<3} {v['id']:<32} {v['created_at'][:19]}  "
              f"{ev.get('reason', '')}")
    for name in sorted(serving):
        if not any(v["serving"] for v in doc["versions"] if v["name"] == name):
            print(f"* {name:<24} v0   (the model its servers started with)")
    return 0


def _switch(a, action: str) -> int:
    from ..service.store import StoreError

    store, _ = _open(a)
    try:
        version = a.version
        if version is None:
            from ..service.versions import previous_version

            version = previous_version(store.model_events(a.name))
            if version is None:
                raise ColopredError(f"{a.name}: it has served no other version: nothing to roll back to")
        try:
            ev = store.add_model_event(a.name, action, version, a.reason or ("rollback" if action == "rollback" else "promoted by an operator"))
        except StoreError as e:
            raise ColopredError(f"--version: {e}") from None
    finally:
        store.close()
    print(json.dumps(ev.to_dict(), indent=1))
    return 0


def cmd_models_rollback(a) -> int:
    return _switch(a, "rollback")


def cmd_models_promote(a) -> int:
    if a.version is None:
        raise ColopredError("--version: give the version to promote (colopred models list)")
    return _switch(a, "promote")


def add_store_options(p) -> None:
    p.add_argument("--store", required=True, help="the service's store: a folder (SQLite) or a postgresql:// URL")
    p.add_argument("--models-dir", help="the folder of model versions (default: STORE/models for a folder store)")


def add_commands(sub) -> None:
    from .common import command

    p = command(sub, "models", "model versions trained from a service's observations: list, roll back, promote",
                lambda a: None, "The versions of each served model that `colopred train --store` recorded, and which one "
                                "serves: running servers apply a rollback or promotion at their next request.", verbosity=False)
    msub = p.add_subparsers(dest="models_command", required=True, metavar="SUBCOMMAND")
    q = command(msub, "list", "every recorded version and event", cmd_models_list, verbosity=False)
    add_store_options(q)
    q.add_argument("--name", help="one model name (h100-mps ...)")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    for name, func, what in (("rollback", cmd_models_rollback, "serve an earlier version (default: the one before)"),
                             ("promote", cmd_models_promote, "serve a recorded version, whatever the promotion rule said")):
        q = command(msub, name, what, func, verbosity=False)
        q.add_argument("name", help="the model name (h100-mps, h100-timeslice, ...)")
        add_store_options(q)
        q.add_argument("--version", type=int, help="the version (0: the model the servers started with)")
        q.add_argument("--reason", help="kept in the event")
