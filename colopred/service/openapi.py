"""The shipped JSON Schemas as OpenAPI components: /openapi.json describes the CLI's documents with the very files
the CLI's readers check (``colopred/schemas/``), so the service and the command line cannot drift apart.

OpenAPI 3.1's schema objects are JSON Schema 2020-12: a shipped schema goes in as it is, less ``$schema`` and
``$id``, its ``$defs`` moved to components (``#/$defs/job`` becomes ``#/components/schemas/placement_request.job``).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

SHIPPED = ("job_profile", "prediction", "prediction_table", "placement_request", "placement", "partners")


@cache
def shipped_schema(name: str) -> dict[str, Any]:
    return json.loads((resources.files("colopred") / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))


def _rewrite(node: Any, name: str) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/"):
                out[k] = f"#/components/schemas/{name}.{v[len('#/$defs/'):]}"
            else:
                out[k] = _rewrite(v, name)
        return out
    if isinstance(node, list):
        return [_rewrite(v, name) for v in node]
    return node


def components() -> dict[str, Any]:
    """Every shipped schema (and its $defs) as OpenAPI component schemas, keyed by file stem."""
    out: dict[str, Any] = {}
    for name in SHIPPED:
        s = dict(shipped_schema(name))
        s.pop("$schema", None)
        s.pop("$id", None)
        for d, sub in (s.pop("$defs", None) or {}).items():
            out[f"{name}.{d}"] = _rewrite(sub, name)
        out[name] = _rewrite(s, name)
    return out


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(name: str, description: str, example: Any = None) -> dict[str, Any]:
    """``openapi_extra`` of an endpoint whose body is a shipped document."""
    content: dict[str, Any] = {"schema": ref(name)}
    if example is not None:
        content["example"] = example
    return {"requestBody": {"required": True, "description": description, "content": {"application/json": content}}}


def answer(name: str | dict[str, Any], description: str, status: int = 200) -> dict[int | str, Any]:
    schema = ref(name) if isinstance(name, str) else name
    return {status: {"description": description, "content": {"application/json": {"schema": schema}}}}


ERROR_SCHEMA = {"type": "object", "required": ["error", "field", "status"], "additionalProperties": False,
                "properties": {"error": {"type": "string", "description": "one line, starting with the field it blames"},
                               "field": {"type": ["string", "null"], "description": "the field (body: the body as a whole)"},
                               "status": {"type": "integer"}}}

ERRORS = {code: {"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
          for code, text in ((400, "not JSON"), (401, "a write without the server's bearer token"), (404, "an unknown name"),
                             (409, "an idempotency key already used for another observation"),
                             (413, "a body over the limit"), (422, "a field's value refused"))}
