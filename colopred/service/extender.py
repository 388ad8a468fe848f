"""A Kubernetes scheduler extender: kube-scheduler's ``filter`` and ``prioritize`` verbs, answered from predictions.

The wire format is ``k8s.io/kube-scheduler/extender/v1`` (kubernetes/kube-scheduler, ``extender/v1/types.go``).
Its structs carry no json tags, so Go's encoding/json writes each field under its Go name, and reads a key in any
letter case (``types_test.go``, ``TestCompatibility``, pins both):

  ExtenderArgs          {"Pod": core/v1 Pod, "Nodes": core/v1 NodeList | null, "NodeNames": [string] | null}
  ExtenderFilterResult  {"Nodes": NodeList | null, "NodeNames": [string] | null, "FailedNodes": {node: reason},
                         "FailedAndUnresolvableNodes": {node: reason}, "Error": string}
  HostPriorityList      [{"Host": string, "Score": int64}], scores between MinExtenderPriority 0 and
                        MaxExtenderPriority 10

A request is read as Go reads it (keys in any case); an answer uses the Go names. ``NodeNames`` is sent when the
extender is ``nodeCacheCapable``, else full ``Nodes``; the answer gives back the same kind.

A pod takes part through annotations: ``colopred.io/profile`` (a registered profile's name; without it the pod
is not colopred's: every node passes and scores 0), ``colopred.io/mode`` (``timeslice`` or ``mps``; default: the
node's reported mode), ``colopred.io/max-slowdown`` and ``colopred.io/max-per-gpu`` (default: the server's). What
runs on each node's GPUs is what was reported (``PUT /v1/nodes/{name}``). On each candidate node and each of its
GPUs, the pod joins the jobs running there; the GPU can take it if the set keeps ``max_per_gpu``, fits in the
GPU's memory and no job's predicted slowdown exceeds ``max_slowdown``. ``filter`` keeps the nodes with such a GPU
(the others fail, with each GPU's reason); ``prioritize`` scores a node by its best GPU's predicted gain in
normalised throughput, T(running + pod) − T(running) (1 for an empty GPU), as round(10 · gain) clipped to [0, 10].
A node colopred has no report of passes (nothing is known against it) and scores 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..constants import MAX_SET_SIZE, MODES
from ..profile import JobProfile, instance_names
from ..runtime import outcome
from ..runtime.features import padded
from .state import ServedModel, ServiceError, ServiceState

ANNOTATION = "colopred.io/"
PROFILE, MODE, MAX_SLOWDOWN, MAX_PER_GPU = (ANNOTATION + k for k in ("profile", "mode", "max-slowdown", "max-per-gpu"))
MAX_PRIORITY = 10
"""MaxExtenderPriority of extender/v1."""


def go_field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` as Go's encoding/json finds it: the exact key, else a key equal to it in any letter case."""
    if not isinstance(obj, dict):
        return default
    if name in obj:
        return obj[name]
    low = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return default


@dataclass(frozen=True)
class PodRequest:
    """What colopred needs of the pod being scheduled."""

    name: str
    profile: str | None
    mode: str | None
    max_slowdown: float | None
    max_per_gpu: int


class GpuVerdict(NamedTuple):
    node: str
    gpu: str
    allowed: bool
    gain: float
    reason: str


def read_pod(pod: Any, default_max_per_gpu: int, default_max_slowdown: float | None) -> PodRequest:
    if not isinstance(pod, dict):
        raise ServiceError(422, "Pod", "Pod: the pod being scheduled (a core/v1 Pod object) is required")
    meta = go_field(pod, "metadata") or {}
    if not isinstance(meta, dict):
        raise ServiceError(422, "Pod.metadata", "Pod.metadata: must be an object")
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"
    notes = meta.get("annotations") or {}
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise ServiceError(422, "Pod.metadata.annotations", "Pod.metadata.annotations: must map names to strings")
    profile = notes.get(PROFILE)
    mode = notes.get(MODE)
    if mode is not None and mode not in MODES:
        raise ServiceError(422, f"Pod.metadata.annotations[{MODE}]", f"Pod.metadata.annotations[{MODE}]: {mode[:40]!r} is "
                           f"not a mode (one of {', '.join(MODES)})")
    max_slowdown = default_max_slowdown
    if MAX_SLOWDOWN in notes:
        try:
            max_slowdown = float(notes[MAX_SLOWDOWN])
        except ValueError:
            max_slowdown = math.nan
        if not (math.isfinite(max_slowdown) and max_slowdown >= 1):
            raise ServiceError(422, f"Pod.metadata.annotations[{MAX_SLOWDOWN}]",
                               f"Pod.metadata.annotations[{MAX_SLOWDOWN}]: {notes[MAX_SLOWDOWN][:40]!r} is not a number of at least 1")
    max_per_gpu = default_max_per_gpu
    if MAX_PER_GPU in notes:
        text = notes[MAX_PER_GPU]
        if not text.isdigit() or not 1 <= int(text) <= MAX_SET_SIZE:
            raise ServiceError(422, f"Pod.metadata.annotations[{MAX_PER_GPU}]",
                               f"Pod.metadata.annotations[{MAX_PER_GPU}]: {text[:40]!r} is not a whole number from 1 to {MAX_SET_SIZE}")
        max_per_gpu = int(text)
    return PodRequest(name, profile, mode, max_slowdown, max_per_gpu)


def candidate_nodes(args: Any, max_nodes: int) -> tuple[list[str], list[Any] | None]:
    """The candidate nodes' names, and the Node objects where the scheduler sent them (not ``nodeCacheCapable``)."""
    names = go_field(args, "NodeNames")
    nodes = go_field(args, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ServiceError(422, "NodeNames", "NodeNames: must be a list of node names")
        if len(names) > max_nodes:
            raise ServiceError(413, "NodeNames", f"NodeNames: {len(names)} nodes, over the server's limit of {max_nodes}")
        return list(names), None
    if nodes is None:
        raise ServiceError(422, "NodeNames", "NodeNames or Nodes: the candidate nodes are required")
    items = go_field(nodes, "items")
    if not isinstance(items, list):
        raise ServiceError(422, "Nodes.items", "Nodes.items: must be a list of Node objects")
    if len(items) > max_nodes:
        raise ServiceError(413, "Nodes.items", f"Nodes.items: {len(items)} nodes, over the server's limit of {max_nodes}")
    out = []
    for i, n in enumerate(items):
        name = (go_field(n, "metadata") or {}).get("name") if isinstance(go_field(n, "metadata"), dict) else None
        if not isinstance(name, str) or not name:
            raise ServiceError(422, f"Nodes.items[{i}].metadata.name", f"Nodes.items[{i}].metadata.name: required")
        out.append(name)
    return out, items


def judge(state: ServiceState, pod: PodRequest, nodes: list[str]) -> dict[str, list[GpuVerdict]]:
    """Each known node's GPUs judged for the pod (module doc); a node without a report maps to []. The sets are
    scored in one batch per model, those seen before (same model, profile versions and observation counts) taken
    from the cache: ``prioritize`` right after ``filter`` predicts nothing again."""
    where = f"Pod.metadata.annotations[{PROFILE}]"
    pod_version, job = state.profile(pod.profile, where)
    out: dict[str, list[GpuVerdict]] = {}
    rows: dict[str, list[tuple[str, str, tuple[str, ...], Any]]] = {}  # mode -> (node, gpu, running, memory_gib)
    # a node's verdicts hold while the pod, the node's report, the profiles and the observations are as they were
    epoch = (pod.profile, pod_version, pod.mode, pod.max_slowdown, pod.max_per_gpu, state.heads["profiles"],
             state.heads["observations"])
    known = state.verdicts.get(epoch)
    if known is None:
        known = {}
        state.verdicts.put(epoch, known)
    fresh: list[str] = []
    for node in nodes:
        report = state.nodes.get(node)
        if report is None:
            out[node] = []
            continue
        hit = known.get(node)
        if hit is not None and hit[0] == report[0]:
            out[node] = hit[1]
            continue
        verdicts: list[GpuVerdict] = []
        out[node] = verdicts
        fresh.append(node)
        doc = report[1]
        node_mode = doc.get("mode")
        mode = pod.mode or node_mode
        for g in doc.get("gpus", ()):
            gname = str(g.get("name"))
            running = g.get("running") or ()
            if mode is None:
                verdicts.append(GpuVerdict(node, gname, False, 0.0, "no sharing mode (annotate the pod with colopred.io/mode "
                                                                      "or report the node's mode)"))
            elif node_mode is not None and node_mode != mode:
                verdicts.append(GpuVerdict(node, gname, False, 0.0, f"its GPUs share by {node_mode}, the pod asks for {mode}"))
            elif len(running) + 1 > pod.max_per_gpu:
                verdicts.append(GpuVerdict(node, gname, False, 0.0, f"max_per_gpu {pod.max_per_gpu} reached"))
            else:
                rows.setdefault(mode, []).append((node, gname, tuple(running), g.get("memory_gib")))
    for mode, todo in rows.items():
        m = state.model_for(mode, [job])
        _judge_mode(state, m, pod, pod_version, job, todo, out)
    for node in fresh:
        known[node] = (state.nodes[node][0], out[node])
    return out


def _judge_mode(state: ServiceState, m: ServedModel, pod: PodRequest, pod_version: int, job: JobProfile,
                todo: list[tuple[str, str, tuple[str, ...], Any]], out: dict[str, list[GpuVerdict]]) -> None:
    """The GPUs of one mode: memory, then the predicted slowdowns and throughput of each set with and without the
    pod, the sets the cache lacks predicted in one batch."""
    profiles: list[JobProfile] = [job]
    code: dict[str, int] = {pod.profile: 0}
    keys: list[tuple] = [(pod.profile, pod_version, m.observed(pod.profile))]
    bad: dict[str, str] = {}
    for _, _, running, _ in todo:  # each distinct running job once: its profile, version and observation count
        for n in running:
            if n in code or n in bad:
                continue
            hit = state.profiles.get(n)
            if hit is None:
                bad[n] = f"runs {n!r}, whose profile is not registered"
            elif hit[1].source != job.source:
                bad[n] = f"runs {n!r}, a {hit[1].source} profile, and the pod's is {job.source}"
            else:
                code[n] = len(profiles)
                profiles.append(hit[1])
                keys.append((n, hit[0], m.observed(n)))
    peak = np.array([p.peak_memory_gib if p.peak_memory_gib is not None else np.nan for p in profiles])
    own_memory = np.array([p.gpu.memory_gib for p in profiles])
    width = max((len(r) for _, _, r, _ in todo), default=0) + 1
    live: list[tuple[str, str, tuple[str, ...], Any]] = []
    idx_rows: list[list[int]] = []
    for row in todo:
        running = row[2]
        if bad:
            wrong = next((bad[n] for n in running if n in bad), None)
            if wrong is not None:
                out[row[0]].append(GpuVerdict(row[0], row[1], False, 0.0, wrong))
                continue
        live.append(row)
        idx_rows.append([code[n] for n in running] + [0])
    if not live:
        return
    idx = np.full((len(live), width), -1, dtype=np.int64)
    for r, members in enumerate(idx_rows):
        idx[r, : len(members)] = members
    present = idx >= 0
    safe = np.where(present, idx, 0)
    need = outcome.memory_need_gib(np.where(present, peak[safe], np.nan), present)
    given = np.array([np.nan if mem is None else float(mem) for _, _, _, mem in live])
    memory = np.where(np.isnan(given), np.where(present, own_memory[safe], -np.inf).max(axis=1), given)
    fits = need <= memory
    # a set's key lists its running jobs as the node reported them: the same set reported in another order is only
    # predicted once more, never confused with another
    run_keys = [tuple([keys[c] for c in members[:-1]]) for members in idx_rows]
    with_pod = _values(state, m, profiles, [(keys[0], rk) for rk in run_keys], list(idx_rows), fits)
    without = _values(state, m, profiles, [(None, rk) for rk in run_keys], [members[:-1] for members in idx_rows], fits)
    for r, (node, gname, _, _) in enumerate(live):
        s_max, thr = with_pod[r]
        if not fits[r]:
            out[node].append(GpuVerdict(node, gname, False, 0.0, f"needs {need[r]:.1f} GiB, has {memory[r]:.1f}"))
        elif not math.isfinite(s_max):
            out[node].append(GpuVerdict(node, gname, False, 0.0, "the model cannot predict this set"))
        elif pod.max_slowdown is not None and s_max > pod.max_slowdown:
            out[node].append(GpuVerdict(node, gname, False, 0.0, f"predicted slowdown {s_max:.2f} > max_slowdown {pod.max_slowdown:g}"))
        else:
            out[node].append(GpuVerdict(node, gname, True, thr - without[r][1], "fits"))


def _values(state: ServiceState, m: ServedModel, profiles: list[JobProfile], keys: list[tuple], members: list[list[int]],
            wanted: np.ndarray) -> list[tuple[float, float]]:
    """(max predicted slowdown, normalised throughput) of each set (``members``: indices into ``profiles``) where
    ``wanted``, from the cache by ``keys`` or predicted in one batch (a job alone: 1 and 1; no job: 1 and 0)."""
    out: list[tuple[float, float]] = [(1.0, 0.0)] * len(members)
    missing: list[int] = []
    cache = state.set_values
    known = cache.peek
    mid = m.id
    for r, ms in enumerate(members):
        if len(ms) <= 1:
            out[r] = (1.0, float(len(ms)))
        elif wanted[r]:
            v = known((mid, keys[r]))
            if v is None:
                missing.append(r)
            else:
                out[r] = v
    cache.hits += len(members) - len(missing)
    cache.misses += len(missing)
    if missing:
        batch: list[JobProfile] = list(profiles)  # codes index profiles; copies of one job are added as JOB#1, JOB#2
        copies: dict[tuple[int, str], int] = {}
        rows = []
        for r in missing:
            ms = members[r]
            if len(set(ms)) == len(ms):
                rows.append(ms)
                continue
            row = []
            for c, inst in zip(ms, instance_names([profiles[c].name for c in ms])):
                at = copies.get((c, inst))
                if at is None:
                    at = copies[(c, inst)] = len(batch)
                    batch.append(profiles[c].with_(name=inst))
                row.append(at)
            rows.append(row)
        sizes = np.array([len(x) for x in rows], dtype=np.int64)
        idx = padded(np.fromiter((i for x in rows for i in x), dtype=np.int64, count=int(sizes.sum())), sizes)
        s = m.predictor.slowdown_index(batch, idx)
        filled = idx >= 0
        unpredictable = np.isnan(np.where(filled, s, 0.0)).any(axis=1)
        smax = np.where(unpredictable, np.nan, np.max(np.where(filled, s, -np.inf), axis=1))
        thr = outcome.normalised_throughput(s)
        for r, a, b in zip(missing, smax, thr):
            out[r] = (float(a), float(b))
            cache.put((m.id, keys[r]), out[r])
    return out


def score(gain: float) -> int:
    """A GPU's predicted throughput gain as an extender priority: round(10 · gain), within [0, 10]."""
    return int(min(MAX_PRIORITY, max(0, round(MAX_PRIORITY * gain))))


def filter_result(state: ServiceState, args: Any) -> dict[str, Any]:
    limits = state.limits
    nodes, items = candidate_nodes(args, limits.max_nodes)
    pod = read_pod(go_field(args, "Pod"), state.defaults["max_per_gpu"], state.defaults["max_slowdown"])
    if pod.profile is None:
        passed, failed = nodes, {}
    else:
        verdicts = judge(state, pod, nodes)
        passed, failed = [], {}
        for node in nodes:
            gpus = verdicts[node]
            if not gpus and node not in state.nodes:
                passed.append(node)
            elif any(v.allowed for v in gpus):
                passed.append(node)
            else:
                reasons = "; ".join(f"GPU {v.gpu}: {v.reason}" for v in gpus) or "no GPU reported"
                failed[node] = f"colopred: {pod.profile}: {reasons}"
    out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
    if items is None:
        out["NodeNames"] = passed
        out["Nodes"] = None
    else:
        keep = set(passed)
        by_name = {(go_field(n, "metadata") or {}).get("name"): n for n in items}
        out["Nodes"] = {"metadata": {}, "items": [by_name[n] for n in nodes if n in keep]}
        out["NodeNames"] = None
    return {k: out[k] for k in ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error")}


def prioritize_result(state: ServiceState, args: Any) -> list[dict[str, Any]]:
    nodes, _ = candidate_nodes(args, state.limits.max_nodes)
    pod = read_pod(go_field(args, "Pod"), state.defaults["max_per_gpu"], state.defaults["max_slowdown"])
    if pod.profile is None:
        return [{"Host": n, "Score": 0} for n in nodes]
    verdicts = judge(state, pod, nodes)
    out = []
    for node in nodes:
        gains = [v.gain for v in verdicts[node] if v.allowed]
        out.append({"Host": node, "Score": score(max(gains)) if gains else 0})
    return out
