"""Tools an agent can call. Each module builds `Tool`s; none of them holds the tree or store.

Tools that reach other agents go through a `ToolPort` (the supervisor), never around it.
"""

from grove.actors.tools.fanout import FANOUT_TOOL_NAMES, ToolPort, fanout_tools
from grove.actors.tools.readonly import READONLY_TOOL_NAMES, readonly_tools
from grove.actors.tools.workspace import Workspace, WorkspaceError

__all__ = [
    "FANOUT_TOOL_NAMES",
    "READONLY_TOOL_NAMES",
    "ToolPort",
    "Workspace",
    "WorkspaceError",
    "fanout_tools",
    "readonly_tools",
]
