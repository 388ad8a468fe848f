"""``colopred pack REQUEST.json`` and ``colopred rank REQUEST.json``: placement for schedulers, one call per round."""

from __future__ import annotations

import json
import warnings

from ..errors import ColopredError


def _predictor(req, path):
    from .common import load_predictor

    profiles = req.jobs + req.candidates + ([req.job] if req.job else [])
    pred = load_predictor(req.model, req.mode, profiles, str(path), mode_of="the request's ")
    if req.observed:
        try:
            pred = pred.observe(req.observed)
        except ValueError as e:
            raise ColopredError(f"{path}: observed: {e}") from None
    return pred


def _output(a):
    """The ``-o`` file, checked before any work (:func:`colopred.io.check_output`): never the request itself."""
    from ..io import check_output

    return check_output(a.output, a.request) if a.output is not None else None


def _write(a, out, doc: dict, table: str) -> None:
    from ..io import write_text_atomic
    from ..runtime.manifest import strict_json
    from .common import log_of

    text = json.dumps(strict_json(doc), indent=1, allow_nan=False) + "\n"
    if out is not None:
        write_text_atomic(out, text)
        log_of(a)(f"wrote {out}")
    print(text if a.json else table, end="" if a.json else "\n")


def _progress(line: str) -> None:
    """A long placement's stages, on stderr (``colopred: pack: ...``)."""
    import sys

    print(f"colopred: pack: {line}", file=sys.stderr, flush=True)


def cmd_pack(a) -> int:
    if a.server:
        from .serve_commands import remote_placement

        return remote_placement(a, "pack")
    from ..runtime.documents import placement_document
    from ..runtime.request import read_request
    from .common import print_warnings

    out = _output(a)
    with warnings.catch_warnings(record=True) as caught:  # the request's observations, the model's, running jobs
        warnings.simplefilter("always")
        req = read_request(a.request, "pack")
        if not req.jobs:
            raise ColopredError(f"{a.request}: a pack request needs jobs")
        if not req.gpus:
            raise ColopredError(f"{a.request}: a pack request needs gpus or n_gpus")
        pred = _predictor(req, a.request)
        try:
            pl = pred.pack(req.jobs, gpus=req.gpus, max_per_gpu=req.max_per_gpu, max_slowdown=req.max_slowdown,
                           solver=req.solver, min_throughput=req.min_throughput, weights=req.weights or None,
                           time_budget_s=req.time_budget_s, progress=_progress)
        except (TypeError, ValueError) as e:
            raise ColopredError(f"{a.request}: {e}") from None
    notes = print_warnings(caught)
    lines = [f"mode {req.mode}: {pl.placed} of {len(req.jobs)} jobs placed on {len(pl.gpus)} GPUs, predicted normalised "
             f"throughput {pl.throughput:.2f} ({pl.solver}{', optimal' if pl.optimal else ''})"]
    lines += [f"  {n:<12} {t:5.2f}  {' + '.join(g) if g else '(empty)'}" for n, g, t in zip(pl.gpu_names, pl.gpus, pl.gpu_throughput)]
    lines += [f"  queued: {j}: {r}" for j, r in pl.queued.items()]
    _write(a, out, placement_document(req.mode, pl, notes), "\n".join(lines))
    return 0


def cmd_rank(a) -> int:
    if a.server:
        from .serve_commands import remote_placement

        return remote_placement(a, "rank")
    from ..runtime.documents import partners_document
    from ..runtime.request import read_request
    from .common import print_warnings

    out = _output(a)
    with warnings.catch_warnings(record=True) as caught:  # the request's observations, the model's
        warnings.simplefilter("always")
        req = read_request(a.request, "rank")
        if req.job is None or not req.candidates:
            raise ColopredError(f"{a.request}: a rank request needs a job and candidates")
        pred = _predictor(req, a.request)
        try:
            res = pred.rank_partners(req.job, req.candidates, k=req.k)
        except (TypeError, ValueError) as e:
            raise ColopredError(f"{a.request}: {e}") from None
    notes = print_warnings(caught)
    rows = res.to_dict("records")
    lines = [f"mode {req.mode}: partners of {req.job.name}, best first (predicted normalised throughput of the pair)"]
    lines += [f"  {r['partner']:<34} throughput {r['throughput']:.2f}  slowdowns {r['job_slowdown']:.2f} / {r['partner_slowdown']:.2f}"
              f"{'' if r['fits_memory'] else '  (does not fit in memory)'}" for r in rows]
    _write(a, out, partners_document(req.mode, req.job.name, res, notes), "\n".join(lines))
    return 0


def add_commands(sub) -> None:
    from .common import command

    for name, helptext, func in (("pack", "place jobs on GPUs from a placement request (JSON)", cmd_pack),
                                 ("rank", "rank a job's partners from a placement request (JSON)", cmd_rank)):
        p = command(sub, name, helptext, func, helptext + "; the format is colopred/schemas/placement_request.schema.json "
                    "(docs/formats.md).")
        p.add_argument("request", help="placement request JSON (jobs, GPUs, limits); - reads it from standard input")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.add_argument("-o", "--output", help="also write the result as JSON to this file")
        from .serve_commands import add_server_option

        add_server_option(p)
