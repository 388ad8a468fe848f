"""Run a zoo job's training loop: ``python -m colopred.measurement.zoo.run JOB [--iterations N]``.

The loop uses :class:`colopred.window.ProfileWindow`, so ``colopred profile run`` and
``colopred profile nvml`` can profile any zoo job by name.
"""

from __future__ import annotations

import argparse
import itertools

from ...window import ProfileWindow
from .registry import JobSpec
from .training import build


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m colopred.measurement.zoo.run")
    ap.add_argument("job", help="zoo job name, e.g. resnet18-b64-fp32")
    ap.add_argument("--iterations", type=int, default=None, help="stop after N iterations (default: run until the profile window ends)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny model and inputs (tests)")
    a = ap.parse_args(argv)
    job = build(JobSpec.parse(a.job), a.device, tiny=a.tiny)
    win = ProfileWindow()
    steps = range(a.iterations) if a.iterations is not None else itertools.count()
    for _ in steps:
        with win.step():
            job.step()
    job.sync()


if __name__ == "__main__":
    main()
