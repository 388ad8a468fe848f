"""Every constant of colopred chosen by measurement or by cross-validation, in one place.

Each has a name, what it is, and how it was chosen, with the script or report that chose it. The model's equation
and the reasoning behind each term are in ``docs/model.md``; what else was tried, and what it gave, in
``docs/history.md``.

Protocol (``docs/model.md``, "How the constants are chosen"): ``datasets/h100/locked_split.json`` locks 5 of the 17
architectures it was drawn over (those added since are development ones). Constants chosen after the lock were chosen
on the development rows only, by a rule fixed in the choosing script's docstring before its run (typically: a value
replaces the shipped one only if it gains more than the tree seeds' spread); the report's "Honest protocol" tests
them once on the locked rows. Those chosen before the lock (``MPS_WAIT_BLOCK_EXPONENT``, ``MPS_WAIT_MIN_WAVES``,
``SHARE_EPS_US``, ``WAIT_BUSY_GATE_EXPONENT``, ``TREE_PARAMS``) were chosen again on the development rows by
``research/dev_constants.py`` under the same rule.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- definitions
MODES = ("timeslice", "mps")
"""Sharing modes: plain processes time-sliced by the driver, and CUDA MPS (concurrent kernels)."""

# ------------------------------------------------------------------------------- profiling
MPS_WAIT_BLOCK_EXPONENT = 0.3
"""γ of ``JobProfile.mps_wait_us``: how far a multi-wave kernel's residual shrinks toward its block time tᵢ/⌈wavesᵢ⌉.
Least development MPS MAPE over 0–1 (``research/dev_constants.py``, waits rebuilt from the raw ncu reports)."""

GPM_MIN_INTERVALS = 20
"""Least number of GPM sampling intervals a GPM profile's timed window lasts (2 s at 0.1 s): over one or two
intervals a job's busy fraction reads far apart on repeat (``datasets/h100/gpm_remeasure/``)."""

TIMELINE_ITERS = 6
"""Iterations a solo timeline traces under torch.profiler (``profile timeline``, and the traced run of ``profile
run`` and ``profile nvml``): kernels per iteration are the trace's kernels over this count; ~15 s a job on an H100."""

TIMELINE_WARMUP_ITERS = 8
"""Iterations ``colopred profile timeline`` runs before timing and tracing (cuDNN autotuning, allocator growth)."""

MPS_WAIT_MIN_WAVES = 0.5
"""Kernels of fewer waves do not make another process's kernels wait under MPS: the threshold the microbenchmark
``research/mps_wait_probe.py`` measured, kept by ``research/dev_constants.py``."""

MAX_BUSY_FRACTION_FROM_NCU = 1.5
"""``profile ncu`` refuses a report whose kernel time per iteration exceeds the iteration time by more than this
factor (a wrong iteration time or count): multi-stream jobs reach about 1.07, and 1.5 refuses a mistaken unit."""

# ----------------------------------------------------------------------------------- model
SHARE_EPS_US = 10.0
"""ε of the MPS share of contention 2(u_k + ε)/(u_j + u_k + 2ε), in µs: jobs whose kernels barely hold the SMs split
contention evenly. Of 1 and 10 µs, the lower development MPS MAPE (``research/dev_constants.py``)."""

QUEUE_STEP_TOLERANCE = 1e-6
"""A set's Newton iteration for the time-slicing queue load (``runtime.queueing``) stops after a step below this
fraction of 1 + S: Newton converges quadratically, so the loads are then within ~1e-12 of the fixed point."""

QUEUE_MAX_STEPS = 60
"""At most this many Newton steps for a set's queue load; sets of 3 or 4 jobs need 2 to 3, 32 nearly idle jobs (where
Σ Q_j(S) − S is flat) about 15."""

WAIT_BUSY_GATE_EXPONENT = 1 / 3
"""g of the MPS wait load's gate busy_j^g: a host-bound job absorbs part of its waits in its own idle time. Least
development MPS MAPE over 1/3, 1/2, 0.7, 1 and 2 (``research/dev_constants.py``)."""

MPS_WAIT_CROSS_SCALE = 1.0
"""λ of the MPS wait's stretch Σ_k u_k·(1 + λ·G_j·Σ_{m∉{j,k}} b_m) (``baseline.wait_load``): processor sharing gives
1; kept over 0–2 on the development rows (``research/dev_constants.py --only cross``), 0 in a pair so never fitted."""

MPS_WAIT_CROSS_GATE = "idle"
"""G_j of the MPS wait's stretch, the share of a target's launches that meet the stretched kernels
(``baseline.CROSS_GATES``): ``idle`` (1 − b_j), by ``research/dev_constants.py --only cross_gate``."""

TREE_PARAMS = {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.8,
               "colsample_bytree": 0.8, "min_child_weight": 2, "n_jobs": 1, "random_state": 0}
"""XGBoost settings of the residual trees; one thread and a fixed seed make training byte-reproducible. Kept over
tree counts, depths and learning rates on the development rows (``research/dev_constants.py``)."""

TREE_TARGET_OFFSET = {"timeslice": 0.02, "mps": 0.5}
"""c of ``estimator.compose`` per mode, s = 1 − c + (s_base − 1 + c)·e^f: c = 1 the trees scale the whole slowdown, c
→ 0 only the interference. Development rows, rule in ``research/dev_offset.py`` (``reports/h100/offset/``)."""

JOB_OFFSET_WEIGHT = {"ncu": {"timeslice": 0.75, "mps": 0.0}, "nvml": {"timeslice": 0.0, "mps": 0.0}}
"""λ per profile source and mode: the trees are fitted on s·e^(−λ·b_j), b_j a training job's own offset, and λ·b_j
goes back to that job alone. Rule in ``research/dev_job_offsets.py`` (``reports/h100/job_offsets/``)."""

JOB_OFFSET_PRIOR_ROWS = 8.0
"""K₀ of b_j = Σ e / (n_j + K₀): a job with few rows has its offset shrunk toward 0. Chosen with
``JOB_OFFSET_WEIGHT`` (``research/dev_job_offsets.py``)."""

JOB_OFFSET_WIDTH_SHARE = 0.0
"""q of a trained job's interval factor ρ (``runtime.observed``): 0, the width of an unseen job, since a trained
job's error in a larger set is the extrapolation's (``research/dev_slowdown_scale.py`` on the development rows)."""

JOB_OFFSET_FOLDS = 5
"""Folds over the training rows' architectures whose out-of-fold errors give the job offsets; fixed with the design
(each fold costs one fit), not tuned."""

OBSERVED_PRIOR_WEIGHT = {"timeslice": 0.5, "mps": 2.0}
"""n₀ of ``runtime.observed`` per mode: k measured collocations move a job's predictions by k / (k + n₀) of their
mean log error. Rule in ``research/dev_observed_shrinkage.py`` (``reports/h100/observed/``)."""

OBSERVED_OFFSET_SHARE = {"timeslice": 0.73, "mps": 0.30}
"""q of ``runtime.observed`` per mode, the share of the leave-arch log-error variance that is each job's own offset:
a variance decomposition of the development rows by ``research/dev_observed_shrinkage.py``, not a choice."""

CALIBRATION_REFERENCE_JOB = "resnet50-b64-fp32"
"""The zoo job ``colopred calibrate`` measures a new job beside: the one whose measured pair most lowers the job's
other rows' development MAPE, by the rule of ``research/probe_study.py`` (``reports/h100/probe/``)."""

CALIBRATION_WINDOWS = 3
"""Windows of the calibration pair per mode, in one run: the mean of three brings a host-bound job's slowdown to
about 2.5% (``datasets/h100/relabel/README.md``)."""

OBSERVED_SLOWDOWN_MIN = 0.5
"""Least measured slowdown an observation may report: below 0.5 (twice as fast beside others) is an entry error, far
below anything measured in ``datasets/h100`` (solo-time drift reaches about 0.7)."""

OBSERVED_SLOWDOWN_UNSEEN = 25.0
"""A measured slowdown above this draws a warning: beyond the largest in ``datasets/h100`` (about 21), so beyond
anything the model or its offsets were fitted on."""

OBSERVED_PLAUSIBLE_RATIO = 3.0
"""An observation whose measured slowdown is more than this factor above or below the model's own prediction of the
set is quarantined by ``colopred serve`` (kept, never applied or trained on): over the 8,098 rows of every
``datasets/h100`` job predicted by a model that never saw its architecture (``reports/h100/leave_arch_roles``), the
largest such factor is 1.89, so 3 leaves a margin of 1.6x beyond anything an unseen job has shown. A definition from
the data, not tuned."""

DRIFT_STALE_FACTOR = 2.0
"""``colopred serve`` marks a mode's model stale when its rolling error over the last 200 observed jobs is above this
multiple of the model's own leave-architecture cross-validated MAPE (its manifest's ``metrics``). On the shipped data's
out-of-fold rows (``reports/h100/learning/fold_rows.csv.gz``) 200 rows drawn at random stay within 1.25x of the MAPE
(99.9th percentile, both modes), and 200 consecutive rows of one never-seen architecture within 1.94x (MPS) and, in
time-slicing, above 2x only for graphsage and dqn alone (0.05% of such windows): 2x is beyond what the model's own
unseen-job error does; not tuned on any test (``docs/service.md``, "Drift")."""

DRIFT_MIN_JOB_ROWS = 50
"""Observed job rows a mode's rolling error must hold before it marks the model stale: means of 50 out-of-fold rows
drawn at random lie within 0.70x to 1.39x of the MAPE (1st to 99th percentile, both modes), well inside 2x."""

SLOWDOWN_FLOOR = 1.0
"""Least slowdown a prediction gives: a job that shares its GPU does not run faster than alone. A physical bound, not
tuned; its effect on the development rows is within the tree seeds' spread."""

TREE_TARGET_OFFSET_CLASSES = "host_bound"
"""Which target jobs take ``TREE_TARGET_OFFSET`` (``none``: all; ``host_bound``: all but host-bound ones, whose
interference is super-additive and which keep c = 1). Chosen with it (``research/dev_offset.py``)."""

INTERVAL_QUANTILES = (0.05, 0.95)
"""Quantiles of the interval model (``reg:quantileerror``), fitted and shipped; they bound the interval only with
``INTERVAL_QUANTILE_FLOOR``."""

INTERVAL_COVERAGE = 0.90
"""Coverage the split-conformal calibration widens the interval to, at least (a definition)."""

CONFORMAL_FOLDS = 8
"""Inner folds (grouped by architecture) giving the conformal calibration's out-of-fold residuals. Chosen with
``INTERVAL_CLASSES`` over 3, 5 and 8 (``research/dev_intervals.py``, ``reports/h100/intervals/``)."""

HOST_BOUND_BUSY = 0.8
"""Solo busy fraction under which a job is host-bound: such jobs' repeats spread several times more than the others'
(``research.noise.spread_table``), so intervals calibrate them apart (``INTERVAL_CLASSES``). A definition, not tuned."""

INTERVAL_CLASSES = "host_bound"
"""How calibration rows are grouped, each group with its own conformal width (``estimator.INTERVAL_CLASS_KINDS``):
``host_bound`` (Mondrian conformal prediction), chosen with ``CONFORMAL_FOLDS`` (``research/dev_intervals.py``)."""

MIN_CLASS_CALIBRATION_ROWS = 20
"""A class of fewer calibration rows than this takes the pooled width: its 90% quantile would rest on its two largest
residuals. A definition."""

INTERVAL_SCALE = "beyond_load"
"""Default growth of the conformal half-width beyond the trained sets (``estimator.INTERVAL_SCALES``), for a model
not told its source: ``beyond_load``, by the co-runners' summed busy fraction; see ``INTERVAL_SCALE_OF_SOURCE``."""

INTERVAL_SCALE_OF_SOURCE = {"ncu": "beyond_load", "nvml": "beyond_load"}
"""The growth each profile source's models use; the one in use stays unless the other beats it by a bootstrap
standard error (rule in ``research/dev_size_exponent.py``, ``reports/h100/intervals/size_exponent/``)."""

INTERVAL_SIZE_EXPONENT = 0.5
"""a of the ``beyond_size`` growth ((n − 1)/(m − 1))^a for models without exponents of their own and manifests
without ``interval_size_exponents``; chosen over 0, 0.5 and 1 on development rows (``research/dev_intervals.py``)."""

INTERVAL_SIZE_EXPONENTS = {
    "ncu": {"timeslice": {"saturating": 0.5, "host_bound": 0.5}, "mps": {"saturating": 0.25, "host_bound": 1.0}},
    "nvml": {"timeslice": {"saturating": 0.25, "host_bound": 0.0}, "mps": {"saturating": 0.5, "host_bound": 0.5}},
}
"""a of the growth per profile source, mode and class of target job, on the two extrapolating splits' development
rows by the rule in ``research/dev_size_exponent.py`` (``reports/h100/intervals/size_exponent/``)."""

INTERVAL_UNSEEN_WIDTHS = {
    "ncu": {"timeslice": {"saturating": 1.95, "host_bound": 1.25}, "mps": {"saturating": 1.65, "host_bound": 1.2}},
    "nvml": {"timeslice": {"saturating": 1.55, "host_bound": 1.45}, "mps": {"saturating": 1.2, "host_bound": 1.1}},
}
"""κ, the factor of the log half-width of a job the model was not trained on in a set larger than any it trained on.
Nested CV's development folds, rule in ``research.interval_rules.unseen_width`` (``research/dev_unseen_width.py``)."""

INTERVAL_SLOWDOWN_EXPONENTS = {
    "ncu": {"timeslice": {"saturating": -0.5, "host_bound": -1.0}, "mps": {"saturating": 0.5, "host_bound": 0.0}},
    "nvml": {"timeslice": {"saturating": 0.0, "host_bound": -1.0}, "mps": {"saturating": 0.5, "host_bound": 0.0}},
}
"""c of the interval's per-row scale p̂^c (p̂ the predicted slowdown) per profile source, mode and class: rule in
``research/dev_slowdown_scale.py`` (``reports/h100/intervals/slowdown_scale/``)."""

INTERVAL_QUANTILE_FLOOR = False
"""Whether the interval also holds the quantile model's 5%/95% band: no, since the band over-covered seen
architectures (development rows, ``research/dev_intervals.py``)."""

# ------------------------------------------------------------------------------ prediction
CONTEXT_OVERHEAD_GIB = 0.6
"""GPU memory a training process needs beyond its PyTorch peak (CUDA context, allocator slack): an estimate, not
fitted (a PyTorch process's context takes about half a GiB on Hopper)."""

# ------------------------------------------------------------------------------ validation
MAX_STREAM_OVERLAP = 64.0
"""Upper bound of ``JobProfile.stream_overlap``: the hardware's concurrent-kernel limit is 128 on Hopper and real
jobs stay under 2, so 64 rejects garbage."""

MAX_BUSY_FRACTION = 2.0
"""Upper bound of ``JobProfile.busy_fraction``: above 1 only for multi-stream jobs; ``MAX_BUSY_FRACTION_FROM_NCU``
(1.5) re-timed to a solo time up to ~35% faster on another machine (``JobProfile.retimed``) reaches ~2."""

# ----------------------------------------------------------------------------- measurement
SEGMENT_GAP_S = 300.0
"""A pause of more than this between two windows of a campaign starts a new segment (another machine): restarts
inside one device call take under 3 minutes, a fresh machine longer."""

# ------------------------------------------------------------------------ plausibility bounds
NCU_PCT_TOLERANCE = 0.5
"""How far above 100 a per-kernel percentage of an ncu report may lie: ncu prints two decimals of a ratio of sampled
counters; half a percent keeps rounding in and a wrong column or unit out."""

MIN_ITERATION_MS = 0.01
"""Lower bound of a profile's solo ``iteration_ms``: 10 µs. A training step launches tens of kernels at 2–5 µs a
launch, so a smaller value is a unit mistake (s for ms)."""

MAX_ITERATION_MS = 600_000.0
"""Upper bound of a profile's solo ``iteration_ms``: 10 minutes. A window holds a dozen iterations within
``--max-window-s``, so a longer step is not a job one collocates but a unit mistake (µs for ms)."""

MAX_KERNELS_PER_MS = 1000.0
"""Upper bound of ``kernels_per_iteration / iteration_ms``: one kernel per µs. A process launches at most a few
hundred thousand kernels a second and a kernel runs for at least ~1 µs."""

MAX_GPU_MEMORY_GIB = 1024.0
"""Upper bound of a GPU's memory in a profile: 1 TiB (the largest GPU sold holds 288 GB)."""

MAX_SM_COUNT = 1024
"""Upper bound of a GPU's SM count in a profile (an H100 has 132, a B200 148)."""

MAX_NAME_LENGTH = 200
"""Longest job name (a zoo job's is under 40 characters); names are printed on one line, so they hold no control
characters either."""

MAX_META_DEPTH = 32
"""Deepest nesting of a profile's free-form ``meta`` (provenance: two levels in every shipped profile): deeper
documents would exhaust Python's recursion when copied or printed."""

MAX_BASELINE_COEF = 100.0
"""Upper bound of a manifest's baseline coefficients: the baseline is 1 + Σ cₖ·loadₖ with loads of order one per
co-runner, so 100 would predict a ~100-fold slowdown, far outside any measurement; fits are bounded to it."""

MAX_CONFORMAL_LOG_WIDTH = 2.0
"""Upper bound of a manifest's ``conformal_log_width`` (the interval widened by e^w each side): e² ≈ 7.4 would make
every interval meaningless."""

MAX_SET_SIZE = 16
"""Most jobs in one set that colopred predicts or that a manifest may claim it was trained on: MPS allows 48 clients
per GPU, but no training job shares one GPU 16-fold."""

# ------------------------------------------------------------------------------- placement
FAIR_SLOWDOWN_PER_JOB = 1.0
"""``Predictor.pack``'s default bound (``max_slowdown="fair"``): no job's predicted slowdown above this times the number k
of jobs on its GPU. 1: a slowdown of k, the fair share of time-slicing (k jobs, each 1/k of the GPU), which a job would
also get by waiting its turn; beyond it a short job beside a long one starves (18.9x beside vgg16-b512, unbounded)."""

DEFAULT_MIN_THROUGHPUT = 1.0
"""``Predictor.pack``'s default floor: a set of two or more jobs is placed only if its predicted normalised throughput
exceeds this. 1: the set pays off against running its jobs one after another (``Prediction.pays_off``)."""

PACK_PROGRESS_AFTER_S = 2.0
"""A placement still running after this many seconds reports each stage to its ``progress`` callback (``colopred pack``
prints them on stderr): a scheduler's round of a few hundred jobs takes well under it and stays silent."""
