"""Typer's test runner rebuilds the click command of the whole app on every invoke (~0.08 s: the
signatures and type hints of every command); a file that invokes the CLI dozens of times builds it
once per module instead (fixture ``command_built_once``), then invokes it exactly as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer.testing


@pytest.fixture(scope="module")
def command_built_once() -> Iterator[None]:
    """While the module's tests run, ``CliRunner().invoke(app, ...)`` reuses one click command of
    ``clonemem.cli.app`` (other apps are built as before)."""
    from clonemem.cli import app
    from clonemem.thirdparty import written_for

    written_for("typer", "0.29.1", "tests/cli_kit.py (typer.testing._get_command)")
    build = typer.testing._get_command
    built = build(app)

    def cached(which: typer.Typer) -> object:
        return built if which is app else build(which)

    typer.testing._get_command = cached  # type: ignore[assignment]
    try:
        yield
    finally:
        typer.testing._get_command = build
