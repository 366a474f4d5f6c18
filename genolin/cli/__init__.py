"""The ``genolin`` command: a Click group whose subcommands live one per module and are imported lazily.

Each subcommand module imports only click at the top (its work is imported inside the command), so
``genolin --help`` stays fast and imports neither torch nor triton. Errors are reported here, once:
``genolin: error: <file>[:<line or record>]: <what is wrong>`` on stderr, exit status 1, and the traceback
only with ``-v``; a Ctrl-C as ``genolin: interrupted (Ctrl-C); <what it left>``, exit status 130 (``train`` says
where its checkpoint is).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import sys
import traceback

import click

from genolin import __version__

# subcommand name -> "module:attribute", in the order a user meets them
COMMANDS = {
    "index": "genolin.cli.index:index",
    "tokenize": "genolin.cli.tokenize:tokenize",
    "split": "genolin.cli.split:split",
    "train": "genolin.cli.train:train",
    "evaluate": "genolin.cli.evaluate:evaluate",
    "predict": "genolin.cli.predict:predict",
    "explain": "genolin.cli.explain:explain",
    "models": "genolin.cli.models:models",
    "bench": "genolin.cli.bench:bench",
}
OWNS_PROCESS = False  # set by ``main``: the process ends with the command (tests' CliRunner calls ``cli`` instead)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS) + [c for c in super().list_commands(ctx) if c not in COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return super().get_command(ctx, name)
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's main, with a usage error in one line (``genolin: error: ...``, exit status 2) instead of the
        usage block; everything else as Click does it."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else (prog_name or "genolin")
            click.echo(f"genolin: error: {exc.format_message()} ('{where} --help' lists the options)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort as exc:
            if isinstance(exc.__context__, KeyboardInterrupt):  # Click's form of a Ctrl-C outside a command
                click.echo(f"genolin: {interrupted()}", err=True)
                sys.exit(INTERRUPTED)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)  # Exit's status, else 0

    def invoke(self, ctx: click.Context):
        before = _outputs()
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:  # here, not as Click's "Aborted!" (exit status 1, after a blank line)
            click.echo(f"genolin: {interrupted(before)}", err=True)
            ctx.exit(INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - the one place errors become a message and an exit status
            _report(exc, verbose=ctx.params.get("verbose", 0) > 0)
            ctx.exit(1)


INTERRUPTED = 130  # the shell's status of a command stopped by Ctrl-C (128 + SIGINT)


def _outputs() -> tuple[int, int]:
    """How many outputs this process has renamed into place and streamed (``genolin.io.atomic``'s WRITTEN and
    STREAMED; none before it is imported)."""
    atomic = sys.modules.get("genolin.io.atomic")
    return (len(atomic.WRITTEN), len(atomic.STREAMED)) if atomic is not None else (0, 0)


def interrupted(before: tuple[int, int] | None = None) -> str:
    """What a Ctrl-C left, in words. Outputs are written under temporary names that an interrupt removes, so all it
    can leave is outputs finished before it and a stream (standard output) cut short: those since ``before``
    (``_outputs()`` as the command began); None: not known."""
    if before is None:
        return "interrupted (Ctrl-C)"
    atomic = sys.modules.get("genolin.io.atomic")
    written, streamed = _outputs()
    done = list(dict.fromkeys(str(p) for p in atomic.WRITTEN[before[0]:])) if written > before[0] else []
    names = ", ".join(done[:3]) + (f" and {len(done) - 3} more" if len(done) > 3 else "")
    line = "interrupted (Ctrl-C)" + (f" after writing {names}" if done else "")
    if streamed > before[1]:
        return line + "; standard output holds what was written to it before" + (
            ", no file was left partial" if done else ", no file was written")
    return line + ("; nothing partial was left" if done else "; no output was written")


def _report(exc: Exception, *, verbose: bool) -> None:
    from genolin.errors import InputError

    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, InputError):
        message = str(exc)
    elif isinstance(exc, OSError) and exc.filename:
        message = f"{exc.filename}: {exc.strerror or exc}"
    elif (oom := _out_of_memory_line(exc)) is not None:
        message = oom
    elif isinstance(exc, OSError | MemoryError):
        message = f"{type(exc).__name__}: {exc}"
    else:
        message = f"internal error ({type(exc).__name__}: {exc})" + ("" if verbose else "; -v shows the traceback")
    click.echo(f"genolin: error: {message}", err=True)


def _out_of_memory_line(exc: Exception) -> str | None:
    """``memory.out_of_memory_line`` for an allocator's out-of-memory error, else None (so without torch loaded:
    only torch's allocators raise one)."""
    if "torch" not in sys.modules:
        return None
    from genolin import memory

    return memory.out_of_memory_line(exc) if memory.is_out_of_memory(exc) else None


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    logger = logging.getLogger("genolin")
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    handler.setLevel(level)  # verbosity is the console's: files such as RUN_DIR/train.log keep INFO under -q
    logger.addHandler(handler)
    logger.setLevel(min(level, logging.INFO))
    logger.propagate = False


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prefix = "genolin: " if record.levelno < logging.WARNING else f"genolin: {record.levelname.lower()}: "
        return prefix + record.getMessage()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, "--version", prog_name="genolin")
@click.option("-v", "--verbose", count=True, show_default=False,
              help="More messages (debug level); tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors; no progress bars.")
def cli(verbose: int, quiet: bool) -> None:
    """genolin: k-mer tokenization and linear-attention promoter models for long DNA sequences.

    Reads FASTA (plain, gzip, bgzip), labelled sequence sets (CSV/TSV, FASTA with label= headers, FASTA +
    labels TSV) and BED intervals. Run 'genolin COMMAND --help' for each command.
    """
    _setup_logging(verbose, quiet)


@contextlib.contextmanager
def heavy_imports():
    """Around a command's imports of torch and the model's code, in a process the command owns (``main``): the
    garbage collector held off meanwhile (imports make hundreds of thousands of objects and next to no garbage;
    collecting as they came cost 0.3 s of torch's 1.4 s import on 2 cores), then what they made frozen out of its
    reach (``gc.freeze``: the collections that follow, and the one at exit, do not walk it again)."""
    if not OWNS_PROCESS or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def main() -> None:
    """Console-script entry point. When the command is done, the objects it made are frozen out of the garbage
    collector's reach (``gc.freeze``): the interpreter's exit would otherwise walk all of them, about 0.5 s after a
    prediction on 2 cores (files are closed and renamed by then; atexit handlers still run). Not where Triton's
    native module is loaded and built with nanobind (Triton 3.9; training loads it through torch's optimizer, GPU
    prediction through the kernels): nanobind lists every instance alive at exit, dozens of "leaked" lines, so
    there the exit frees them."""
    global OWNS_PROCESS
    OWNS_PROCESS = True
    try:
        cli(prog_name="genolin")
    except KeyboardInterrupt:  # between the command and the exit
        click.echo(f"genolin: {interrupted()}", err=True)
        sys.exit(INTERRUPTED)
    finally:
        OWNS_PROCESS = False
        if nanobind_triton():
            gc.unfreeze()  # heavy_imports' freeze too: what the imports made is what nanobind would list
        else:
            gc.freeze()


def nanobind_triton() -> bool:
    """Whether Triton's native module is loaded and its types are nanobind's (Triton 3.9; 3.6 used pybind11)."""
    ir = getattr(sys.modules.get("triton._C.libtriton"), "ir", None)
    return any(type(v).__module__ == "nanobind" for v in vars(ir).values() if isinstance(v, type)) if ir else False
