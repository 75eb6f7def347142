"""`devfix server`: the language server, over stdin and stdout (the `server` extra)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from devfix import engine
from devfix.cli._common import build_settings, rule_options
from devfix.config import ConfigError, find_config
from devfix.settings import Settings

INSTALL_HINT = "devfix server needs pygls: pip install 'devfix[server]'"


@click.command("server")
@rule_options
@click.option("--extend-select", multiple=True, metavar="RULES", help="Add these rules.")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    default=None,
    help="Offer the fixes marked unsafe too (otherwise as configured).",
)
@click.option("--config", type=click.Path(dir_okay=False), help="Configuration file.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
def server_command(
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    unsafe_fixes: bool | None,
    config: str | None,
    no_cache: bool,
) -> None:
    """Run the language server (LSP over stdio) for an editor: diagnostics and quick fixes.

    Each document is checked with the settings `devfix check` uses on its file: these flags
    over the configuration found from the file upwards (or `--config`).
    """
    try:
        from devfix.server import serve
    except ImportError:
        raise click.ClickException(INSTALL_HINT) from None
    engine.tune_collector()  # as for a run over many files: each change parses the file again
    serve(SettingsCache(select, ignore, extend_select, unsafe_fixes, config, no_cache))


class SettingsCache:
    """A document's settings, as `devfix check PATH` resolves them with the server's flags;
    read again when the configuration file that applies changes."""

    def __init__(
        self,
        select: tuple[str, ...],
        ignore: tuple[str, ...],
        extend_select: tuple[str, ...],
        unsafe_fixes: bool | None,
        config: str | None,
        no_cache: bool,
    ) -> None:
        self.flags = (select, ignore, extend_select, unsafe_fixes, config, no_cache)
        self._known: dict[tuple[str, str, int, int], Settings] = {}

    def __call__(self, path: str | None) -> Settings:
        from devfix.server import SettingsError

        select, ignore, extend_select, unsafe_fixes, config, no_cache = self.flags
        start = path if path is not None and os.path.exists(path) else None
        try:
            found = Path(config) if config is not None else find_config(Path(start or "."))
        except (OSError, ConfigError) as error:
            raise SettingsError(str(error)) from None
        key = (str(found), os.getcwd(), *_stamp(found))
        known = self._known.get(key)
        if known is not None:
            return known
        try:
            settings = build_settings(
                paths=(start,) if start is not None else (),
                select=select,
                extend_select=extend_select,
                ignore=ignore,
                unsafe_fixes=unsafe_fixes,
                exclude=(),
                extend_exclude=(),
                jobs=1,
                config=config,
                no_cache=no_cache,
            )
        except click.ClickException as error:
            raise SettingsError(error.format_message()) from None
        self._known[key] = settings
        return settings


def _stamp(path: Path | None) -> tuple[int, int]:
    """The configuration file's modification time and size (0, 0 when there is none)."""
    if path is None:
        return (0, 0)
    try:
        info = path.stat()
    except OSError:
        return (0, 0)
    return (info.st_mtime_ns, info.st_size)
