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

from ..errors import EXTRA_OF, ColopredError, MissingExtra
from .common import HelpFormatter, err


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
    except MissingExtra as e:  # one line naming the extra to install, exit 2
        err(e.line(f"colopred {a.command}"))
        return e.exit_code
    except ImportError as e:
        if (e.name or "").split(".")[0] not in EXTRA_OF:
            raise
        err(MissingExtra(e.name or "").line(f"colopred {a.command}"))
        return 2
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
