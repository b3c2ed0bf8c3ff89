"""A usage report (supervisor/usage.py's, as JSON) as a table: one row per group, each tree's
total (by agent), then the total. Stdlib only: the service's clients print it too.
"""

from __future__ import annotations

from typing import Any

from grove.providers.plurals import counted


def report_lines(report: dict[str, Any]) -> list[str]:
    """The lines of the table `UsageReport.as_dict()` makes. Input counts whole prompts; `hit`
    is the share of them read from a cache, `saved $` what caching saved against the uncached
    price, `tier $` what the flex and batch tiers saved against the standard price. A line
    under the table says how much of the total is an estimate (requests whose host died
    before their bill was known, each reply counted at the most it may be billed)."""
    header = f"{report['by']:<38} {'requests':>8} {'input':>10} {'output':>9} {'thinking':>9} "
    header += f"{'cache rd':>9} {'cache wr':>9} {'hit':>4} {'cost $':>10} {'saved $':>9} "
    header += f"{'tier $':>9} {'time s':>8}"

    def line(name: str, totals: dict[str, Any]) -> str:
        return (
            f"{name:<38} {totals['requests']:>8,} {totals['input_tokens']:>10,} "
            f"{totals['output_tokens']:>9,} {totals['thinking_tokens']:>9,} "
            f"{totals['cache_read_tokens']:>9,} {totals['cache_write_tokens']:>9,} "
            f"{totals['cache_hit_share']:>4.0%} {totals['cost_usd']:>10.4f} "
            f"{totals['saved_usd']:>9.4f} {totals['tier_saved_usd']:>9.4f} "
            f"{totals['seconds']:>8.1f}"
        )

    lines = [header] + [line(key, row) for key, row in sorted(report["rows"].items())]
    if report["by"] == "agent" and len(report["trees"]) > 0:
        lines += [line(f"tree {root}", tree) for root, tree in report["trees"].items()]
    total = report["total"]
    lines.append(line("total", total))
    if total["estimated_requests"]:
        lines.append(
            f"estimated: {total['estimated_requests']:,} of the "
            f"{counted(total['requests'], 'request')} "
            f"(their host died before their bill was known), {total['estimated_input_tokens']:,} "
            f"of the input and {total['estimated_output_tokens']:,} of the output tokens: "
            "each such reply counted as long as it may be billed (its budget's hold, else its cap)"
        )
    return lines
