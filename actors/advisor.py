"""`Reviewer`: an advisor that reads a watched agent's transcript deltas and may advise; it
coalesces deltas, retries, gives up on a backlog after three failures and never writes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grove.actors.advisor_messages import Report, ReviewReport
from grove.actors.agent.estimates import is_bill
from grove.actors.agent.metering import reply_data
from grove.actors.agent.turn_loop import Agent
from grove.actors.transcript import COMPACTION_TEXT
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.base import (
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from grove.providers.errors import ProviderError

MAX_CONSECUTIVE_FAILURES = 3
RETRY_DELAY_S = 1.0
# The reviewer compacts its own context when its history would pass this share of the
# model's context window (estimated at four characters a token): its older exchanges become a
# summary written by its own model, down to half of that share.
CONTEXT_SHARE = 0.8
SUMMARY_MAX_TOKENS = 2_048
REVIEW_SUMMARY_PROMPT = """<review-so-far>
{transcript}
</review-so-far>

Summarise your review so far for yourself: what the watched agent set out to do, what it has
done, what you advised and why, and what to watch for next. Plain text, no preamble."""
CHARS_PER_TOKEN = 4


@dataclass(kw_only=True, slots=True)
class ReviewerHealth:
    """What `/advisor status` reports besides tokens and cost."""

    last_success: float | None = None
    consecutive_failures: int = 0
    dropped_backlogs: int = 0
    last_error: str | None = None
    prompts: int = 0  # every prompt sent, retries included
    reviews: int = 0  # prompts that succeeded
    compactions: int = 0  # times its own context was summarised
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "last_success": self.last_success,
            "consecutive_failures": self.consecutive_failures,
            "dropped_backlogs": self.dropped_backlogs,
            "compactions": self.compactions,
            "last_error": self.last_error,
            "prompts": self.prompts,
            "reviews": self.reviews,
            "usage": self.usage.as_dict(),
            "cost_usd": self.cost_usd,
        }


class Reviewer:
    """Hosted beside agents; its `Agent` holds the private transcript and the provider."""

    def __init__(
        self,
        uuid: str,
        agent: Agent,
        report: Report,
        *,
        context_window: int,
        retry_delay_s: float = RETRY_DELAY_S,
    ) -> None:
        self.uuid = uuid
        self.agent = agent
        self.health = ReviewerHealth()
        self._report = report
        self._pending: list[str] = []
        self._busy = False
        self._drainer: asyncio.Task[None] | None = None
        self._context_chars = int(context_window * CONTEXT_SHARE * CHARS_PER_TOKEN)
        self._retry_delay_s = retry_delay_s
        self._generation = 0  # bumped by reset: a drain of an older generation reports nothing
        self.version = 0  # bumped by every change of the backlog
        self._spent: list[dict[str, Any]] = []  # requests made since the last report

    @property
    def backlog(self) -> int:
        return len(self._pending) + (1 if self._busy else 0)

    def update(self, delta: str) -> tuple[int, int]:
        """Queue a transcript delta; deltas queued while busy go out as one prompt. Returns
        (version, backlog)."""
        if not delta.strip():
            return self.version, self.backlog
        self.version += 1
        self._pending.append(delta)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return self.version, self.backlog

    def reset(self, primer: str) -> tuple[int, int]:
        """The watched transcript was rewritten: forget everything, replay `primer` next.
        Returns (version, backlog)."""
        self._generation += 1
        self.version += 1
        self._pending = [primer] if primer.strip() else []
        self.agent.reset_history([])
        if self._drainer is not None:
            self._drainer.cancel()
        self._drainer = None
        self._busy = False
        if self._pending:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return self.version, self.backlog

    async def _drain(self) -> None:
        generation = self._generation
        while self._pending and generation == self._generation:
            batch, self._pending = self._pending, []
            self._busy = True
            ok, error = await self._review("\n\n---\n\n".join(batch), generation)
            self._busy = False
            if generation != self._generation:
                return
            dropped = False
            if not ok:
                self.health.consecutive_failures += 1
                self.health.last_error = error
                if self.health.consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
                    self._pending = []
                    self.health.dropped_backlogs += 1
                    dropped = True
                else:
                    self._pending = [*batch, *self._pending]
            self.version += 1
            await self._report(
                ReviewReport(
                    reviewer=self.uuid,
                    backlog=self.backlog,
                    version=self.version,
                    ok=ok,
                    dropped=dropped,
                    error=error,
                    health=self.health.as_dict(),
                    spent=self._spent,
                )
            )
            self._spent = []
            if not ok and not dropped:
                await asyncio.sleep(self._retry_delay_s)

    async def _review(self, delta: str, generation: int) -> tuple[bool, str | None]:
        await self._keep_context_small(len(delta))
        prompt = "New activity in the session you are watching:\n\n" + delta
        before = list(self.agent.history)
        self.health.prompts += 1
        result: TurnResult = await self.agent.run_turn(
            NewEntry(kind="user", content=prompt, data={}), lambda event: None, self._bill
        )
        if generation != self._generation:
            return False, "reset"
        if not result.ok:
            self.agent.reset_history(before)  # the failed prompt is retried, not kept
            return False, result.error
        self.health.reviews += 1
        self.health.last_success = time.time()
        self.health.consecutive_failures = 0
        self.health.last_error = None
        self.health.usage = self.health.usage + result.usage
        self.health.cost_usd += result.cost_usd
        return True, None

    async def _keep_context_small(self, incoming: int) -> None:
        """Compact: when the history and the next delta would not fit, the oldest exchanges
        are summarised by the reviewer's model (an earlier summary with them) and the summary
        leads the history. If the summary fails, those exchanges are dropped instead."""
        history = self.agent.history
        size = sum(_message_chars(m) for m in history) + incoming
        if size <= self._context_chars:
            return
        older: list[Message] = []
        while history and size > self._context_chars // 2:
            older.append(history.pop(0))
            size -= _message_chars(older[-1])
            while history and history[0].role != "user":
                older.append(history.pop(0))
                size -= _message_chars(older[-1])
        summary = await self._summarise(older)
        if not summary:
            return
        lead = TextPart(text=COMPACTION_TEXT.format(summary=summary))
        if history and history[0].role == "user":
            history[0] = Message(role="user", parts=(lead, *history[0].parts))
        else:
            history.insert(0, Message(role="user", parts=(lead,)))
        self.health.compactions += 1

    async def _summarise(self, older: Sequence[Message]) -> str:
        """The reviewer's own model summarises `older`; "" when it cannot."""
        choice = self.agent.choice
        if choice is None or not older:
            return ""
        transcript = "\n".join(
            f"[{message.role}] {text}"
            for message in older
            for part in message.parts
            if (text := _part_text(part))
        )
        request = Request(
            model=choice.model,
            messages=(Message.user(REVIEW_SUMMARY_PROMPT.format(transcript=transcript)),),
            system=self.agent.system,
            max_tokens=SUMMARY_MAX_TOKENS,
        )
        try:
            turn = await self.agent.provider.complete(request)
        except ProviderError:
            return ""
        self.health.usage = self.health.usage + turn.usage
        self.health.cost_usd += turn.cost_usd
        self._spent.append(reply_data(turn))
        return turn.text.strip()

    async def _bill(self, data: dict[str, Any]) -> None:
        """A request of a review ended: what it used goes with the next report (what one may
        cost, told before it is sent, is not, nor a failed attempt: a review's requests are
        reported together)."""
        if is_bill(data):
            self._spent.append(data)

    def status(self) -> dict[str, Any]:
        history_chars = sum(_message_chars(m) for m in self.agent.history)
        return {
            "backlog": self.backlog,
            "context_tokens": history_chars // CHARS_PER_TOKEN,
            "context_window": int(self._context_chars / CHARS_PER_TOKEN / CONTEXT_SHARE),
            **self.health.as_dict(),
        }

    def dump(self, raw: bool) -> str:
        """The reviewer's transcript: compact, or with system prompt, tools and thinking."""
        lines: list[str] = []
        if raw:
            lines += ["# System", self.agent.system or "", "# Tools"]
            lines += [
                f"- {name}: {tool.spec.description}" for name, tool in self.agent.tools.items()
            ]
            lines.append("# Transcript")
        for message in self.agent.history:
            for part in message.parts:
                match part:
                    case TextPart(text=text):
                        lines.append(f"[{message.role}] {text}")
                    case ThinkingPart(text=text) if raw:
                        lines.append(f"[thinking] {text}")
                    case ToolCallPart(name=name, arguments=arguments):
                        lines.append(f"[call] {name} {json.dumps(arguments)}")
                    case ToolResultPart(content=content) if raw:
                        lines.append(f"[result] {content}")
                    case _:
                        pass
        return "\n".join(lines)


def _part_text(part: object) -> str:
    match part:
        case TextPart(text=text):
            return text
        case ToolCallPart(name=name, arguments=arguments):
            return f"(calls {name}) {json.dumps(arguments)}"
        case ToolResultPart(content=content):
            return f"(result) {content}"
    return ""


def _message_chars(message: Message) -> int:
    total = 0
    for part in message.parts:
        match part:
            case TextPart(text=text) | ThinkingPart(text=text):
                total += len(text)
            case ToolCallPart(arguments=arguments):
                total += len(json.dumps(arguments))
            case ToolResultPart(content=content):
                total += len(content)
    return total
