"""Errors that the CLI turns into one-line messages (no traceback, non-zero exit)."""

from __future__ import annotations

import os


def first_line(e: BaseException, limit: int = 80) -> str:
    """The first line of an exception's message (at most ``limit`` characters), or its class name where it has none:
    the detail a one-line error quotes."""
    text = str(e).strip()
    return text.splitlines()[0][:limit] if text else e.__class__.__name__


class ColopredError(Exception):
    """Base class of every error colopred reports to a user."""

    exit_code = 2


class InputError(ColopredError):
    """A file given to colopred is unusable: names the file and the problem."""

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class SchemaError(InputError):
    """A JSON document (profile, model manifest) of an unknown or invalid schema."""


class GpuError(ColopredError):
    """The GPU side failed (no GPU, MPS daemon, profiler)."""

    exit_code = 3


EXTRA_OF = {"sklearn": "research", "scipy": "research", "matplotlib": "plots", "torch": "gpu", "pynvml": "gpu",
            "fastapi": "serve", "starlette": "serve", "pydantic": "serve", "uvicorn": "serve", "prometheus_client": "serve",
            "psycopg": "postgres"}
"""The extra of ``pyproject.toml`` that brings each optional top-level module (the base install predicts and places)."""


class MissingExtra(ColopredError):
    """What was asked needs an optional module that is not installed: names the extra that brings it."""

    exit_code = 2

    def __init__(self, module: str, extra: str | None = None, what: str = "this"):
        self.module = module
        self.extra = extra or EXTRA_OF.get(module.split(".")[0], "research")
        super().__init__(self.line(what))

    def line(self, what: str) -> str:
        """``WHAT needs the EXTRA extra (MODULE is missing): pip install "colopred[EXTRA]"``."""
        return f'{what} needs the {self.extra} extra ({self.module} is missing): pip install "colopred[{self.extra}]"'
