"""What Grove tells a person whose agent's host died under a turn: one line in its own words,
with the cause Ray's report gives (out of memory, killed), never Ray's report itself.
"""

from __future__ import annotations

import re

NOTICE = "notice"  # the kind of the delta a streamed turn yields for it
# Ray's report of a dead actor names how its worker process ended ("Worker exit type: ...").
_EXIT_TYPE = re.compile(r"Worker exit type: ([A-Z_]+)")
_CAUSES = {
    "NODE_OUT_OF_MEMORY": "Ray stopped it: the machine ran low on memory",
    "SYSTEM_ERROR": "its process was killed or crashed, or the system ran out of memory",
    "USER_ERROR": "its process failed",
    "INTENDED_USER_EXIT": "its process was stopped",
    "INTENDED_SYSTEM_EXIT": "Ray stopped its process",
}
_LOW_MEMORY = "low on memory"  # how Ray's memory monitor words the tasks it kills


def host_died_text(report: str) -> str:
    """The line for a host's death under a turn, from Ray's report of it (the dead actor's
    error text, which is never shown itself)."""
    found = _EXIT_TYPE.search(report)
    exit_type = "NODE_OUT_OF_MEMORY" if _LOW_MEMORY in report else found and found.group(1)
    cause = _CAUSES.get(exit_type or "")
    died = f"the agent's host died ({cause})" if cause else "the agent's host died"
    return f"{died}; the turn resumes on another host"


def host_died_notice(report: str) -> tuple[str, str]:
    """The notice delta a streamed turn yields when its host died (`host_died_text`)."""
    return NOTICE, host_died_text(report)
