"""NVML access: GPU identity and GPM (GPU Performance Monitoring) counters.

GPM metrics are computed between two samples taken at different times: the value is
the average over that interval (idle time included). Needs a Hopper-or-newer GPU and
nvidia-ml-py. Only this module talks to NVML; the maths on the samples is pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GpuError, MissingExtra

# our name -> pynvml constant name
GPM_METRICS = {
    "graphics_util_pct": "NVML_GPM_METRIC_GRAPHICS_UTIL",
    "sm_util_pct": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy_pct": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "tensor_util_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "dram_bw_util_pct": "NVML_GPM_METRIC_DRAM_BW_UTIL",
}


@dataclass
class Nvml:
    """An initialised NVML handle on one GPU, with GPM sampling."""

    index: int = 0

    def __post_init__(self):
        try:
            import pynvml
        except ImportError:  # pragma: no cover
            raise MissingExtra("pynvml", "gpu", "NVML sampling") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except pynvml.NVMLError as e:
            raise GpuError(f"NVML: cannot open GPU {self.index}: {e}") from None
        name = pynvml.nvmlDeviceGetName(self.handle)
        self.gpu_name = name.decode() if isinstance(name, bytes) else name
        drv = pynvml.nvmlSystemGetDriverVersion()
        self.driver = drv.decode() if isinstance(drv, bytes) else drv
        self.memory_gib = pynvml.nvmlDeviceGetMemoryInfo(self.handle).total / 2**30
        try:  # names the physical GPU: device leases can share a hostname
            uuid = pynvml.nvmlDeviceGetUUID(self.handle)
            self.uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        except pynvml.NVMLError:
            self.uuid = None
        try:
            self.sm_count = int(pynvml.nvmlDeviceGetAttributes(self.handle).multiprocessorCount)
        except (pynvml.NVMLError, AttributeError):
            self.sm_count = None
        try:
            self.gpm_supported = bool(pynvml.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice)
        except pynvml.NVMLError:
            self.gpm_supported = False

    def sample(self):
        """Take one GPM sample (free it with :meth:`free`)."""
        if not self.gpm_supported:
            raise GpuError(f"{self.gpu_name} does not support GPM metrics")
        s = self.nv.nvmlGpmSampleAlloc()
        self.nv.nvmlGpmSampleGet(self.handle, s)
        return s

    def free(self, s) -> None:
        self.nv.nvmlGpmSampleFree(s)

    def metrics(self, s1, s2) -> dict[str, float]:
        """GPM metrics averaged between samples ``s1`` and ``s2`` (metrics that fail are omitted)."""
        nv = self.nv
        req = nv.c_nvmlGpmMetricsGet_t()
        req.version = nv.NVML_GPM_METRICS_GET_VERSION
        ids = [(k, getattr(nv, c)) for k, c in GPM_METRICS.items()]
        req.numMetrics = len(ids)
        req.sample1 = s1
        req.sample2 = s2
        for i, (_, mid) in enumerate(ids):
            req.metrics[i].metricId = mid
        nv.nvmlGpmMetricsGet(req)
        out = {}
        for i, (k, _) in enumerate(ids):
            m = req.metrics[i]
            if m.nvmlReturn == 0:
                out[k] = float(m.value)
        return out

    def gpu_utilization_pct(self) -> float:
        return float(self.nv.nvmlDeviceGetUtilizationRates(self.handle).gpu)

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:  # pragma: no cover
            pass


def device_count() -> int:
    """How many GPUs NVML sees; raises where there is no NVML (nvidia-ml-py or the driver's library)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def gpu_uuids(indices: list[int]) -> dict[int, str]:
    """{NVML index: UUID} of the GPUs that NVML can name (empty without NVML)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML, no driver: indices will do
        return {}
    out = {}
    try:
        for i in indices:
            try:
                u = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                out[i] = u.decode() if isinstance(u, bytes) else u
            except pynvml.NVMLError:
                pass
    finally:
        pynvml.nvmlShutdown()
    return out


def time_weighted(intervals: list[dict[str, float]]) -> dict[str, float]:
    """Average GPM intervals ``{"seconds": dt, metric: value, ...}`` weighted by their length."""
    total = sum(iv["seconds"] for iv in intervals)
    if total <= 0:
        return {}
    keys = sorted({k for iv in intervals for k in iv if k != "seconds"})
    out = {}
    for k in keys:
        have = [iv for iv in intervals if k in iv]
        w = sum(iv["seconds"] for iv in have)
        if w > 0:
            out[k] = sum(iv[k] * iv["seconds"] for iv in have) / w
    return out


