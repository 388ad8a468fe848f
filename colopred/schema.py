"""The JSON Schemas of colopred's documents, shipped as package data in ``colopred/schemas/``:

  job_profile.schema.json      a JobProfile (``colopred.profile``)
  model_manifest.schema.json   a model manifest (``colopred.runtime.manifest``)
  window_record.schema.json    a measurement record (a line of ``windows.jsonl``; the records reader checks each)
  prediction.schema.json       ``colopred predict --json``
  prediction_table.schema.json ``Predictor.predict_many``'s table as JSON records
  placement.schema.json        ``colopred pack --json``;  partners.schema.json: ``colopred rank --json``
  observations.schema.json     measured collocations (``colopred predict --observed``; ``colopred.runtime.observed``)

They are the one statement of what a valid document is: every loader validates through :func:`problems`,
and other tools may validate against the same files.

Why a small validator here rather than the ``jsonschema`` package: the runtime is what a scheduler imports,
and ``jsonschema`` would bring four more packages (one compiled) into every process that predicts, for the
few keywords these two schemas use (type, const, enum, minimum/maximum and their exclusive forms,
min/maxLength, pattern, required, properties, additionalProperties, items, min/maxItems). This module
implements exactly those, and says in one phrase which field is wrong and why; ``tests/test_schema.py``
checks with ``jsonschema`` itself (a test dependency) that both accept the shipped documents and refuse the
same bad ones. A keyword this module does not implement is refused when the schema is loaded.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from importlib import resources
from typing import Any

KNOWN_KEYWORDS = {"$schema", "$id", "title", "description", "$comment", "type", "const", "enum", "minimum", "maximum",
                  "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "required", "properties",
                  "additionalProperties", "items", "minItems", "maxItems"}
SCHEMAS = ("job_profile", "model_manifest", "window_record", "prediction", "prediction_table", "placement", "partners",
           "observations")


def schema_text(name: str) -> str:
    """The shipped schema ``name`` (one of :data:`SCHEMAS`) as text."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r} (one of {', '.join(SCHEMAS)})")
    return (resources.files("colopred") / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The shipped schema ``name`` as a dict (every keyword in it checked to be one :func:`problems` implements)."""
    schema = json.loads(schema_text(name))
    _check_keywords(schema, name)
    return schema


def _check_keywords(node: Any, where: str) -> None:
    if isinstance(node, dict):
        unknown = set(node) - KNOWN_KEYWORDS
        if unknown:
            raise ValueError(f"schema {where} uses keywords this validator does not implement: {', '.join(sorted(unknown))}")
        for key in ("properties",):
            for k, sub in node.get(key, {}).items():
                _check_keywords(sub, f"{where}.{k}")
        for key in ("additionalProperties", "items"):
            if isinstance(node.get(key), dict):
                _check_keywords(node[key], f"{where}.{key}")


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # JSON numbers are finite: NaN and infinities (which Python's json accepts) are not numbers here.
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def problems(doc: Any, schema: dict[str, Any] | str, where: str = "") -> list[str]:
    """Everything wrong with ``doc`` under ``schema`` (a dict, or the name of a shipped schema), as short phrases
    naming the field (``gpu.memory_gib must be at most 1024, not 5000``); empty if it is valid."""
    if isinstance(schema, str):
        schema = load_schema(schema)
    out: list[str] = []
    _validate(doc, schema, where, out)
    return out


def _validate(v: Any, s: dict[str, Any], where: str, out: list[str]) -> None:
    name = where or "the document"
    if "const" in s and not (v == s["const"] and type(v) is type(s["const"])):
        out.append(f"{name} must be {s['const']!r}, not {_show(v)}")
        return
    if "enum" in s and not any(v == e and type(v) is type(e) for e in s["enum"]):
        out.append(f"{name} must be one of {', '.join(map(repr, s['enum']))}, not {_show(v)}")
        return
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_TYPES[t](v) for t in types):
            want = " or ".join("a finite number" if t == "number" else "an integer" if t == "integer" else
                               "an object" if t == "object" else "an array" if t == "array" else f"a {t}" if t != "null" else "null"
                               for t in types)
            out.append(f"{name} must be {want}, not {_show(v)}")
            return
    if _TYPES["number"](v):
        if "minimum" in s and v < s["minimum"]:
            out.append(f"{name} must be at least {s['minimum']:g}, not {_show(v)}")
        if "maximum" in s and v > s["maximum"]:
            out.append(f"{name} must be at most {s['maximum']:g}, not {_show(v)}")
        if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"]:
            out.append(f"{name} must be more than {s['exclusiveMinimum']:g}, not {_show(v)}")
        if "exclusiveMaximum" in s and v >= s["exclusiveMaximum"]:
            out.append(f"{name} must be less than {s['exclusiveMaximum']:g}, not {_show(v)}")
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            out.append(f"{name} must not be empty" if s["minLength"] == 1 else f"{name} must hold at least {s['minLength']} characters")
        if "maxLength" in s and len(v) > s["maxLength"]:
            out.append(f"{name} must hold at most {s['maxLength']} characters, not {len(v)}")
        if "pattern" in s and not re.search(s["pattern"], v):
            out.append(f"{name} {_show(v)} is not allowed here (must match {s['pattern']})")
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            out.append(f"{name} must hold at least {s['minItems']} items, not {len(v)}")
        if "maxItems" in s and len(v) > s["maxItems"]:
            out.append(f"{name} must hold at most {s['maxItems']} items, not {len(v)}")
        if isinstance(s.get("items"), dict):
            for i, x in enumerate(v):
                _validate(x, s["items"], f"{where}[{i}]", out)
    if isinstance(v, dict):
        for k in s.get("required", ()):
            if k not in v:
                out.append(f"missing field {_join(where, k)!r}")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                _validate(x, props[k], _join(where, k), out)
            elif extra is False:
                out.append(f"{_join(where, str(k))} is not a known field")
            elif isinstance(extra, dict):
                _validate(x, extra, _join(where, str(k)), out)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def depth(obj: Any, limit: int) -> int:
    """Nesting depth of lists and dicts in ``obj``, counted up to ``limit + 1`` (without recursion)."""
    deepest, stack = 0, [(obj, 0)]
    while stack:
        o, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        if isinstance(o, dict):
            stack.extend((x, d + 1) for x in o.values())
        elif isinstance(o, list):
            stack.extend((x, d + 1) for x in o)
    return deepest


def loads(text: str) -> Any:
    """JSON as Python's json reads it (NaN and Infinity become floats, which :func:`problems` then refuses by the
    field's name); a document that is not JSON, or nested beyond Python's recursion, raises ``ValueError`` with a
    short reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise ValueError("not valid JSON for colopred (nested too deeply)") from None
