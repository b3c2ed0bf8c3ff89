"""User tools as Grove ships them: a function from the caller's process is pickled by value
when its module is not installed (so a node without that file runs it), addressed by digest.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ray import cloudpickle

from grove.actors.tools.grant import MCP_PREFIX, ShippedTool
from grove.actors.tools.python import ToolDefinitionError, python_tool
from grove.supervisor.errors import CommandError
from grove.supervisor.tool_files import import_spec
from grove.supervisor.tool_files import installed as installed_module
from grove.supervisor.tool_rules import BUILTIN_TOOL_NAMES, policy_for, unknown_tool_text

if TYPE_CHECKING:
    from grove.supervisor.config import GroveSettings
    from grove.supervisor.mcp_listings import McpListings

ToolsGiven = Sequence[str | Callable[..., Any]] | str | Callable[..., Any] | None

# A shipped tool is code and the globals it needs, not data: past this, something big was
# captured by accident (a dataset in a module global, say).
MAX_SOURCE_BYTES = 8_000_000


def installed(module: ModuleType) -> bool:
    """Whether every node has `module` as the caller does (see tool_files.installed)."""
    return installed_module(module.__name__.partition(".")[0], getattr(module, "__file__", None))


def pack(function: Callable[..., Any], name: str) -> tuple[str, bytes]:
    """`(digest, payload)` for `function`; its local module travels by value."""
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    by_value: ModuleType | None = None
    if module is not None and module.__name__ != "__main__" and not installed(module):
        by_value = sys.modules.get(module.__name__.partition(".")[0], module)
        cloudpickle.register_pickle_by_value(by_value)  # type: ignore[no-untyped-call]
    try:
        payload: bytes = cloudpickle.dumps(function)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise CommandError(f"tool {name} cannot be shipped to Grove's hosts: {exc}") from exc
    finally:
        if by_value is not None:
            cloudpickle.unregister_pickle_by_value(by_value)  # type: ignore[no-untyped-call]
    if len(payload) > MAX_SOURCE_BYTES:
        raise CommandError(
            f"tool {name} pickles to {len(payload):,} bytes, over the {MAX_SOURCE_BYTES:,} "
            "limit: does it capture a large global?"
        )
    return hashlib.sha256(payload).hexdigest(), payload


def encode_source(payload: bytes) -> str:
    return base64.b64encode(payload).decode("ascii")


def decode_source(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedTools:
    """What `create_root(tools=[...])` asked for: names (built-in and user), the user tools'
    schemas and their code by digest."""

    names: tuple[str, ...] = ()
    shipped: tuple[ShippedTool, ...] = ()
    sources: dict[str, bytes] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """The record's metadata entries for these tools (see supervisor/tool_rules.py)."""
        entries: dict[str, Any] = {"tools": list(self.names)}
        if self.shipped:
            entries["shipped_tools"] = [tool.to_data() for tool in self.shipped]
            entries["tool_sources"] = {
                digest: encode_source(payload) for digest, payload in self.sources.items()
            }
        return entries


def resolve_tools(items: Iterable[str | Callable[..., Any]]) -> ResolvedTools:
    """Built-in names, MCP names, functions and `package.module:attr` specs, checked here, in
    the caller's process: an unknown name or a function that cannot be a tool fails now."""
    names: list[str] = []
    shipped: list[ShippedTool] = []
    sources: dict[str, bytes] = {}
    for item in items:
        functions: list[Callable[..., Any]]
        if callable(item):
            functions = [item]
        elif isinstance(item, str) and ":" in item:
            functions = import_spec(item)
        elif isinstance(item, str) and (item in BUILTIN_TOOL_NAMES or item.startswith(MCP_PREFIX)):
            names.append(item)
            continue
        else:
            raise CommandError(unknown_tool_text(str(item)))
        for function in functions:
            try:
                made = python_tool(function)
            except ToolDefinitionError as exc:
                raise CommandError(str(exc)) from exc
            digest, payload = pack(function, made.name)
            sources[digest] = payload
            options = made.options
            shipped.append(
                ShippedTool(
                    spec=made.spec,
                    digest=digest,
                    sequential=options.sequential,
                    idempotent=options.idempotent,
                )
            )
            names.append(made.name)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise CommandError(f"two tools are named {', '.join(duplicates)}; rename one")
    return ResolvedTools(names=tuple(names), shipped=tuple(shipped), sources=sources)


def root_tool_entries(
    tools: ToolsGiven, allow: Sequence[str], settings: GroveSettings, mcp: McpListings
) -> dict[str, Any]:
    """A new root's tool entries of its record's metadata: the tools given (one on its own
    too), its MCP tools' schemas, and each tool's policy (`allow` first, then
    `[tools.policy]`, then the default)."""
    if tools is None:
        tools = ()
    elif isinstance(tools, str) or callable(tools):
        tools = [tools]  # one tool given on its own
    resolved = resolve_tools(tools)
    if not resolved.names:
        return {}
    entries = resolved.metadata()
    listed = mcp.tools(resolved.names, settings)
    if listed:
        entries["mcp_tools"] = listed
    configured = {**settings.tools.policy, **dict.fromkeys(allow, "allow")}
    entries["tool_policy"] = {name: policy_for(name, configured) for name in resolved.names}
    return entries
