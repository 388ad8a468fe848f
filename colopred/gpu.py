"""GPU identities. A profile and a model each name the GPU they were measured on."""

from __future__ import annotations

from dataclasses import dataclass

# Known GPUs: marketing name as NVML/ncu report it -> (SM count, memory GiB).
# Memory is what the driver reports as total, not the datasheet figure.
KNOWN_GPUS: dict[str, tuple[int, float]] = {
    "NVIDIA H100 80GB HBM3": (132, 79.65),
    "NVIDIA H100 PCIe": (114, 79.65),
    "NVIDIA H200": (132, 140.4),
    "NVIDIA A100-SXM4-80GB": (108, 79.15),
    "NVIDIA A100-SXM4-40GB": (108, 39.39),
    "NVIDIA A100-PCIE-40GB": (108, 39.39),
}


@dataclass(frozen=True)
class GpuInfo:
    """One GPU model: ``name`` as NVML reports it, SM count and total memory."""

    name: str
    sm_count: int
    memory_gib: float

    @classmethod
    def from_name(cls, name: str, sm_count: int | None = None, memory_gib: float | None = None) -> "GpuInfo":
        """Fill SM count and memory from :data:`KNOWN_GPUS` where not given."""
        known = KNOWN_GPUS.get(name)
        if known is None:
            if sm_count is None or memory_gib is None:
                raise ValueError(
                    f"unknown GPU {name!r}: give its SM count and memory (known: {', '.join(sorted(KNOWN_GPUS))})"
                )
            known = (sm_count, memory_gib)
        return cls(
            name=name,
            sm_count=int(sm_count if sm_count is not None else known[0]),
            memory_gib=float(memory_gib if memory_gib is not None else known[1]),
        )

    @property
    def family(self) -> str:
        """A short key used to match profiles with models (``H100``, ``A100``...)."""
        for key in ("H200", "H100", "A100", "L40S", "L4", "V100", "A10"):
            if key in self.name:
                return key
        return self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "sm_count": self.sm_count, "memory_gib": self.memory_gib}
