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
from typing import Any

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


@dataclass(frozen=True)
class GpuVerdict:
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
    """Each known node's GPUs judged for the pod (module doc); a node without a report maps to []."""
    _, job = state.profile(pod.profile, f"Pod.metadata.annotations[{PROFILE}]")
    out: dict[str, list[GpuVerdict]] = {}
    todo: list[tuple[str, str, ServedModel, list[JobProfile], list[tuple[str, int]], float | None]] = []
    for node in nodes:
        report = state.nodes.get(node)
        if report is None:
            out[node] = []
            continue
        _, doc = report
        node_mode = doc.get("mode")
        mode = pod.mode or node_mode
        out[node] = []
        for g in doc.get("gpus", ()):
            gname = str(g.get("name"))
            if mode is None:
                out[node].append(GpuVerdict(node, gname, False, 0.0, "no sharing mode (annotate the pod with colopred.io/mode "
                                                                      "or report the node's mode)"))
                continue
            if node_mode is not None and pod.mode is not None and node_mode != pod.mode:
                out[node].append(GpuVerdict(node, gname, False, 0.0, f"its GPUs share by {node_mode}, the pod asks for {pod.mode}"))
                continue
            running = list(g.get("running") or ())
            if len(running) + 1 > pod.max_per_gpu:
                out[node].append(GpuVerdict(node, gname, False, 0.0, f"max_per_gpu {pod.max_per_gpu} reached"))
                continue
            members: list[JobProfile] = []
            keys: list[tuple[str, int]] = []
            missing = None
            for n in running:
                hit = state.profiles.get(n)
                if hit is None:
                    missing = n
                    break
                keys.append((n, hit[0]))
                members.append(hit[1])
            if missing is not None:
                out[node].append(GpuVerdict(node, gname, False, 0.0, f"runs {missing!r}, whose profile is not registered"))
                continue
            keys.append((pod.profile, state.profiles[pod.profile][0]))
            members.append(job)
            try:
                m = state.model_for(mode, members)
            except ServiceError as e:
                out[node].append(GpuVerdict(node, gname, False, 0.0, e.message))
                continue
            todo.append((node, gname, m, members, keys, g.get("memory_gib")))
    values = _set_values(state, [(m, ms, ks) for _, _, m, ms, ks, _ in todo])
    for (node, gname, m, members, keys, mem), (with_pod, without_pod) in zip(todo, values):
        s_max, thr = with_pod
        need = outcome.memory_need_gib([p.peak_memory_gib for p in members])
        memory = float(mem) if mem is not None else max(p.gpu.memory_gib for p in members)
        if need > memory:
            out[node].append(GpuVerdict(node, gname, False, 0.0, f"needs {need:.1f} GiB, has {memory:.1f}"))
        elif not math.isfinite(s_max):
            out[node].append(GpuVerdict(node, gname, False, 0.0, "the model cannot predict this set"))
        elif pod.max_slowdown is not None and s_max > pod.max_slowdown:
            out[node].append(GpuVerdict(node, gname, False, 0.0, f"predicted slowdown {s_max:.2f} > max_slowdown {pod.max_slowdown:g}"))
        else:
            out[node].append(GpuVerdict(node, gname, True, thr - without_pod[1], "fits"))
    return out


def _set_values(state: ServiceState, sets: list[tuple[ServedModel, list[JobProfile], list[tuple[str, int]]]]
                ) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """(max predicted slowdown, normalised throughput) of each set with the pod (its last member) and without it,
    from the cache where it holds them, the rest predicted in one batch per model."""
    out: list[list[tuple[float, float] | None]] = []
    missing: dict[str, dict[tuple, tuple[list[JobProfile], ServedModel]]] = {}
    keys_of: list[tuple[tuple, tuple]] = []
    for m, members, keys in sets:
        pair = []
        for part in (keys, keys[:-1]):
            key = (m.id, tuple(sorted((n, v, m.observed(n)) for n, v in part)))
            pair.append(key)
        keys_of.append((pair[0], pair[1]))
        row: list[tuple[float, float] | None] = []
        for key, ms in ((pair[0], members), (pair[1], members[:-1])):
            if len(ms) <= 1:
                row.append((1.0, float(len(ms))))  # a job alone: slowdown 1, throughput 1 (0 for an empty GPU)
                continue
            v = state.set_values.get(key)
            row.append(v)
            if v is None:
                missing.setdefault(m.name, {})[key] = (ms, m)
        out.append(row)
    for name, todo in missing.items():
        m = state.models[name]
        keys = list(todo)
        code_of: dict[tuple[int, str], int] = {}
        profiles: list[JobProfile] = []
        rows: list[list[int]] = []
        for key in keys:
            ms = todo[key][0]
            idx = []
            for p, inst in zip(ms, instance_names([p.name for p in ms])):  # copies of one job: JOB#1, JOB#2
                code = code_of.get((id(p), inst))
                if code is None:
                    code = code_of[(id(p), inst)] = len(profiles)
                    profiles.append(p if inst == p.name else p.with_(name=inst))
                idx.append(code)
            rows.append(idx)
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        flat = np.fromiter((i for r in rows for i in r), dtype=np.int64, count=int(sizes.sum()))
        idx = padded(flat, sizes, width=int(sizes.max()))
        s = m.predictor.slowdown_index(profiles, idx)
        smax = np.nanmax(np.where(idx >= 0, s, -np.inf), axis=1)
        smax = np.where(np.isnan(np.where(idx >= 0, s, 0.0)).any(axis=1), np.nan, smax)
        thr = outcome.normalised_throughput(s)
        for key, a, b in zip(keys, smax, thr):
            state.set_values.put(key, (float(a), float(b)))
    result = []
    for (k_with, k_without), row in zip(keys_of, out):
        with_pod = row[0] if row[0] is not None else state.set_values.get(k_with)
        without = row[1] if row[1] is not None else state.set_values.get(k_without)
        result.append((with_pod, without))
    return result


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
