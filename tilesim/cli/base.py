"""The ``tilesim`` command group and what its commands share: one-line errors, consoles, units."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console

import tilesim
from tilesim.kernels import registry

# ----------------------------------------------------------------------------------------------
# helpers


def console(*, stderr: bool = False) -> Console:
    """A rich console; at least 120 columns wide when not writing to a terminal (pipes, tests)."""
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal:
        c = Console(stderr=stderr, highlight=False, width=max(c.width, 120))
    return c


def fail(message: str) -> None:
    """Print ``error: message`` on stderr and exit with status 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def fmt_bytes(x: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {unit}"
    return f"{x:,.0f} B"


def fmt_count(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:,.2f} {unit}"
    return f"{x:,.0f}"


def check_output(path: str | Path | None, option: str, *, stdout_ok: bool = False) -> None:
    """Fail (one line) unless ``path`` can be written: checked before any work, without creating
    anything. ``-`` is standard output where ``stdout_ok``."""
    if path is None:
        return
    if str(path) == "-":
        if stdout_ok:
            return
        fail(f"{option} -: standard output is not possible for this option; give a file path")
    p = Path(path)
    if p.is_dir():
        fail(f"{option} {path}: is a folder; give a file path")
    if p.exists() and not os.access(p, os.W_OK):
        fail(f"{option} {path}: the file is not writable")
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        fail(f"{option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        fail(f"{option} {path}: cannot write in {parent}")


def save_figure(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def load_families() -> dict[str, registry.KernelFamily]:
    """The registered families; a family package that fails to import is one error line."""
    try:
        return registry.families()
    except (ImportError, ValueError) as e:
        fail(f"cannot load the kernel families: {e}")


class OneLineErrors(click.Group):
    """A group whose usage errors (unknown command or option, bad value) print one line."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rc = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            fail(" ".join(e.format_message().split()) + where)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rc if isinstance(rc, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tilesim.__version__, prog_name="tilesim")
def cli() -> None:
    """tilesim: predict time and memory traffic of tiled GPU kernels on a modelled GPU."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``tilesim``)."""
    cli.main(args=argv, prog_name="tilesim")
