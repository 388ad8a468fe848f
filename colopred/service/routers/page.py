"""``/status``: one HTML page of what the server knows, rendered here (inline SVG, no script, no build step, nothing
fetched from elsewhere): each mode's drift and stale flag, the nodes' GPUs and the jobs on them with their predicted
slowdowns, the observed slowdowns against the predictions served before they were measured (a scatter), the error
over time, the jobs of highest rolling error, and one job's observations (``/status?job=NAME``)."""

from __future__ import annotations

import html
import math
import re
from typing import Any, Sequence

from fastapi import APIRouter, Depends, Query
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, Response

from ... import __version__
from ...constants import DRIFT_MIN_JOB_ROWS, DRIFT_STALE_FACTOR, MAX_NAME_LENGTH
from ..deps import get_state
from ..errors import StrictJSONRoute
from ..openapi import ERRORS
from ..state import ROLLING_ERRORS, ROLLING_JOB_ERRORS, ServiceState

router = APIRouter(tags=["status"], route_class=StrictJSONRoute)

SCATTER_OBSERVATIONS = 500
"""Latest observations the scatter and the error over time show."""
NODES_SHOWN = 50
"""Nodes listed (by name); the page says how many more were reported."""
ERROR_WINDOW = 25
"""Job rows each point of the error-over-time line averages."""
COLOURS = {"timeslice": "#1f77b4", "mps": "#d62728"}

STYLE = """body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:12px 24px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:20px;margin:0}header span{color:#b8c0cc}main{padding:16px 24px;display:grid;
grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:16px}section{background:#fff;border-radius:6px;
padding:12px 16px;box-shadow:0 1px 2px rgba(0,0,0,.08)}h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse;
width:100%}td,th{padding:3px 8px;border-bottom:1px solid #e6e8ec;text-align:left;font-variant-numeric:tabular-nums}
th{color:#5a6472;font-weight:600}.ok{color:#17803d;font-weight:600}.stale{color:#c62828;font-weight:700}
.muted{color:#6b7480}td:first-child{white-space:nowrap}.gpu{display:inline-block;border:1px solid #d5d9df;border-radius:4px;padding:2px 6px;margin:2px;
background:#fafbfc}.wide{grid-column:1/-1}form{margin:0}input{font:inherit;padding:2px 6px}a{color:#1f5fbf}
svg text{font:11px system-ui,sans-serif;fill:#4a5260}"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _f(x: float | None, digits: int = 2, unit: str = "") -> str:
    return "–" if x is None or x != x else f"{x:.{digits}f}{unit}"


class _Axes:
    """A plot area of ``w`` x ``h`` pixels mapping data ranges onto it, with ticks."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float, w: int = 520, h: int = 300, pad: int = 44):
        self.x0, self.x1 = x0, (x1 if x1 > x0 else x0 + 1)
        self.y0, self.y1 = y0, (y1 if y1 > y0 else y0 + 1)
        self.w, self.h, self.pad = w, h, pad

    def x(self, v: float) -> float:
        return self.pad + (v - self.x0) / (self.x1 - self.x0) * (self.w - self.pad - 10)

    def y(self, v: float) -> float:
        return self.h - self.pad + 10 - (v - self.y0) / (self.y1 - self.y0) * (self.h - self.pad - 10) - 10

    def frame(self, xlabel: str, ylabel: str) -> list[str]:
        out = [f'<rect x="{self.pad}" y="10" width="{self.w - self.pad - 10}" height="{self.h - self.pad - 10}" '
               'fill="#fff" stroke="#c8cdd4"/>']
        for t in _ticks(self.x0, self.x1):
            out.append(f'<line x1="{self.x(t):.1f}" x2="{self.x(t):.1f}" y1="10" y2="{self.h - self.pad}" stroke="#eef0f3"/>'
                       f'<text x="{self.x(t):.1f}" y="{self.h - self.pad + 14}" text-anchor="middle">{_tick(t)}</text>')
        for t in _ticks(self.y0, self.y1):
            out.append(f'<line x1="{self.pad}" x2="{self.w - 10}" y1="{self.y(t):.1f}" y2="{self.y(t):.1f}" stroke="#eef0f3"/>'
                       f'<text x="{self.pad - 4}" y="{self.y(t) + 4:.1f}" text-anchor="end">{_tick(t)}</text>')
        out.append(f'<text x="{(self.pad + self.w) / 2:.0f}" y="{self.h - 8}" text-anchor="middle">{_e(xlabel)}</text>'
                   f'<text transform="translate(12 {(self.h - self.pad) / 2:.0f}) rotate(-90)" text-anchor="middle">{_e(ylabel)}</text>')
        return out

    def svg(self, body: Sequence[str], label: str) -> str:
        return (f'<svg role="img" aria-label="{_e(label)}" viewBox="0 0 {self.w} {self.h}" width="100%" '
                f'style="max-width:{self.w}px">' + "".join(body) + "</svg>")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / n)) if span > 0 else 1
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _tick(t: float) -> str:
    return f"{t:.0f}" if abs(t - round(t)) < 1e-9 else f"{t:g}"


def _legend(modes: Sequence[str], x: float = 56, y: float = 24) -> list[str]:
    out = []
    for k, mode in enumerate(modes):
        out.append(f'<circle cx="{x + 90 * k}" cy="{y}" r="4" fill="{COLOURS.get(mode, "#555")}"/>'
                   f'<text x="{x + 8 + 90 * k}" y="{y + 4}">{_e(mode)}</text>')
    return out


def scatter_svg(points: Sequence[tuple[str, float, float]]) -> str:
    """Observed (y) against predicted-as-served (x) slowdown, one dot per job row, the diagonal for reference."""
    if not points:
        return '<p class="muted">No observation yet: POST /v1/observations.</p>'
    lo = min(1.0, min(min(p, o) for _, p, o in points))
    hi = max(max(p, o) for _, p, o in points) * 1.05
    ax = _Axes(lo, hi, lo, hi)
    body = ax.frame("predicted slowdown (as served)", "observed slowdown")
    body.append(f'<line x1="{ax.x(lo):.1f}" y1="{ax.y(lo):.1f}" x2="{ax.x(hi):.1f}" y2="{ax.y(hi):.1f}" '
                'stroke="#888" stroke-dasharray="4 3"/>')
    for mode, p, o in points:
        body.append(f'<circle cx="{ax.x(p):.1f}" cy="{ax.y(o):.1f}" r="3" fill="{COLOURS.get(mode, "#555")}" fill-opacity=".6"/>')
    body += _legend(sorted({m for m, _, _ in points}))
    return ax.svg(body, "observed against predicted slowdowns")


def error_svg(series: dict[str, list[tuple[int, float]]], thresholds: dict[str, float | None]) -> str:
    """Each mode's mean absolute % error over windows of ``ERROR_WINDOW`` job rows, by observation id, with the
    stale threshold dashed."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        return '<p class="muted">No observation yet.</p>'
    limits = [t for m, t in thresholds.items() if t is not None and m in series]
    ax = _Axes(min(x for x, _ in pts), max(x for x, _ in pts), 0.0, max([y for _, y in pts] + limits) * 1.1)
    body = ax.frame("observation id", "mean |predicted − observed| / observed (%)")
    for mode, s in series.items():
        colour = COLOURS.get(mode, "#555")
        if len(s) == 1:
            body.append(f'<circle cx="{ax.x(s[0][0]):.1f}" cy="{ax.y(s[0][1]):.1f}" r="3" fill="{colour}"/>')
        else:
            body.append('<polyline fill="none" stroke-width="2" stroke="' + colour + '" points="'
                        + " ".join(f"{ax.x(x):.1f},{ax.y(y):.1f}" for x, y in s) + '"/>')
        t = thresholds.get(mode)
        if t is not None:
            body.append(f'<line x1="{ax.pad}" x2="{ax.w - 10}" y1="{ax.y(t):.1f}" y2="{ax.y(t):.1f}" stroke="{colour}" '
                        f'stroke-dasharray="6 4"/><text x="{ax.w - 14}" y="{ax.y(t) - 4:.1f}" text-anchor="end">{_e(mode)} '
                        'stale above</text>')
    body += _legend(sorted(series))
    return ax.svg(body, "prediction error over time")


def _error_series(records: Sequence[Any]) -> dict[str, list[tuple[int, float]]]:
    rows: dict[str, list[tuple[int, float]]] = {}
    for r in sorted(records, key=lambda r: r.seq):
        for j in r.jobs:
            rows.setdefault(r.mode, []).append((r.seq, 100.0 * abs(j.predicted - j.slowdown) / j.slowdown))
    out = {}
    for mode, xs in rows.items():
        step = max(1, ERROR_WINDOW // 5)
        out[mode] = [(xs[min(i, len(xs) - 1)][0], sum(e for _, e in xs[max(0, i - ERROR_WINDOW + 1):i + 1]) / len(xs[max(0, i - ERROR_WINDOW + 1):i + 1]))
                     for i in list(range(0, len(xs), step)) + ([len(xs) - 1] if (len(xs) - 1) % step else [])]
    return out


def _gpu_predictions(state: ServiceState, nodes: list[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], list[float]]:
    """Each shared GPU's predicted slowdowns (its jobs' order), as the server predicts them now."""
    by_mode: dict[str, list[tuple[tuple[str, str], list[str]]]] = {}
    for name, doc in nodes:
        for g in doc.get("gpus") or []:
            running = list(g.get("running") or [])
            if len(running) >= 2 and all(j in state.profiles for j in running):
                by_mode.setdefault(doc.get("mode") or "mps", []).append(((name, str(g.get("name"))), running))
    out: dict[tuple[str, str], list[float]] = {}
    for mode, items in by_mode.items():
        try:
            profiles = [[state.profiles[j][1] for j in running] for _, running in items]
            m = state.model_for(mode, profiles[0])
            frame = m.predictor.predict_many(profiles)
        except Exception:  # noqa: BLE001 - the page shows what it can; a prediction's refusal is the API's to explain
            continue
        values = frame["slowdown"].to_numpy()
        k = 0
        for key, running in items:
            out[key] = [float(v) for v in values[k:k + len(running)]]
            k += len(running)
    return out


def render(state: ServiceState, job: str | None) -> str:
    drift = state.drift()
    records = state.store.recent_observations(limit=SCATTER_OBSERVATIONS)
    names = sorted(state.nodes, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])
    nodes = [(n, state.nodes[n][1]) for n in names[:NODES_SHOWN]]
    predicted = _gpu_predictions(state, nodes)
    jobs = state.job_drift()
    parts = [f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>colopred status</title>'
             f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head><body>',
             f'<header><h1>colopred status</h1><span>version {_e(__version__)}</span><span>store {_e(state.store.url)}</span>'
             f'<span>{len(state.profiles)} profiles</span><span>{sum(state.observation_counts.values())} observations</span>'
             f'<span>{len(state.nodes)} nodes</span></header><main>']
    # drift and models
    rows = []
    for m in state.models.values():
        d = drift.get(m.mode) or {}
        flag = ('<span class="stale">stale</span>' if d.get("stale") else
                '<span class="ok">ok</span>' if d.get("rows", 0) >= DRIFT_MIN_JOB_ROWS else '<span class="muted">too few rows</span>')
        rows.append(f"<tr><td>{_e(m.id)}</td><td>{m.version}</td><td>{_e(m.mode)}</td><td>{_e(m.source)}</td>"
                    f"<td>{_f(d.get('rolling_error_pct'), unit='%')}</td><td>{d.get('rows', 0)}</td><td>{_f(d.get('threshold_pct'), unit='%')}</td>"
                    f'<td id="drift-{_e(m.mode)}-{_e(m.source)}">{flag}</td></tr>')
    parts.append('<section class="wide" id="drift"><h2>Models and drift</h2><table><tr><th>model</th><th>version</th>'
                 '<th>mode</th><th>profiles</th><th>rolling error</th><th>job rows</th><th>stale above</th><th>state</th></tr>'
                 + "".join(rows) + f'</table><p class="muted">Rolling error: mean |predicted − observed| / observed of the '
                 f'last {ROLLING_ERRORS} observed jobs of the mode, each prediction as served before the observation. '
                 f'Stale above {DRIFT_STALE_FACTOR:g}× the model\'s cross-validated (leave-architecture) MAPE, once '
                 f'{DRIFT_MIN_JOB_ROWS} rows are in the window.</p></section>')
    points = [(r.mode, j.predicted, j.slowdown) for r in records for j in r.jobs]
    parts.append(f'<section id="scatter"><h2>Predicted against observed ({len(points)} job rows of the last '
                 f'{len(records)} observations)</h2>{scatter_svg(points)}</section>')
    parts.append(f'<section id="error"><h2>Error over time (windows of {ERROR_WINDOW} job rows)</h2>'
                 f'{error_svg(_error_series(records), {m: d["threshold_pct"] for m, d in drift.items()})}</section>')
    # nodes
    if nodes:
        items = []
        for name, doc in nodes:
            gpus = []
            for g in doc.get("gpus") or []:
                running = list(g.get("running") or [])
                s = predicted.get((name, str(g.get("name"))))
                jobs_html = ", ".join(f'<a href="/status?job={_e(j)}">{_e(j)}</a>'
                                      + (f" ×{s[k]:.2f}" if s is not None else "") for k, j in enumerate(running))
                gpus.append(f'<span class="gpu">GPU {_e(g.get("name"))}: {jobs_html or "<i>idle</i>"}</span>')
            items.append(f"<tr><td>{_e(name)}</td><td>{_e(doc.get('mode', ''))}</td><td>{''.join(gpus)}</td></tr>")
        more = len(names) - len(nodes)
        parts.append('<section class="wide" id="nodes"><h2>GPUs and their jobs</h2><table><tr><th>node</th><th>mode</th>'
                     '<th>GPUs (jobs running, ×predicted slowdown)</th></tr>' + "".join(items) + "</table>"
                     + (f'<p class="muted">and {more} more nodes (GET /v1/nodes)</p>' if more > 0 else "") + "</section>")
    else:
        parts.append('<section class="wide" id="nodes"><h2>GPUs and their jobs</h2><p class="muted">No node reported '
                     'yet (PUT /v1/nodes/NAME).</p></section>')
    # jobs of highest error
    top = "".join(f'<tr><td><a href="/status?job={_e(r["job"])}">{_e(r["job"])}</a></td><td>{_e(r["mode"])}</td>'
                  f'<td>{r["rows"]}</td><td>{_f(r["rolling_error_pct"], unit="%")}</td></tr>' for r in jobs[:15])
    parts.append(f'<section id="jobs"><h2>Jobs by rolling error (last {ROLLING_JOB_ERRORS} observations each)</h2>'
                 '<form action="/status"><input name="job" placeholder="job name" aria-label="job name"> '
                 '<button>show its observations</button></form>'
                 + (f"<table><tr><th>job</th><th>mode</th><th>rows</th><th>rolling error</th></tr>{top}</table>" if top else
                    '<p class="muted">No observed job yet.</p>')
                 + f'<p class="muted">{len(jobs)} observed (job, mode) pairs.</p></section>')
    if job is not None:
        parts.append(_job_section(state, job))
    parts.append("</main></body></html>")
    return "".join(parts)


def _job_section(state: ServiceState, job: str) -> str:
    obs = state.store.observations_of(job, limit=100)
    head = f'<section class="wide" id="job"><h2>Observations of {_e(job)}</h2>'
    if not obs:
        known = "registered" if job in state.profiles else "not registered"
        return head + f'<p class="muted">No observation of {_e(job)} ({known}).</p></section>'
    rows = []
    for r in obs:
        k = [j.job for j in r.jobs].index(job)
        j = r.jobs[k]
        err = 100.0 * abs(j.predicted - j.slowdown) / j.slowdown
        rows.append(f"<tr><td>{r.seq}</td><td>{_e(r.detail.get('time') or r.received_at)}</td><td>{_e(r.mode)}</td>"
                    f"<td>{_e(' + '.join(x.job for x in r.jobs))}</td><td>{_e(r.detail.get('gpu', ''))}</td>"
                    f"<td>{j.slowdown:.3f}</td><td>{j.predicted:.3f}</td><td>{err:.1f}%</td><td>{_e(r.model)}</td></tr>")
    return (head + f'<p>{len(obs)} latest observations, newest first.</p><table><tr><th>id</th><th>time</th><th>mode</th>'
            '<th>set</th><th>GPU</th><th>observed</th><th>predicted (as served)</th><th>error</th><th>model</th></tr>'
            + "".join(rows) + "</table></section>")


@router.get("/status", response_model=None, responses={200: {"description": "the status page (HTML)",
                                                               "content": {"text/html": {}}}, **ERRORS})
async def status_page(job: str | None = Query(None, min_length=1, max_length=MAX_NAME_LENGTH,
                                               description="a job whose observations the page lists"),
                      state: ServiceState = Depends(get_state)) -> Response:
    """The status page: drift, GPUs and jobs, predicted against observed, error over time, a job's observations."""
    def work() -> str:
        with state.lock:
            return render(state, job)

    text = await run_in_threadpool(work)
    return HTMLResponse(text, headers={"Cache-Control": "no-store"})
