"""The architecture of each job: the groups leave-architecture-out holds out, one at a time (``evaluation``), and the
folds of the job offsets and intervals (``training``).

By default a job's architecture is the part of its name before ``-b`` (``dataset.arch_of``: the zoo names jobs
ARCH-bBATCH-PRECISION, so resnet50-b32-bf16 and resnet50-b128-bf16 are one architecture). Jobs named otherwise
choose theirs: a profile's ``meta.arch``, or a mapping {job: architecture} given to ``colopred train`` and
``colopred evaluate`` with ``--groups FILE`` (a JSON object), which wins over both. A copy of a job (``JOB#2``) is
the job's architecture.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from ..errors import InputError
from ..io import read_text_input
from ..profile import JobProfile, job_of
from .dataset import Dataset, arch_of


def read_groups(path: str | Path) -> dict[str, str]:
    """A ``--groups`` file: a JSON object mapping job names to architecture names (non-empty strings)."""
    path = Path(path)
    try:
        doc = json.loads(read_text_input(path, "groups (JSON)"))
    except ValueError as e:
        raise InputError(path, f"not JSON ({str(e)[:80]})") from None
    if not isinstance(doc, dict) or not doc:
        raise InputError(path, 'expected a JSON object mapping job names to architectures, e.g. {"my-job": "resnet"}')
    bad = next((k for k, v in doc.items() if not isinstance(v, str) or not v.strip()), None)
    if bad is not None:
        raise InputError(path, f"job {bad[:60]!r}: its architecture must be a non-empty string, not {str(doc[bad])[:30]!r}")
    return {str(k): v.strip() for k, v in doc.items()}


def arch_groups(profiles: Mapping[str, JobProfile], groups: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """({job: architecture}, how many jobs each rule named: ``--groups``, ``meta.arch``, ``name``) for the jobs of
    ``profiles``: ``groups`` first, then the profile's ``meta.arch``, then the name before ``-b``."""
    out: dict[str, str] = {}
    how = {"--groups": 0, "meta.arch": 0, "name": 0}
    for job, p in profiles.items():
        meta_arch = p.meta.get("arch") if isinstance(p.meta, dict) else None
        if groups and job in groups:
            out[job], rule = groups[job], "--groups"
        elif isinstance(meta_arch, str) and meta_arch.strip():
            out[job], rule = meta_arch.strip(), "meta.arch"
        else:
            out[job], rule = arch_of(job), "name"
        how[rule] += 1
    return out, how


def regrouped(ds: Dataset, groups: Mapping[str, str] | None = None, log=lambda s: None) -> Dataset:
    """``ds`` with each row's ``arch`` and ``set_archs`` from :func:`arch_groups` (unchanged where every job is named by
    the default rule). Logs how the jobs were grouped; a ``groups`` entry for no job of the dataset is refused."""
    if groups:
        unknown = sorted(set(groups) - set(ds.profiles))
        if unknown:
            raise InputError(None, f"--groups names job {unknown[0][:60]!r}, which the dataset's profiles do not hold")
    arch, how = arch_groups(ds.profiles, groups)
    rules = ", ".join(f"{n} by {rule}" for rule, n in how.items() if n)
    n_arch = len(set(arch.values()))
    log(f"architectures (the groups leave-architecture-out holds out): {n_arch} over {len(arch)} jobs ({rules}"
        + ("; by name: the part before '-b'; choose with a profile's meta.arch or --groups FILE" if how["name"] else "") + ")")
    copies = ds.rows["job"].map(job_of) != ds.rows["job"]  # rows of copies (JOB#2): their job's architecture
    if how["name"] == len(arch) and not copies.any():
        return ds
    of = lambda job: arch[job_of(job)]  # noqa: E731
    rows = ds.rows.assign(arch=ds.rows["job"].map(of),
                          set_archs=ds.rows["set"].map(lambda s: tuple(sorted({of(j) for j in s.split("+")}))))
    return replace(ds, rows=rows)
