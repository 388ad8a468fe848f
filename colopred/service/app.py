"""The FastAPI app: routers per resource, the store injected, the errors and limits of :mod:`.errors`.

``create_app(config)`` builds it (opening the store, loading the models, rebuilding the state from the store);
``app_from_environment()`` is the factory each uvicorn worker process calls (``colopred serve``).
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from .. import __version__
from ..errors import ColopredError
from .config import ServiceConfig
from .errors import (BodyLimit, colopred_error_handler, error_response, http_error_handler,
                     install_warning_capture, service_error_handler, validation_handler)
from .metrics import MetricsMiddleware
from .openapi import ERROR_SCHEMA, components
from .routers import k8s, models, nodes, observations, page, predict, profiles, status
from .state import ServiceError, ServiceState, load_models
from .store import Store, open_store
from .versions import models_dir_of

log = logging.getLogger("colopred.service")

DESCRIPTION = """Predictions of how much deep-learning training jobs slow each other down on one GPU, for schedulers:
the same request and answer documents as the `colopred` command line, a registry of job profiles, a store of
measured collocations that moves later predictions, and a Kubernetes scheduler extender (docs/service.md)."""


def read_token(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ColopredError(f"{path}: cannot read the token file ({getattr(e, 'strerror', None) or e})") from None
    if not token or any(c.isspace() for c in token):
        raise ColopredError(f"{path}: the token file must hold one token (no spaces), not {'nothing' if not token else 'several words'}")
    return token


def create_app(config: ServiceConfig | None = None, store: Store | None = None) -> FastAPI:
    """The service over ``store`` (default: ``config.store`` opened), with ``config``'s models, limits and token."""
    config = config or ServiceConfig()
    token = read_token(config.token_file)
    install_warning_capture()
    store = store or open_store(config.store)
    state = ServiceState(store, load_models(config.models), config.limits, config.max_per_gpu, config.max_slowdown,
                         models_dir_of(config.store, config.models_dir))

    app = FastAPI(title="colopred", version=__version__, description=DESCRIPTION, docs_url="/docs", redoc_url=None)
    app.state.service = state
    app.state.token = token
    app.state.config = config
    for r in (predict.router, profiles.router, observations.router, observations.quarantine_router, nodes.router, k8s.router,
              status.router, models.router, page.router):
        app.include_router(r)
    app.add_exception_handler(RequestValidationError, validation_handler)
    app.add_exception_handler(ServiceError, service_error_handler)
    app.add_exception_handler(ColopredError, colopred_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(Exception, _unexpected)
    app.add_middleware(BodyLimit, limit=config.limits.max_body_bytes)
    app.add_middleware(MetricsMiddleware)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            doc.setdefault("components", {}).setdefault("schemas", {}).update({**components(), "Error": ERROR_SCHEMA})
            if token is not None:
                doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
                for path in doc["paths"].values():
                    for method, op in path.items():
                        if method in ("put", "delete") or (method == "post" and any(
                                w in op.get("operationId", "") for w in ("observations", "rollback", "promote"))):
                            op["security"] = [{"bearer": []}]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # what start-up built (modules, models, profiles, the rebuilt state) lives as long as the server: out of the
    # collector's sight, a full collection walks only what requests made since (no 100 ms pause mid-request)
    gc.collect()
    gc.freeze()
    return app


async def _unexpected(request: Any, exc: Exception) -> Response:
    """A failure no check foresaw: logged with its traceback for the operator, one line (500) for the client."""
    log.exception("unexpected error answering %s %s", request.method, request.url.path)
    return error_response(500, None, f"internal error ({exc.__class__.__name__}); the server's log has the details")


def app_from_environment() -> FastAPI:
    """The factory uvicorn's worker processes call: the app of ``colopred serve``'s settings."""
    return create_app(ServiceConfig.from_env())
