"""The kinds of stored messages that are not plain user or assistant turns. Stdlib only: the
service's clients show them too.
"""

from __future__ import annotations

CLEAR_KIND = "clear"
COMPACTION_KIND = "compaction"  # data: first_kept_message_id, tokens_before, tokens_after, reason
# A reply outside the stored conversation (of a turn that failed or was cancelled, or of a
# reviewer, whose transcript is its own): its usage was billed (data: usage, cost_usd, model,
# provider, duration_s, stop_reason).
SPENT_KIND = "spent"
# The end of a turn that failed or was cancelled after some of its steps were stored as they
# ended, or that kept nothing after its prompt: its error text; the model does not see it
# (data: none).
TURN_END_KIND = "turn_end"
