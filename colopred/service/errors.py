"""How the service refuses a request: one JSON error naming the field, never a traceback.

Every 4xx answer is ``{"error": MESSAGE, "field": FIELD, "status": CODE}``: MESSAGE is one line that starts with
the field it blames (``jobs[1]: no profile named 'x' is registered``), FIELD the same path alone (``body`` for the
body as a whole, null where no one field is to blame). Bodies are strict JSON (no NaN or Infinity), read by
:class:`StrictJSONRoute`; :class:`BodyLimit` refuses a body over the limit before it is read whole.
"""

from __future__ import annotations

import json
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ..errors import ColopredError
from .state import ServiceError


def error_response(status: int, field: str | None, message: str, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps({"error": message, "field": field, "status": status}, ensure_ascii=False)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def field_path(loc: tuple | list) -> str:
    """A pydantic location as the field path our messages use: ``("body", "jobs", 0)`` -> ``jobs[0]``."""
    parts = [p for p in loc if p not in ("body", "path", "query", "header")]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p in ("str", "dict", "int", "float", "constrained-str") or "[" in str(p) or str(p).startswith("function-"):
            continue  # pydantic's names of union members, not fields
        else:
            out += ("." if out else "") + str(p)
    return out or "body"


def _validation_message(err: dict[str, Any], request: Request) -> tuple[str, str]:
    loc = err.get("loc", ())
    kind = err.get("type", "")
    if kind == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "not JSON")
        at = "" if "strict JSON" in detail or "nested" in detail else f", at character {loc[1] if len(loc) > 1 else 0}"
        return "body", f"body: invalid JSON ({detail}{at})"
    where = field_path(loc)
    if where == "body" and kind in ("model_attributes_type", "dict_type", "missing"):
        ctype = request.headers.get("content-type", "")
        if "json" not in ctype:
            return "body", (f"body: expected a JSON object sent with Content-Type: application/json "
                            f"(got {ctype or 'no Content-Type'}; curl: --json)")
        if kind == "missing":
            return "body", "body: a JSON object is required"
    msg = err.get("msg", "invalid")
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        head = _leading_field(msg)
        if where == "body" and head and msg.startswith(head + ":"):
            return head, msg
    if kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "missing":
        msg = "required field missing"
    return where, f"{where}: {msg}"


async def validation_handler(request: Request, exc: RequestValidationError) -> Response:
    errors = exc.errors()
    first = min(errors, key=lambda e: 0 if e.get("type") == "json_invalid" else 1) if errors else {}
    field, message = _validation_message(first, request)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return error_response(422 if first.get("type") != "json_invalid" else 400, field, message + more)


async def service_error_handler(request: Request, exc: ServiceError) -> Response:
    return error_response(exc.status, exc.field, exc.message, exc.headers)


async def colopred_error_handler(request: Request, exc: ColopredError) -> Response:
    """The runtime's own refusals (a request document's field, a profile's schema): 422 with its one line."""
    text = str(exc)
    return error_response(422, _leading_field(text), text)


async def http_error_handler(request: Request, exc: StarletteHTTPException) -> Response:
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
    field = "path" if exc.status_code == 404 else None
    if exc.status_code == 400:  # FastAPI's own refusal of a body it could not read
        field, detail = "body", f"body: could not be read ({detail[:1].lower() + detail[1:]})"
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"path: no endpoint {request.url.path} (GET /openapi.json lists them)"
    elif exc.status_code == 405:
        detail = f"method: {request.method} is not allowed on {request.url.path}"
    return error_response(exc.status_code, field, detail, getattr(exc, "headers", None))


def _leading_field(message: str) -> str | None:
    """The field a runtime message starts with (``limits.max_per_gpu must be ...`` -> ``limits.max_per_gpu``)."""
    head = message.split(" ", 1)[0].rstrip(":,")
    return head if head and all(c.isalnum() or c in "_.[]" for c in head) else None


def _refuse_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON (strict JSON has no NaN or Infinity)", name, 0)


def strict_loads(body: bytes | str) -> Any:
    """JSON as RFC 8259 has it: NaN, Infinity and -Infinity refused."""
    return json.loads(body, parse_constant=_refuse_constant)


class StrictJSONRequest(Request):
    _loads = staticmethod(strict_loads)

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as e:
                raise json.JSONDecodeError(f"not UTF-8 ({e.reason})", "", e.start) from None
            try:
                self._json = self._loads(text)
            except RecursionError:
                raise json.JSONDecodeError("nested too deeply", "", 0) from None
        return self._json


class StrictJSONRoute(APIRoute):
    """FastAPI's route, reading JSON bodies strictly (FastAPI's documented way to customise the request:
    a Request subclass handed to the route's handler)."""

    request_class = StrictJSONRequest

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        request_class = self.request_class

        async def strict_handler(request: Request) -> Response:
            return await handler(request_class(request.scope, request.receive))

        return strict_handler


def _measured_loads(text: str) -> Any:
    return json.loads(text)  # NaN, Infinity and -Infinity read as floats


class MeasuredJSONRequest(StrictJSONRequest):
    """A body whose numbers may be NaN or Infinity: a node agent's failed measurement, kept in quarantine."""

    _loads = staticmethod(_measured_loads)


class MeasuredJSONRoute(StrictJSONRoute):
    """The route of ``POST /v1/observations``: the one body that may carry NaN or Infinity (quarantined, not refused)."""

    request_class = MeasuredJSONRequest


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is refused with 413, by its Content-Length before the app sees
    it, else as soon as the bytes received pass the limit. The rest of the body is read and dropped first (up to
    ``DRAIN_FACTOR`` times the limit), so that a client still sending it reads the 413 rather than a reset."""

    DRAIN_FACTOR = 8

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._drain(receive, 0)
            return await self._refuse(scope, receive, send, length.decode("latin-1"))
        if length is None and scope.get("method") in ("POST", "PUT", "PATCH"):
            # a chunked body: read it here, up to the limit, and hand it on whole (or refuse it once read)
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                if size > self.limit:
                    if message.get("more_body", False):
                        await self._drain(receive, size)
                    return await self._refuse(scope, receive, send, f"more than {self.limit}")
                if not message.get("more_body", False):
                    break
            whole = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

            async def replay() -> dict:
                return whole.pop() if whole else await receive()

            return await self.app(scope, replay, send)
        seen = 0
        done = False
        started = False

        async def counted() -> dict:
            nonlocal seen, done
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                done = not message.get("more_body", False)
                if seen > self.limit:
                    raise BodyTooLarge()
            return message

        async def tracked_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked_send)
        except BodyTooLarge:
            if not started:
                if not done:
                    await self._drain(receive, seen)
                await self._refuse(scope, receive, send, f"more than {self.limit}")

    async def _drain(self, receive: Callable, seen: int) -> None:
        while seen <= self.DRAIN_FACTOR * self.limit:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, scope: dict, receive: Callable, send: Callable, size: str) -> None:
        r = error_response(413, "body", f"body: {size} bytes, over the limit of {self.limit} bytes (--max-body-mib)")
        await r(scope, receive, send)


# ---------------------------------------------------------------------------------------------- warnings
_local = threading.local()


def _show(message, category, filename, lineno, file=None, line=None) -> None:
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink.append(str(message))
    else:
        _original_show(message, category, filename, lineno, file, line)


_original_show = warnings.showwarning


def install_warning_capture() -> None:
    """Route every warning to the collector of the thread that raised it (:func:`collected_warnings`): requests
    answered at once on several threads never see each other's warnings, as ``warnings.catch_warnings`` (one
    global state) would let them."""
    warnings.simplefilter("always")
    warnings.showwarning = _show


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """The warnings raised on this thread inside the block, each distinct message once (the list fills as the block
    runs; read it after)."""
    outer = getattr(_local, "sink", None)
    sink: list[str] = []
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = outer
        unique = list(dict.fromkeys(sink))
        sink[:] = unique
