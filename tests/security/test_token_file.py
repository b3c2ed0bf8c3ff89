"""The service's token file left readable by others (the third audit: a 0644 `service-token`
was used without a word): the first command that reads it makes it 0600 and says so in one
line on stderr, as it does for credentials.json; later commands say nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grove.server.files import TOKEN_FILE
from tests.integration.groves import running_grove
from tests.integration.services import service_in_process

TIMEOUT_S = 120


def test_a_token_others_can_read_is_made_0600_by_the_first_command_with_one_line(
    tmp_path: Path,
) -> None:
    with running_grove(tmp_path, hosts=1) as grove, service_in_process(grove, tmp_path) as service:
        token = service.config / TOKEN_FILE
        token.chmod(0o644)

        def status() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "grove.cli.entry", "status"], capture_output=True, text=True,
                env=service.env, timeout=TIMEOUT_S, check=False,
            )  # fmt: skip

        first, second = status(), status()
    assert first.returncode == 0 and service.token in first.stdout, first.stderr
    assert first.stderr == (
        f"Warning: {token} could be read by other users (mode 644); it is now 0600\n"
    )
    assert token.stat().st_mode & 0o777 == 0o600
    assert (second.returncode, second.stderr) == (0, "")
