"""The `grove` console script. With a Grove service up (`grove up`), run, batch, agents,
history, events and usage go to it over HTTP (cli/thin.py, light imports only); everything else, and
every command when no service is up or `--store`/`--address` are given, runs as cli/app.py.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["status"]:
        from cli.thin import show_status

        sys.exit(show_status())
    thin = argv and argv[0] in ("run", "batch", "agents", "history", "events", "usage")
    # Options only a Grove of this command's own has: those runs start one.
    if thin and not {"--help", "--simulate", "--hosts", "--address", "--context"} & set(argv):
        from server.files import read_state

        state = read_state()
        if state is not None:
            from cli.thin import run_thin

            sys.exit(run_thin(state, argv))
    from cli.app import main as full

    full()


if __name__ == "__main__":
    main()
