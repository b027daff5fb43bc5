"""Every command and option of the one console script says what it is for, and every command's --help works
without any other option (kraft-tck quorum describe --help once demanded --bootstrap-controller)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main


def commands(cmd: click.Command = main, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from commands(sub, (*path, name))


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=lambda p: " ".join(("kraft-tck", *p)))
def test_help_works_alone_and_every_option_is_explained(path: tuple[str, ...]) -> None:
    cmd = dict(commands())[path]
    out = CliRunner().invoke(main, [*path, "--help"])
    assert out.exit_code == 0, out.output
    assert (cmd.help or cmd.short_help), f"kraft-tck {' '.join(path)} has no help text"
    bare = [p.opts for p in cmd.params if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert not bare, f"kraft-tck {' '.join(path)}: options without help: {bare}"
