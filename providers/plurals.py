"""A count with its noun as a person writes it: "1 agent", "2 agents", "1,024 events".

Every count Grove prints goes through `counted`, so no text says "1 agents" or "task(s)".
"""

from __future__ import annotations


def counted(count: float, noun: str, plural: str | None = None, spec: str = ",") -> str:
    """`count` formatted by `spec` (thousands grouped; "g" for a float), then `noun`, or its
    plural (`noun` + "s" unless given: "child", "children") when the count is not one."""
    return f"{count:{spec}} {noun if count == 1 else plural or noun + 's'}"
