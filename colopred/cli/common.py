"""What every group of subcommands shares: the help formatter, the subcommand parser, progress lines, errors, and
the predictor a command reads (``colopred.cli`` builds the parser from the groups; they import only this module of it)."""

from __future__ import annotations

import argparse
import sys

from ..constants import MODES
from ..errors import ColopredError


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default (where it has one) after its help text."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in text or action.nargs == 0:
            return text
        return text + " (default: %(default)s)"


def err(msg: str) -> None:
    print(f"colopred: error: {msg}", file=sys.stderr)


class Log:
    """Progress lines on stderr, at three levels: ``-q`` (errors only), normal (steps), ``-v`` (details)."""

    def __init__(self, verbosity: int = 1):
        self.verbosity = verbosity

    def __call__(self, msg: str) -> None:
        if self.verbosity >= 1:
            print(msg, file=sys.stderr, flush=True)

    def detail(self, msg: str) -> None:
        if self.verbosity >= 2:
            print(msg, file=sys.stderr, flush=True)


def print_warnings(caught: list) -> list[str]:
    """The distinct messages of caught warnings, each printed once on stderr (``colopred: warning: ...``) before the
    result, and returned for a JSON answer's ``warnings``."""
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    for note in notes:
        print(f"colopred: warning: {note}", file=sys.stderr)
    return notes


def add_verbosity(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="store_true", help="more progress detail")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress lines, errors only")


def command(sub, name: str, helptext: str, func, description: str | None = None, verbosity: bool = True
            ) -> argparse.ArgumentParser:
    """A subcommand's parser: help with defaults, ``-v``/``-q`` (unless ``verbosity`` is False), ``func`` to run."""
    p = sub.add_parser(name, help=helptext, description=description or helptext, formatter_class=HelpFormatter)
    if verbosity:
        add_verbosity(p)
    p.set_defaults(func=func)
    return p


def log_of(a: argparse.Namespace) -> Log:
    return Log(0 if getattr(a, "quiet", False) else 2 if getattr(a, "verbose", False) else 1)


def need(command: str, *modules: str) -> None:
    """Refuse ``colopred COMMAND`` in one line (exit 2) before any work where an optional module it needs is not
    installed, naming the extra that brings it (``errors.EXTRA_OF``)."""
    import importlib.util

    from ..errors import MissingExtra

    for m in modules:
        if importlib.util.find_spec(m) is None:
            raise MissingExtra(m, what=f"colopred {command}")


def load_predictor(model: str | None, mode: str, profiles: list, where: str, mode_of: str = ""):
    """The model at ``model``, or without one the shipped model for the profiles' source (GPM profiles: the GPM
    model; a mix of sources is refused); a model of another mode than ``mode`` is refused. Errors name ``where``."""
    from ..runtime.predictor import Predictor

    try:
        pred = Predictor.load(model) if model else Predictor.for_profiles(mode, profiles)
    except ValueError as e:
        raise ColopredError(f"{where}: {e}") from None
    if pred.mode != mode:
        raise ColopredError(f"{model}: model is for mode {pred.mode!r}, not {mode_of}{mode!r}")
    return pred


def parse_modes(text: str) -> tuple[str, ...]:
    """``--modes``: a comma-separated list of known modes."""
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ColopredError(f"--modes: unknown mode {unknown[0] if unknown else text!r} (known: {', '.join(MODES)})")
    return modes
