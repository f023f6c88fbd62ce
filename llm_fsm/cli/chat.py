"""``llm-fsm chat`` and ``llm-fsm run``: conversations from the terminal.

An I/O edge like the rest of the CLI: it builds an ``FSMManager`` on the
default SQLite store (so ``--resume ID`` continues a conversation in a later
process), prints each reply with the state it left the conversation in, and —
on request — why the engine decided what it did and the prompt it sent.

The model options are in ``_models``, the store and owner options in ``_store_options``, the text of records
in ``_show`` and the commands that read stored conversations (``explain``, ``trace``, ``conversations``) in
``_stored``; the names they had here are re-exported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

import click

from llm_fsm.cli._app import (
    EXIT_FINDINGS,
    GuardedCommand,
    action_registry,
    actions_option,
    mcp_option,
    retrievers_option,
)
from llm_fsm.cli._models import MODEL_ENV, ReplyFileModel, _model_option, _PromptEcho, make_llm
from llm_fsm.cli._show import conversation_lines, describe_actions, describe_turn, explain_text, trace_lines
from llm_fsm.cli._store_options import Owner, _looking_up, _owner_options, _store_option, _store_url
from llm_fsm.cli._stored import conversations_command, explain_command, trace_command
from llm_fsm.engine._values import masked
from llm_fsm.errors import ConversationEndedError, LLMResponseError


def _manager(
    model: str | None,
    store: Any,
    temperature: float | None,
    show_prompt: bool,
    *,
    fsm_loader: Any,
    actions: str | None = None,
    retrievers: str | None = None,
    mcp: str | None = None,
) -> Any:
    from llm_fsm.manager import FSMManager
    from llm_fsm.runtime._retrievers import load_retrievers

    registry = action_registry(actions, mcp)
    found = load_retrievers(retrievers) if retrievers else None
    llm = make_llm(model, temperature=temperature)
    if show_prompt:
        llm = _PromptEcho(llm, click.echo)
    extra = {"fsm_loader": fsm_loader} if fsm_loader is not None else {}
    return FSMManager(llm_interface=llm, store=store, actions=registry, retrievers=found, **extra)


def definition_location(definition: str) -> str:
    """What a new conversation stores as its definition: the file's absolute path, so it resolves from anywhere."""
    from llm_fsm.loading import resolve_definition_path

    return os.fspath(resolve_definition_path(definition))


def resume_loader(definition: str, instance: Any) -> tuple[Any, str | None]:
    """The loader that runs a resumed conversation on the DEFINITION given, and a note for the user.

    The conversation stores the definition it started on (``root_fsm_id``: an
    absolute path since conversations started here store one, whatever was
    typed before). When that names the file given, nothing changes. Otherwise
    the file given stands in for the stored one if its content hash is the one
    the conversation started on; a different definition is refused rather
    than run under the conversation's feet.
    """
    from llm_fsm.errors import DefinitionChangedError, DefinitionNotFoundError
    from llm_fsm.loading import load_fsm_definition, resolve_definition_path

    stored_id = instance.root_fsm_id
    stored_hash = instance.flow_stack[0].definition_hash if instance.flow_stack else instance.definition_hash
    given = resolve_definition_path(definition)
    try:
        stored: Any = resolve_definition_path(stored_id)
    except DefinitionNotFoundError:
        stored = None
    if stored is not None and os.path.samefile(stored, given):
        return None, None  # the stored location reaches the file given: the manager's own checks apply
    given_definition = load_fsm_definition(given)
    if stored_hash is not None and given_definition.content_hash != stored_hash:
        where = f"{stored}" if stored is not None else f"{stored_id!r}, which is not found from here"
        raise DefinitionChangedError(
            f"{definition} is not the definition conversation {instance.conversation_id} started on "
            f"({where}; content hash {stored_hash}, {definition} has {given_definition.content_hash})"
        )

    def loader(fsm_id: str) -> Any:
        return load_fsm_definition(given if fsm_id == stored_id else fsm_id)

    return loader, f"using {given} for {stored_id} (same content)"


HUMAN_MODE_NOTE = (
    "(a person has this conversation: your messages are recorded for them and no model answers "
    "until an operator resumes the bot)"
)


def _print_turn(
    manager: Any,
    conversation_id: str,
    reply: str,
    *,
    explain: bool,
    quiet: bool,
    owner: Owner = Owner(),
    mode: str = "bot",
) -> None:
    if reply or mode != "human":
        click.echo(click.style("assistant: ", fg="green") + reply)
    if mode == "human":
        click.echo(click.style(HUMAN_MODE_NOTE, fg="yellow"))
    if quiet:
        return
    record = manager.explain(conversation_id, **owner.kwargs)
    for line in describe_actions(record):
        click.echo(click.style(line, dim=True))
    click.echo(click.style(describe_turn(record), dim=True))
    if explain:
        click.echo(explain_text(record))


@dataclass
class ChatSession:
    """What a chat or run did: its conversation, and how many messages the model could not answer."""

    conversation_id: str
    failed_turns: int = 0


def chat_loop(
    definition: str,
    *,
    model: str | None,
    store: str | None,
    resume: str | None,
    explain: bool,
    show_prompt: bool,
    temperature: float | None,
    messages: Iterable[str] | None = None,
    quiet: bool = False,
    owner: Owner = Owner(),
    actions: str | None = None,
    language: str | None = None,
    retrievers: str | None = None,
    mcp: str | None = None,
) -> ChatSession:
    """Run a conversation: interactive when ``messages`` is None.

    A new conversation stores the definition's absolute path; ``resume`` runs
    on ``definition`` when it is that file or has the same content
    (``resume_loader``)."""
    from llm_fsm.stores import open_store

    opened = open_store(_store_url(store))
    mine = owner.kwargs
    loader = note = instance = None
    if resume:
        with _looking_up(resume, owner):
            instance = opened.load(resume, **mine)
        loader, note = resume_loader(definition, instance)
    manager = _manager(
        model, opened, temperature, show_prompt, fsm_loader=loader, actions=actions, retrievers=retrievers, mcp=mcp
    )
    if resume and instance is not None:
        conversation_id = resume
        # what start_conversation checks for a new chat: forgetting --actions on --resume (the registry is not
        # stored) would otherwise surface only in the middle of the first turn that triggers an action
        manager.actions.require(manager.get_definition(resume, **mine))
        if note:
            click.echo(click.style(note, dim=True))
        click.echo(click.style(f"resuming {conversation_id} in state {instance.current_state}", dim=True))
        if instance.mode == "human":
            click.echo(click.style(HUMAN_MODE_NOTE, fg="yellow"))
    else:
        conversation_id, opening = manager.start_conversation(
            definition_location(definition), language=language, **mine
        )
        click.echo(
            click.style(
                f"conversation {conversation_id} (resume with --resume {conversation_id}{owner.options()})", dim=True
            )
        )
        click.echo(click.style("assistant: ", fg="green") + opening)
    session = ChatSession(conversation_id)
    source = iter(messages) if messages is not None else None
    while not manager.is_conversation_ended(conversation_id, **mine):
        message: str | None
        if source is None:
            try:
                message = click.prompt(click.style("you", fg="cyan"), prompt_suffix=": ")
            except (click.Abort, EOFError):
                click.echo()
                break
        else:
            message = next(source, None)
            if message is None:
                break
            click.echo(click.style("you: ", fg="cyan") + message)
        try:
            outcome = manager.process_turn(conversation_id, message, **mine)
        except LLMResponseError as exc:
            session.failed_turns += 1
            click.echo(
                click.style(
                    f"(the model's answer could not be used: {exc}; nothing was changed — try again)", fg="yellow"
                )
            )
            continue
        except ConversationEndedError:
            break
        _print_turn(
            manager, conversation_id, outcome.reply, explain=explain, quiet=quiet, owner=owner, mode=outcome.mode
        )
    if manager.is_conversation_ended(conversation_id, **mine):
        state = manager.get_current_state(conversation_id, **mine)
        click.echo(click.style(f"conversation ended in state {state}", dim=True))
        data = masked(
            manager.get_definition(conversation_id, **mine), manager.get_conversation_data(conversation_id, **mine)
        )
        click.echo(json.dumps(data, ensure_ascii=False))
    return session


@click.command("chat", cls=GuardedCommand)
@click.argument("definition")
@_model_option
@_store_option
@click.option(
    "--resume",
    metavar="ID",
    help="Continue a stored conversation instead of starting one. DEFINITION must be the file it started on "
    "(stored as an absolute path) or a file with the same content.",
)
@_owner_options
@actions_option
@retrievers_option
@mcp_option
@click.option(
    "--language",
    metavar="TAG",
    default=None,
    help="Start the conversation in one of the definition's languages (e.g. de); default: its default language.",
)
@click.option("--explain", is_flag=True, help="Print the full explain record after each turn.")
@click.option("--show-prompt", is_flag=True, help="Print every system prompt sent to the model.")
@click.option("--temperature", type=float, default=None)
def chat_command(
    definition: str,
    model: str | None,
    store: str | None,
    resume: str | None,
    user_id: str | None,
    room_id: str | None,
    actions: str | None,
    retrievers: str | None,
    mcp: str | None,
    language: str | None,
    explain: bool,
    show_prompt: bool,
    temperature: float | None,
) -> None:
    """Talk to a definition in the terminal.

    Shows the state after each turn and why the engine moved (or did not).
    Keys are read from the environment the way litellm reads them
    (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).

    \b
    Example:
      llm-fsm chat definitions/personal_information_collection.json --model gpt-4o-mini
      llm-fsm chat definitions/simple_greeting.yaml --model local --explain
      llm-fsm chat definitions/simple_greeting.yaml --model scripted:definitions/conversations/simple_greeting.conv.yaml
      llm-fsm chat definitions/simple_greeting.yaml --resume 6f1c…
      llm-fsm chat definitions/simple_greeting.yaml --user alice --room support
    """
    chat_loop(
        definition,
        model=model,
        store=store,
        resume=resume,
        explain=explain,
        show_prompt=show_prompt,
        temperature=temperature,
        owner=Owner(user_id, room_id),
        actions=actions,
        language=language,
        retrievers=retrievers,
        mcp=mcp,
    )


@click.command("run", cls=GuardedCommand)
@click.argument("definition")
@_model_option
@_store_option
@click.option(
    "--input",
    "input_file",
    type=click.File("r", encoding="utf-8"),
    required=True,
    help="One user message per line ('-' for stdin).",
)
@_owner_options
@actions_option
@retrievers_option
@mcp_option
@click.option(
    "--language",
    metavar="TAG",
    default=None,
    help="Start the conversation in one of the definition's languages (e.g. de); default: its default language.",
)
@click.option("--explain", is_flag=True, help="Print the full explain record after each turn.")
@click.option("--show-prompt", is_flag=True, help="Print every system prompt sent to the model.")
@click.option("--temperature", type=float, default=None)
@click.pass_context
def run_command(
    ctx: click.Context,
    definition: str,
    model: str | None,
    store: str | None,
    input_file: TextIO,
    user_id: str | None,
    room_id: str | None,
    actions: str | None,
    retrievers: str | None,
    mcp: str | None,
    language: str | None,
    explain: bool,
    show_prompt: bool,
    temperature: float | None,
) -> None:
    """Play user messages from a file against a definition, without a terminal.

    Blank lines are skipped. Stops when the conversation ends or the input does.
    Exits 1 when the model could not answer one of the messages (the others
    are still played).

    \b
    Example:
      llm-fsm run definitions/simple_greeting.yaml --model gpt-4o-mini --input messages.txt
    """
    messages = [line.rstrip("\n") for line in input_file if line.strip()]
    session = chat_loop(
        definition,
        model=model,
        store=store,
        resume=None,
        explain=explain,
        show_prompt=show_prompt,
        temperature=temperature,
        messages=messages,
        owner=Owner(user_id, room_id),
        actions=actions,
        language=language,
        retrievers=retrievers,
        mcp=mcp,
    )
    if session.failed_turns:
        ctx.exit(EXIT_FINDINGS)


__all__ = [
    "MODEL_ENV",
    "ChatSession",
    "ReplyFileModel",
    "Owner",
    "chat_command",
    "chat_loop",
    "definition_location",
    "conversation_lines",
    "conversations_command",
    "describe_turn",
    "explain_command",
    "make_llm",
    "resume_loader",
    "run_command",
    "trace_command",
    "trace_lines",
]
