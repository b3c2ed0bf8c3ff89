"""The end of a turn that must answer in a type: the reply checked against its schema, and
its problem sent back to the model while retries are left (actors/output.py)."""

from __future__ import annotations

from collections.abc import Callable

from grove.actors.agent.tool import Emit
from grove.actors.errors import AnswerError
from grove.actors.output import RETRY_KIND, OutputType, check_answer, retry_text
from grove.actors.turn_result import NewEntry, TurnResult
from grove.providers.stream_events import ProviderWarning


async def answered(
    result: TurnResult,
    output: OutputType | None,
    ask_again: Callable[[NewEntry], None],
    emit: Emit,
) -> bool:
    """Whether the turn ends with its last reply: always without a typed `output`; with one,
    when the answer checks out or the retries are spent (then the last problem is kept with
    the raw text). Otherwise the problem goes back to the model through `ask_again`, and
    False."""
    if output is None:
        return True
    answer = result.entries[-1].data  # the reply's stored data carries the outcome
    try:
        result.output = answer["output"] = await check_answer(result.text, output)
    except AnswerError as exc:
        problem = str(exc)
        if result.output_retries < output.retries:
            result.output_retries += 1
            left = output.retries - result.output_retries + 1
            ask_again(NewEntry(kind=RETRY_KIND, content=retry_text(problem, left), data={}))
            emit(
                ProviderWarning(
                    text=f"── the answer did not match the schema; asking again "
                    f"({result.output_retries} of {output.retries}) ──"
                )
            )
            return False
        result.output_error = answer["output_error"] = problem
    if result.output_retries:  # kept with the answer, to read back with it
        answer["output_retries"] = result.output_retries
        answer["retry_usage"] = result.retry_usage.as_dict()
    return True
