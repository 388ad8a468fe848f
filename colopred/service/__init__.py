"""``colopred serve``: the HTTP service a scheduler calls (docs/service.md).

A thin layer over :mod:`colopred.runtime`, as the CLI is: ``app`` (the FastAPI app and its factory), ``routers/``
(one per resource), ``bodies`` (pydantic request bodies), ``state`` (what a server holds in memory, rebuilt from the
store), ``store/`` (SQLite or PostgreSQL behind one interface), ``extender`` (the Kubernetes scheduler extender),
``metrics`` (Prometheus), ``errors`` (JSON errors, strict JSON, body limit), ``openapi`` (the shipped schemas in
/openapi.json), ``server`` (uvicorn). Needs the ``serve`` extra (``pip install "colopred[serve]"``); the runtime
never imports it.
"""
