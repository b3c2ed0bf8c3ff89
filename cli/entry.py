"""The `grove` console script: the Typer app of cli/app.py, every command defined there once."""

from __future__ import annotations

from grove.cli.app import main

if __name__ == "__main__":
    main()
