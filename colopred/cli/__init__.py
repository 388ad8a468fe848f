"""The ``colopred`` command line (also ``python -m colopred``): a thin layer over the library.

The parser is built here; each group of subcommands lives beside it (``profile_commands``,
``measure_commands``, ``model_commands``) and imports its library code when it runs, so
``colopred --help`` needs neither torch nor XGBoost. Errors a user can cause print one line
(``colopred: error: FILE: problem``) and exit non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys

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


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from . import (campaign_commands, exchange_commands, learning_commands, measure_commands, model_commands, placement_commands,
                   profile_commands, serve_commands)

    ap = argparse.ArgumentParser(prog="colopred", formatter_class=HelpFormatter,
                                 description="Predict how much training jobs slow each other down when they share one GPU.")
    ap.add_argument("--version", action="version", version=f"colopred {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    profile_commands.add_commands(sub)
    measure_commands.add_commands(sub)
    campaign_commands.add_commands(sub)
    exchange_commands.add_commands(sub)
    model_commands.add_commands(sub)
    learning_commands.add_commands(sub)
    placement_commands.add_commands(sub)
    serve_commands.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        return a.func(a) or 0
    except ColopredError as e:
        err(str(e))
        return e.exit_code
    except BrokenPipeError:  # the reader went away (``colopred ... | head``): stop quietly, as Unix tools do
        _silence_stdout()
        return 1
    except OSError as e:  # a file that cannot be read or written, outside the checks of the commands
        err(f"{e.filename}: {e.strerror}" if e.filename else f"{e.strerror or e}")
        return 2
    except KeyboardInterrupt:
        err("interrupted; completed windows are saved (continue with --resume)" if a.command == "measure" else "interrupted")
        return 130


def _silence_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush of a closed pipe does not fail again
    (the Python documentation's recipe for SIGPIPE, ``signal`` module)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind stdout (captured in tests)
        pass
