"""A batch's defaults, for what names them without running a batch (the CLI's options, the
service's client, the Grove interface): no import of the runner, its bridge and asyncio.
"""

from __future__ import annotations

DEFAULT_CONCURRENCY = 32  # tasks in flight at once
