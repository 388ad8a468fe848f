"""Which observations may teach the model: the checks that send an implausible one to quarantine.

An observation that is well formed (the right fields, types and counts) but cannot be true of the jobs named is
kept in quarantine with its kind and a reason, and never moves an offset nor enters a training set:

  unknown_job            a job name no profile is registered under
  not_finite             a measured value that is NaN or infinite (or a solo or collocated time that makes one)
  implausible_slowdown   a measured slowdown that is not positive, below ``constants.OBSERVED_SLOWDOWN_MIN``, or more
                         than ``constants.OBSERVED_PLAUSIBLE_RATIO`` times above or below the model's own prediction
  gpu_mismatch           ``gpu_type`` (or a ``gpu`` that is a GPU model's name) is not the GPU the model describes
  mode_mismatch          ``gpu`` names a reported node's GPU (``NODE:GPU``) whose node shares its GPUs by the other mode

A malformed request (not JSON, a wrong type, a missing field, a count that does not match, a job twice) is refused
with a 4xx instead: there is nothing to keep. The checks are functions of the request and the server's state; the
router stores their verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..constants import OBSERVED_PLAUSIBLE_RATIO, OBSERVED_SLOWDOWN_MIN
from ..gpu import KNOWN_GPUS
from ..profile import JobProfile

GPU_NAME_PREFIXES = ("NVIDIA ", "Tesla ", "Quadro ")
"""A ``gpu`` value starting so (or one of ``gpu.KNOWN_GPUS``) names a GPU model, not a scheduler's GPU id."""


@dataclass(frozen=True)
class Held:
    """Why an observation is quarantined: its ``kind`` (module doc), the ``field`` blamed and one line."""

    kind: str
    field: str
    reason: str


def _show(v: Any) -> str:
    if isinstance(v, float):
        return "NaN" if v != v else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else f"{v:g}")
    return repr(v)


def unknown_jobs(jobs: Sequence[str], registered: dict[str, Any]) -> Held | None:
    for i, j in enumerate(jobs):
        if j not in registered:
            shown = repr(j) if len(j) <= 60 else repr(j[:56]) + "..."
            return Held("unknown_job", f"jobs[{i}]", f"jobs[{i}]: no profile named {shown} is registered")
    return None


def measured_values(slowdowns: Sequence[float] | None, solo_ms: Sequence[float] | None,
                    colocated_ms: Sequence[float] | None) -> tuple[list[float] | None, Held | None]:
    """The measured slowdowns, or why the values posted cannot be ones."""
    given = {"slowdowns": slowdowns} if slowdowns is not None else {"solo_ms": solo_ms, "colocated_ms": colocated_ms}
    for key, values in given.items():
        for i, v in enumerate(values or ()):
            if not math.isfinite(v):
                return None, Held("not_finite", f"{key}[{i}]", f"{key}[{i}]: {_show(v)} is not a measured value (not finite)")
            if v <= 0:
                return None, Held("implausible_slowdown", f"{key}[{i}]", f"{key}[{i}]: {_show(v)} is not positive")
    if slowdowns is not None:
        measured = [float(s) for s in slowdowns]
        key = "slowdowns"
    else:
        measured = [c / s for s, c in zip(solo_ms or (), colocated_ms or ())]
        key = "colocated_ms"
    for i, s in enumerate(measured):
        if not math.isfinite(s):
            return None, Held("not_finite", f"{key}[{i}]", f"{key}[{i}]: the slowdown it gives is not finite")
        if s < OBSERVED_SLOWDOWN_MIN:
            return None, Held("implausible_slowdown", f"{key}[{i}]",
                              f"{key}[{i}]: a measured slowdown of {s:.3g} would mean the job ran {1 / s:.3g}x faster beside "
                              f"others than alone; below {OBSERVED_SLOWDOWN_MIN:g} it is taken for an error")
    return measured, None


def gpu_model_named(gpu_type: str | None, gpu: str | None) -> tuple[str | None, str]:
    """The GPU model an observation says it ran on, and the field saying it: ``gpu_type``, else a ``gpu`` that is a
    GPU model's name (a scheduler's id such as ``node7:0`` says nothing of the model)."""
    if gpu_type is not None:
        return gpu_type, "gpu_type"
    if gpu is not None and (gpu in KNOWN_GPUS or gpu.startswith(GPU_NAME_PREFIXES)):
        return gpu, "gpu"
    return None, "gpu"


def gpu_mismatch(gpu_type: str | None, gpu: str | None, model_gpu: str | None, profiles: Sequence[JobProfile]) -> Held | None:
    """A GPU of another type than the model's (or, for a model that names none, than the profiles')."""
    named, where = gpu_model_named(gpu_type, gpu)
    if named is None:
        return None
    expected = model_gpu or (profiles[0].gpu.name if profiles else None)
    if expected is None or named == expected:
        return None
    return Held("gpu_mismatch", where, f"{where}: ran on {named!r}, but the model describes {expected!r}: a measurement of "
                                       "another GPU type would teach it another GPU's slowdowns")


def node_mode_mismatch(gpu: str | None, mode: str, nodes: dict[str, tuple[int, dict[str, Any]]]) -> Held | None:
    """``gpu`` = ``NODE:GPU`` of a reported node whose GPUs share by the other mode."""
    if gpu is None or ":" not in gpu:
        return None
    node = gpu.partition(":")[0]
    report = nodes.get(node)
    if report is None:
        return None
    node_mode = report[1].get("mode")
    if node_mode is None or node_mode == mode:
        return None
    return Held("mode_mismatch", "mode", f"mode: {mode}, but node {node!r} reports that its GPUs share by {node_mode}")


def implausible(measured: Sequence[float], predicted_raw: np.ndarray, key: str,
                ratio: float = OBSERVED_PLAUSIBLE_RATIO) -> Held | None:
    """A measured slowdown more than ``ratio`` times above or below the model's own prediction of the set."""
    for i, (s, p) in enumerate(zip(measured, predicted_raw)):
        if s > ratio * p or s * ratio < p:
            return Held("implausible_slowdown", f"{key}[{i}]",
                        f"{key}[{i}]: a measured slowdown of {s:.4g} is {max(s / p, p / s):.3g}x "
                        f"{'above' if s > p else 'below'} the model's prediction {p:.4g}; more than {ratio:g}x off, beyond "
                        "anything a job the model never saw has shown, it is taken for an error")
    return None
