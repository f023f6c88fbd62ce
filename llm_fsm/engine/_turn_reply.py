"""The last phases of a turn: reply, end, record (the first ones are in ``_turn_phases``).

The model wrote its reply before the engine decided; this is where the turn settles which reply the user reads,
whether the conversation ends, and what is kept of the turn: the exchange, the explain record, the usage.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionScope
from llm_fsm.engine._data import now
from llm_fsm.engine._effects import (
    AwaitMessage,
    CallLLM,
    Decided,
    Effect,
    EngineConfig,
    TurnOutcome,
    _apply_application,
    _hook,
    _trace,
)
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import conversation_language, follow_language, invalid_message
from llm_fsm.engine._languages import label as language_label
from llm_fsm.engine._provenance import prune
from llm_fsm.engine._records import ContextChange, LLMCallRecord, LLMResult, RetrievalRecord, TurnRecord
from llm_fsm.engine._retrieval import cited
from llm_fsm.engine._routes import _Decision
from llm_fsm.engine._turn_phases import _Applied, _Turn, _Understood
from llm_fsm.engine._turn_request import _request
from llm_fsm.engine._values import MASK, REASK_RULES
from llm_fsm.engine._wording import Wording, refused_target, turn_wording

# --- reply -----------------------------------------------------------------------------

UNWORDED = frozenset(
    {"digression", "cancel_pending", "conversation_cancelled", "conversation_restarted", "handed_off", "human_mode"}
)
"""Verdicts whose reply is not the state's: a side question answered, a cancel asked or done, a person called.
The state's approved text (``say``) is not said on them."""


def _reply(turn: _Turn, understood: _Understood, applied: _Applied) -> Generator[Effect, Any, str]:
    """Tell the driver what was decided, then settle the reply. The model wrote its reply for its own proposal; when
    the engine decided otherwise (or values were refused, or actions returned results) the reply is written again
    for the state actually reached, so the user never reads a reply meant for another state. Otherwise a reply
    still streaming is awaited. Last, the approved wording of the state reached (``say``) replaces or checks it."""
    instance, result = turn.instance, understood.result
    reply = result.response.message
    note = _note(turn, understood, applied.note)
    wording = None if applied.verdict.kind in UNWORDED else _wording(turn, understood, applied)
    strict = wording is not None and wording.mode == "strict" and wording.text is not None
    # a strict text replaces the reply whatever it says: writing it again would be a call for nothing
    regenerating = note is not None and instance.status == "active" and not strict
    told = _told(wording)
    if regenerating and told is not None:
        note = f"{note}\n{told}"  # a transition's or refusal's guided text: asked for in the rewrite made anyway
    yield Decided(
        state=instance.current_state,
        verdict=applied.verdict.kind,
        ended=instance.status != "active" or applied.state.is_terminal,
    )
    if not regenerating and not strict and result.message_pending:
        # the streamed call's rest: its message, and its usage and price, known only at the end of the stream
        # (under a strict text the model's message is dropped unread, as for a regenerated reply: never shown)
        whole: LLMResult = yield AwaitMessage()
        turn.calls[0] = LLMCallRecord.of("turn", whole)
        reply = whole.response.message
    if regenerating:
        reply = yield from _regenerate(turn, applied, note)
    if wording is not None:
        reply = yield from _worded(turn, applied, wording, reply, note, rewritten=regenerating and told is not None)
    return reply


def _wording(turn: _Turn, understood: _Understood, applied: _Applied) -> Wording | None:
    """The approved text of the turn (engine._wording decides which: a refusal, a transition's, the state's)."""
    instance = turn.instance
    same_flow = applied.active is turn.definition and instance.flow_id == turn.flow_before
    return turn_wording(
        applied.active,
        applied.state,
        instance.context.data,
        before=turn.state if same_flow else None,
        steps=[applied.verdict, *applied.chained],
        refused_target=refused_target(turn.state, understood.route, understood.proposal),
        language=conversation_language(applied.active, turn.instance),
    )


def _told(wording: Wording | None) -> str | None:
    """The instruction a guided text not of the state gives a rewrite (a guided state's prompt has its own)."""
    if wording is None or wording.mode != "guided" or wording.text is None or wording.own:
        return None
    return f"Your reply must include this text exactly, word for word: {wording.text}"


def _worded(
    turn: _Turn, applied: _Applied, wording: Wording, reply: str, note: str | None, *, rewritten: bool
) -> Generator[Effect, Any, str]:
    """The reply under approved wording: strict says the text; guided keeps a reply that includes it verbatim, asks
    once for a rewrite that does (unless the reply is already that rewrite), then says the text. A text that could
    not be filled leaves the reply as it is."""
    instance, config = turn.instance, turn.config
    if wording.text is None:
        _trace(instance, config, "say_fallback", state=applied.state.id, reason=wording.reason, **wording.origin)
        return reply
    if wording.mode == "strict" or wording.text in reply:
        return wording.text if wording.mode == "strict" else reply
    if instance.status == "active" and not rewritten:
        told = f"Your reply must include this text exactly, word for word: {wording.text}"
        reply = yield from _regenerate(turn, applied, told if note is None else f"{note}\n{told}")
        if wording.text in reply:
            return reply
    reason = "guided reply lacked the text"
    _trace(instance, config, "say_fallback", state=applied.state.id, reason=reason, **wording.origin)
    return wording.text


def _regenerate(turn: _Turn, applied: _Applied, note: str | None) -> Generator[Effect, Any, str]:
    """The reply written again for the state reached, told ``note``; it may not move."""
    regenerated: LLMResult = yield CallLLM(
        _request(
            turn.builder,
            applied.active,
            turn.instance,
            applied.state,
            turn.message,
            "regenerate",
            note=note,
            allow_moves=False,
            schema_sent=turn.schema_sent,
            user_content=turn.user.model_content,
            # the snippets were looked up for this state: another one's reply is written without them
            snippets=turn.snippets if applied.state is turn.state else (),
        )
    )
    turn.calls.append(LLMCallRecord.of("regenerate", regenerated))
    return regenerated.response.message


def _note(turn: _Turn, understood: _Understood, note: str | None) -> str | None:
    """What the regenerated reply must tell the user beyond the decision's own note: the results actions returned,
    the values refused (to ask again), the values this step does not let change. None: the model's reply stands."""
    if note is None:
        note = _results_note(turn.scope)
    refused = [c for c in understood.model_changes if not c.applied and c.rule in REASK_RULES]
    reask = _reask_note(turn.definition, turn.instance, refused)
    if reask is not None:
        note = reask if note is None else f"{note}\n{reask}"
    if understood.unchangeable:
        confirmation = turn.state.confirmation
        allowed = (confirmation.changeable_keys if confirmation else None) or []
        told = (
            "These values cannot be changed at this step and were NOT stored: "
            + ", ".join(c.key for c in understood.unchangeable)
            + ". Say so briefly"
            + (f" and ask which of these they would like to change: {', '.join(allowed)}." if allowed else ".")
        )
        note = told if note is None else f"{note}\n{told}"
    return note


def _results_note(scope: ActionScope) -> str | None:
    """When actions wrote results this turn, the model's reply (written before they ran) cannot mention them:
    the reply is written again with them in the context. One more call, only on turns whose actions wrote."""
    written = [path for r in scope.records if r.outcome in ("ok", "replayed") for path in r.outputs]
    if not written:
        return None
    return (
        f"A backend call has just returned {', '.join(dict.fromkeys(written))} (now in the current context). "
        "Answer the user's last message for the current state, using these values where they matter."
    )


def _reask_note(definition: FSMDefinition, instance: FSMInstance, refused: list[ContextChange]) -> str | None:
    """The instruction to ask again for values that were refused, saying what was wrong with each (a key's name and
    its ``invalid_message`` in the conversation's language)."""
    lines = []
    for change in refused:
        declared = definition.declaration_for(change.key) is not None
        label = language_label(definition, instance, change.key) if declared else change.key
        # an invented value is not repeated: quoted in the reply, it would ground itself on the next turn
        reason = "the user has not said it" if change.rule == "ungrounded" else change.reason
        # a question naming what the user said is asked as it is: a key's invalid_message says what a value must be
        why = reason if change.rule == "ambiguous" else invalid_message(definition, instance, change.key) or reason
        lines.append(f"- {label}: {why}")
    if not lines:
        return None
    return (
        "These values were NOT accepted and are not stored:\n"
        + "\n".join(lines)
        + "\nDo not treat them as known. Say briefly what was wrong and ask the user for them again."
    )


# --- end -------------------------------------------------------------------------------


def _end(turn: _Turn, applied: _Applied) -> Generator[Effect, Any, None]:
    """A terminal state reached ends the conversation; whatever ended it (that, a cancel, a handoff), ``on_end``
    hooks see it once, after the reply, with the turn's verdict."""
    instance, config = turn.instance, turn.config
    if applied.state.is_terminal and instance.status == "active":
        instance.status = "ended"
        _trace(instance, config, "end", state=applied.state.id)
    if instance.status != "active":
        additions = yield _hook(
            "on_end", instance, message=turn.message, previous_state=turn.state_before, verdict=applied.verdict
        )
        turn.changes += _apply_application(applied.active, instance, additions, config, "on_end")


# --- record ----------------------------------------------------------------------------


def _record(turn: _Turn, understood: _Understood, decision: _Decision, applied: _Applied, reply: str) -> TurnOutcome:
    """Keep the turn: the exchange in the (bounded) transcript, the explain record with sensitive values masked, the
    usage of every model call, and the message id, so that a resend gets this reply instead of a second turn."""
    instance, config, user, message_id = turn.instance, turn.config, turn.user, turn.message_id
    conversation = instance.context.conversation
    conversation.add_user_message(
        user.text, id=message_id, at=turn.received, metadata=user.metadata, parts=user.stored_parts
    )
    conversation.add_assistant_message(reply)
    _prune_transcript(instance, config)

    instance.turn_count += 1
    follow_language(applied.active, instance)
    prune(instance)
    shown_message, shown_reply = _redact((turn.definition, applied.active), instance.context.data, user.text, reply)
    record = TurnRecord(
        index=instance.turn_count,
        message_id=message_id,
        user_message=shown_message,
        intent=understood.intent,
        state_before=turn.state_before,
        state_after=instance.current_state,
        flow_before=turn.flow_before,
        flow_after=instance.flow_id,
        proposal=understood.proposal,
        context_changes=turn.changes,
        evaluations=decision.evaluations,
        verdict=applied.verdict,
        chained=applied.chained,
        llm_calls=turn.calls,
        actions=turn.scope.records,
        reply=shown_reply,
        started_at=turn.started,
        finished_at=now(),
        retrieval=_retrieval(turn, applied, reply),
    )
    for call in turn.calls:
        instance.usage.add(call)
    instance.keep_turn(
        record,
        max_turn_records=config.max_turn_records,
        message_id=message_id,
        reply=reply,
        max_message_ids=config.max_processed_message_ids,
    )
    return TurnOutcome(
        reply=reply,
        record=record,
        changes=turn.changes,
        state=instance.current_state,
        ended=instance.status != "active",
        fsm_id=instance.fsm_id,
        flow_depth=len(instance.flow_stack) + 1,
        mode=instance.mode,
    )


def _retrieval(turn: _Turn, applied: _Applied, reply: str) -> RetrievalRecord | None:
    """What the turn retrieved, with the ids the reply the user reads cites (the query masked as the message is:
    it is the message, or made of context values)."""
    if turn.retrieved is None:
        return None
    record = turn.retrieved.record
    record.cited = cited(reply, turn.retrieved.snippets)
    if record.query is not None:
        [record.query] = _redact((turn.definition, applied.active), turn.instance.context.data, record.query)
    return record


def _prune_transcript(instance: FSMInstance, config: EngineConfig) -> None:
    """Keep the stored transcript bounded; the overflow goes to the store's archive, not the void."""
    exchanges = instance.context.conversation.exchanges
    overflow = len(exchanges) - config.max_stored_messages
    if overflow > 0:
        instance.archive_outbox.extend(exchanges[:overflow])
        del exchanges[:overflow]
        instance.context.conversation.archived_messages += overflow


def _redact(definitions: tuple[FSMDefinition, ...], data: dict[str, Any], *texts: str) -> list[str]:
    """``texts`` with the stored values of sensitive keys masked: the explain record quotes the user.

    The keys of every flow the turn ran in count (a sub-flow's value handed to a parent that calls it sensitive).
    """
    secrets = [
        str(value)
        for definition in definitions
        for key in _sensitive_keys(definition)
        if isinstance(value := data.get(key), (str, int, float)) and len(str(value)) >= 3
    ]
    out = []
    for text in texts:
        for secret in secrets:
            text = text.replace(secret, MASK)
        out.append(text)
    return out


_SENSITIVE: dict[str, tuple[str, ...]] = {}


def _sensitive_keys(definition: FSMDefinition) -> tuple[str, ...]:
    """The keys a definition declares sensitive: read every turn, so found once per definition's content."""
    if not definition.context_keys:
        return ()
    found = _SENSITIVE.get(definition.content_hash)
    if found is None:
        found = tuple(key for key, declaration in definition.context_keys.items() if declaration.sensitive)
        if len(_SENSITIVE) < 4096:
            _SENSITIVE[definition.content_hash] = found
    return found
