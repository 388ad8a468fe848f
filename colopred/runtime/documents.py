"""The JSON answers of the scheduler-facing calls, built in one place for the CLI (``--json``) and the service.

  prediction_document   ``colopred predict --json``      schemas/prediction.schema.json
  table_document        ``Predictor.predict_many``'s rows schemas/prediction_table.schema.json
  placement_document    ``colopred pack --json``         schemas/placement.schema.json
  partners_document     ``colopred rank --json``         schemas/partners.schema.json

Each carries the ``warnings`` the call gave (:class:`caught_warnings` collects them, each message once). Every
document is strict JSON once passed through :func:`dumps` (NaN and infinities become null).
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any, Sequence

from .manifest import strict_json

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class caught_warnings:
    """Records the warnings raised inside it; ``.messages``: each distinct message once, in order."""

    def __enter__(self) -> "caught_warnings":
        self._cm = warnings.catch_warnings(record=True)
        self._caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)

    @property
    def messages(self) -> list[str]:
        return list(dict.fromkeys(str(w.message) for w in self._caught))


def prediction_document(prediction: Any, profile_source: str, notes: Sequence[str], explanation: Any = None) -> dict[str, Any]:
    """``colopred predict --json``: the prediction, the profiles the model reads, and the warnings; with an
    ``explanation`` (``Prediction.explain``, ``--explain``), each job's ``explanation``."""
    doc = {**prediction.to_dict(), "profile_source": profile_source, "warnings": list(notes)}
    if explanation is not None:
        for job, why in zip(doc["jobs"], explanation.to_dict()):
            job["explanation"] = {k: v for k, v in why.items() if k not in ("name", "slowdown")}
    return doc


def table_document(table: pd.DataFrame) -> list[dict[str, Any]]:
    """``Predictor.predict_many``'s table as JSON records, one per job of each set (NaN as null)."""
    return strict_json(table.to_dict("records"))


def placement_document(mode: str, placement: Any, notes: Sequence[str]) -> dict[str, Any]:
    """``colopred pack --json``: where each job goes, the queue with reasons, and the warnings."""
    return {"mode": mode, **placement.to_dict(), "warnings": list(notes)}


def partners_document(mode: str, job: str, table: pd.DataFrame, notes: Sequence[str]) -> dict[str, Any]:
    """``colopred rank --json``: the job's partners, best first, and the warnings."""
    return {"mode": mode, "job": job, "partners": table.to_dict("records"), "warnings": list(notes)}


def dumps(doc: Any, indent: int | None = None) -> str:
    """``doc`` as strict JSON text (NaN and infinities as null)."""
    return json.dumps(strict_json(doc), indent=indent, allow_nan=False, separators=(",", ":") if indent is None else None)
