"""Every constant of colopred that was chosen by measurement or by cross-validation, in one place.

Each has a name, what it is, and how it was chosen. The model's equation and the reasoning behind
each term are in ``docs/model.md``; the history of the choices (what else was tried and what it
gave) is in ``docs/history.md``. Constants chosen by leave-architecture-out cross-validation on the
H100 dataset make that split's reported error slightly optimistic (``docs/model.md``, "Honest figures").
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- definitions
MODES = ("timeslice", "mps")
"""Sharing modes: plain processes time-sliced by the driver, and CUDA MPS (concurrent kernels)."""

# ------------------------------------------------------------------------------- profiling
MPS_WAIT_BLOCK_EXPONENT = 0.3
"""γ of ``JobProfile.mps_wait_us``: how far a multi-wave kernel's residual shrinks toward its block time
tᵢ/⌈wavesᵢ⌉. Leave-architecture-out CV on the H100 MPS data; 0.3 to 0.5 fit alike, 0 and 1 clearly worse."""

MPS_WAIT_MIN_WAVES = 0.5
"""Kernels of fewer waves than this do not make another process's kernels wait under MPS. Measured by
``scripts/mps_wait_probe.py`` (grids of at most a wave barely block) and confirmed by CV (0.5 to 0.9 alike)."""

MAX_BUSY_FRACTION_FROM_NCU = 1.5
"""``profile ncu`` refuses a report whose kernel time per iteration exceeds the iteration time by more than
this factor: above it the iteration time or the iteration count given is wrong. Multi-stream jobs reach
1.07 (cuDNN's LSTM), so 1.5 leaves room without accepting a mistaken unit."""

# ----------------------------------------------------------------------------------- model
SHARE_EPS_US = 10.0
"""ε of the MPS share of contention, 2(u_k + ε)/(u_j + u_k + 2ε), in µs: two jobs whose kernels barely hold
the SMs split contention evenly. Of 1 and 10 µs, 10 gave the lower leave-architecture-out error."""

WAIT_BUSY_GATE_EXPONENT = 0.5
"""The MPS wait load is gated by busy_j to this power: a host-bound job absorbs part of its waits in its own
idle time. Chosen by leave-architecture-out CV among 1/3, 1/2, 0.7, 1 and 2 (1/3 to 0.7 fit alike)."""

TREE_PARAMS = {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.8,
               "colsample_bytree": 0.8, "min_child_weight": 2, "n_jobs": 1, "random_state": 0}
"""XGBoost settings of the residual trees. Chosen by cross-validation over tree sizes, learning rates,
subsampling and regularisation (their neighbours were within the seeds' spread); one thread and a fixed
seed make training reproducible byte for byte."""

INTERVAL_QUANTILES = (0.05, 0.95)
"""Quantiles of the interval model (``reg:quantileerror``): the stated 90% interval."""

INTERVAL_COVERAGE = 0.90
"""Coverage the split-conformal calibration widens the interval to, at least."""

CONFORMAL_FOLDS = 3
"""Inner folds (grouped by architecture) that give the out-of-fold residuals of the conformal calibration."""

# ------------------------------------------------------------------------------ prediction
CONTEXT_OVERHEAD_GIB = 0.6
"""GPU memory a training process needs beyond its PyTorch peak (``torch.cuda.max_memory_reserved``): CUDA
context and allocator slack. An estimate set when the harness was written, not fitted: a PyTorch process's
CUDA context takes about half a GiB on Hopper."""

# ------------------------------------------------------------------------------ validation
MAX_STREAM_OVERLAP = 64.0
"""Upper bound of ``JobProfile.stream_overlap``: the number of kernels that can run at once from one process is
bounded by the hardware's concurrent-kernel limit (128 on Hopper), and real jobs reach 1.44; 64 rejects garbage."""

MAX_BUSY_FRACTION = 4.0
"""Upper bound of ``JobProfile.busy_fraction``: kernel time per iteration over iteration time exceeds 1 only for
jobs running kernels on several streams at once (the shipped maximum is 1.07, cuDNN's LSTM)."""

# ----------------------------------------------------------------------------- measurement
SEGMENT_GAP_S = 300.0
"""A pause of more than this between two windows of a campaign starts a new segment (another machine lease):
a fresh machine took longer to start, while restarts inside one device call took under 3 minutes."""

# ------------------------------------------------------------------------ plausibility bounds
NCU_PCT_TOLERANCE = 0.5
"""How far above 100 a per-kernel percentage of an ncu report (and a duration-weighted one of a profile) may
lie: ncu prints two decimals of a ratio of sampled counters, and the shipped H100 reports reach 100.0 exactly
(sm__maximum_warps_per_active_cycle_pct); half a percent keeps rounding in and a wrong column or unit out."""

MAX_NCU_L2_HIT_RATE_PCT = 150.0
"""Upper bound of ncu's per-kernel ``lts__t_sector_hit_rate.pct``: unlike the other percentages it exceeds 100
on real reports (54 kernels of the shipped full-metric resnet18 report on the H100, up to 112.27 %), since ncu
counts hits of sectors that were not requested on their own (prefetches, atomics); 150 keeps those and refuses
a separator or unit mistake (1,234 -> 1234)."""
