"""``llm-fsm chat`` and ``llm-fsm run``: conversations from the terminal.

An I/O edge like the rest of the CLI: it builds an ``FSMManager`` on the
default SQLite store (so ``--resume ID`` continues a conversation in a later
process), prints each reply with the state it left the conversation in, and —
on request — why the engine decided what it did and the prompt it sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import click

from llm_fsm.cli._app import EXIT_FINDINGS, GuardedCommand, actions_option
from llm_fsm.engine._records import LLMRequest, TurnRecord
from llm_fsm.engine._values import masked
from llm_fsm.errors import (
    ConversationEndedError,
    ConversationNotFoundError,
    DefinitionError,
    LLMConfigurationError,
    LLMResponseError,
)

MODEL_ENV = "LLM_FSM_MODEL"
STORE_ENV = "LLM_FSM_STORE"


def _store_url(store: str | None) -> str | None:
    """``--store``, else ``$LLM_FSM_STORE``, else None (the default SQLite file)."""
    return store or os.environ.get(STORE_ENV) or None


@dataclass(frozen=True)
class Owner:
    """The user and room a conversation belongs to (``--user`` / ``--room``); stores answer only to the exact pair."""

    user_id: str | None = None
    room_id: str | None = None

    @property
    def kwargs(self) -> dict[str, str | None]:
        return {"user_id": self.user_id, "room_id": self.room_id}

    def describe(self) -> str:
        user = f"user {self.user_id!r}" if self.user_id is not None else "no user"
        room = f"room {self.room_id!r}" if self.room_id is not None else "no room"
        return f"{user} and {room}"

    def options(self) -> str:
        """The flags that name this owner again, for hints."""
        pairs = (("user", self.user_id), ("room", self.room_id))
        return "".join(f" --{flag} {shlex.quote(value)}" for flag, value in pairs if value is not None)


@contextlib.contextmanager
def _looking_up(conversation_id: str, owner: Owner) -> Iterator[None]:
    """Say which user and room a conversation was looked up with when it is not found."""
    try:
        yield
    except ConversationNotFoundError as exc:
        raise ConversationNotFoundError(
            f"{exc} for {owner.describe()} (a conversation answers only to the user and room it was started with; "
            "`llm-fsm conversations` lists each one's user and room: pass them with --user and --room)"
        ) from None


class _PromptEcho:
    """Wraps an LLM interface to show every system prompt before it is sent (``--show-prompt``)."""

    def __init__(self, inner: Any, echo: Any) -> None:
        self._inner = inner
        self._echo = echo

    def complete(self, request: LLMRequest) -> Any:
        self._echo(click.style(f"--- system prompt ({request.purpose}) ---", dim=True))
        self._echo(request.system_prompt)
        self._echo(click.style("--- end of prompt ---", dim=True))
        complete = getattr(self._inner, "complete", None)
        return complete(request) if callable(complete) else self._inner.send_request(request)

    def send_request(self, request: LLMRequest) -> Any:
        result = self.complete(request)
        return getattr(result, "response", result)

    @property
    def sends_reply_schema(self) -> bool:
        """The wrapped model's answer: the prompt shown must be the prompt it is sent."""
        return bool(getattr(self._inner, "sends_reply_schema", False))


SCRIPTED_PREFIX = "scripted:"


def make_llm(model: str | None, *, temperature: float | None = None, **kwargs: Any) -> Any:
    """A LiteLLMInterface for ``model`` (or ``$LLM_FSM_MODEL``); ``scripted:FILE`` replays replies from a file.

    Keys come from the environment as litellm reads them."""
    model = model or os.environ.get(MODEL_ENV)
    if not model:
        raise LLMConfigurationError(
            f"no model configured: pass --model (e.g. gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
            f"ollama/llama3.2, local, scripted:replies.yaml) or set {MODEL_ENV}"
        )
    if model.startswith(SCRIPTED_PREFIX):
        return ReplyFileModel.from_file(model.removeprefix(SCRIPTED_PREFIX))
    from llm_fsm.llm._litellm import LiteLLMInterface

    if temperature is not None:
        kwargs["temperature"] = temperature
    return LiteLLMInterface(model=model, **kwargs)


class ReplyFileModel:
    """``--model scripted:FILE``: the model's answers come from a file, in order. No key, no model, no network.

    FILE is a YAML or JSON list of replies, or a conversation script
    (``*.conv.yaml``) whose first conversation's ``opening:`` and ``model:``
    answers are replayed. Replies take the forms of a script's ``model:``
    (a plain string: stay and say this; ``{target_state, context_update,
    message}``; ``{intent: confirm, message}``; ``{raw: text}``), and the first
    answers the conversation's opening. The engine's second, "regenerate"
    call does not take a reply: it gets the script's ``regenerate:`` when there
    is one, else the turn's message again, as in ``llm-fsm test``.
    """

    reads_images = True
    """It stands in for the model the replies were written for: a message with images is taken, and answered
    from the file like any other."""

    def __init__(self, steps: list[tuple[Any, Any]], *, source: str) -> None:
        self.steps = steps  # (reply, regenerate reply or None), both as script_reply returns them
        self.source = source
        self.used = 0
        self._current: tuple[Any, Any] | None = None
        self._message: str | None = None

    @classmethod
    def from_file(cls, path: str) -> ReplyFileModel:
        from pydantic import ValidationError

        from llm_fsm.definition._documents import format_path, parse_text
        from llm_fsm.errors import ScriptError
        from llm_fsm.loading import read_capped
        from llm_fsm.scripting._scripts import MAX_SCRIPT_BYTES, ModelReply, is_script_file, load_script

        if not path:
            raise ScriptError("scripted: needs a file of replies, e.g. --model scripted:replies.yaml")
        if is_script_file(path):
            conversation = load_script(path).conversations[0]
            steps: list[tuple[Any, Any]] = [(conversation.opening.as_reply(), None)]
            for turn in conversation.turns:
                if turn.spec.model is not None:
                    regenerate = turn.spec.regenerate.as_reply() if turn.spec.regenerate is not None else None
                    steps.append((turn.spec.model.as_reply(), regenerate))
            return cls(steps, source=path)
        raw = read_capped(path, max_bytes=MAX_SCRIPT_BYTES, what="reply file", error=ScriptError, not_found=ScriptError)
        try:
            document = parse_text(raw, file=path, fmt="json" if path.lower().endswith(".json") else "yaml")
        except DefinitionError as exc:  # the shared parser speaks of definitions; this is a reply file
            raise ScriptError(exc.message, file=path, path=exc.path, line=exc.line) from None
        if not isinstance(document.data, list) or not document.data:
            raise ScriptError("a reply file is a non-empty list of model replies (or a *.conv.yaml script)", file=path)
        steps = []  # a list of replies: the opening first, then one per message
        for index, item in enumerate(document.data):
            try:
                steps.append((ModelReply.model_validate(item).as_reply(), None))
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = (index, *problem["loc"])
                unknown = problem["type"] == "extra_forbidden"
                raise ScriptError(
                    f"unknown key {where[-1]!r}" if unknown else problem["msg"].removeprefix("Value error, "),
                    file=path,
                    path=format_path(where),
                    line=document.line_for(where),
                ) from None
        return cls(steps, source=path)

    def send_request(self, request: LLMRequest) -> Any:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> Any:
        from llm_fsm.engine._records import LLMResult
        from llm_fsm.errors import LLMScriptExhaustedError
        from llm_fsm.llm.fakes import to_response

        if request.purpose == "regenerate" and self._current is not None:
            regenerate = self._current[1]
            reply = regenerate if regenerate is not None else {"target_state": None, "message": self._message or "…"}
        else:
            if self.used >= len(self.steps):
                raise LLMScriptExhaustedError(
                    f"{self.source} has no reply left for model call {self.used + 1} "
                    f"(it holds {len(self.steps)}: the opening, then one per message)"
                )
            self._current = self.steps[self.used]
            self.used += 1
            reply = self._current[0]
        response = to_response(reply, request)
        if request.purpose != "regenerate":
            self._message = response.message
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        return LLMResult(response=response, attempts=1, raw_outputs=(raw,), response_format="scripted")


def describe_turn(record: TurnRecord) -> str:
    """One line: where the turn left the conversation, and why."""
    verdict = record.verdict
    if record.state_before == record.state_after:
        where = f"[{record.state_after}]"
    else:
        where = f"[{record.state_before} → {record.state_after}]"
    return f"{where} {verdict.kind}: {verdict.reason}"


def describe_actions(record: TurnRecord) -> list[str]:
    """One line per action the turn ran: which, its outcome and time, and what a failure did."""
    lines = []
    for action in record.actions:
        line = f"  action {action.call} ({action.when} {action.state}): {action.outcome}"
        if action.outcome != "skipped":
            line += f", {action.duration_ms:.0f} ms"
        if action.error:
            line += f" — {action.error}" + (f" → on_error {action.on_error}" if action.on_error else "")
        lines.append(line)
    return lines


def explain_text(record: TurnRecord) -> str:
    """The explain record as indented JSON, for people."""
    return json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False)


def _manager(
    model: str | None,
    store: Any,
    temperature: float | None,
    show_prompt: bool,
    *,
    fsm_loader: Any,
    actions: str | None = None,
) -> Any:
    from llm_fsm.actions import load_registry
    from llm_fsm.manager import FSMManager

    registry = load_registry(actions) if actions else None
    llm = make_llm(model, temperature=temperature)
    if show_prompt:
        llm = _PromptEcho(llm, click.echo)
    extra = {"fsm_loader": fsm_loader} if fsm_loader is not None else {}
    return FSMManager(llm_interface=llm, store=store, actions=registry, **extra)


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
    manager = _manager(model, opened, temperature, show_prompt, fsm_loader=loader, actions=actions)
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
        conversation_id, opening = manager.start_conversation(definition_location(definition), **mine)
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


_model_option = click.option(
    "--model",
    "-m",
    help=f"litellm model name, 'local', or 'scripted:FILE' (replies from a YAML/JSON list or a *.conv.yaml "
    f"script: no key, no model) (default: ${MODEL_ENV}).",
)
_store_option = click.option(
    "--store",
    help="Store URL: sqlite:///path.db, memory://, redis://host:port/db, file:///dir "
    "(default: $LLM_FSM_STORE, else the user's conversations.db).",
)


def _owner_options(func: Any) -> Any:
    """``--user`` and ``--room``: whose conversation this is (a stored conversation answers only to its own pair)."""
    func = click.option("--room", "room_id", default=None, help="The room the conversation belongs to.")(func)
    return click.option("--user", "user_id", default=None, help="The user the conversation belongs to.")(func)


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
    )
    if session.failed_turns:
        ctx.exit(EXIT_FINDINGS)


@click.command("explain", cls=GuardedCommand)
@click.argument("conversation_id")
@click.option("--turn", type=int, default=-1, show_default=True, help="Turn index (1-based), or negative from the end.")
@_store_option
@_owner_options
def explain_command(
    conversation_id: str, turn: int, store: str | None, user_id: str | None, room_id: str | None
) -> None:
    """Show why the engine decided what it did in one turn of a stored conversation.

    \b
    Example:
      llm-fsm explain 6f1c2a3e-… --turn 3
      llm-fsm explain 6f1c2a3e-… --user alice --room support
    """
    from llm_fsm.manager import FSMManager
    from llm_fsm.stores import open_store

    owner = Owner(user_id, room_id)
    manager = FSMManager(store=open_store(_store_url(store)))
    with _looking_up(conversation_id, owner):
        record = manager.explain(conversation_id, turn, **owner.kwargs)
    click.echo(explain_text(record))


@click.command("trace", cls=GuardedCommand)
@click.argument("conversation_id")
@_store_option
@_owner_options
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def trace_command(
    conversation_id: str, store: str | None, user_id: str | None, room_id: str | None, output_format: str
) -> None:
    """Show the audit trail of a stored conversation.

    Every turn, update, transition, push, pop, cancel, rejection and digression.

    \b
    Example:
      llm-fsm trace 6f1c2a3e-…
      llm-fsm trace 6f1c2a3e-… --format json --store sqlite:///conversations.db --user alice
    """
    from llm_fsm.manager import FSMManager
    from llm_fsm.stores import open_store

    owner = Owner(user_id, room_id)
    manager = FSMManager(store=open_store(_store_url(store)))
    with _looking_up(conversation_id, owner):
        instance = manager.get_instance(conversation_id, **owner.kwargs)
    if output_format == "json":
        click.echo(json.dumps([e.model_dump(mode="json") for e in instance.trace], indent=2, ensure_ascii=False))
        return
    click.echo(
        f"conversation {instance.conversation_id}: {instance.status}, "
        f"state {instance.current_state}, stack {instance.stack}"
        + (f", with a person (handed off by {instance.handoff.actor})" if instance.handoff is not None else "")
    )
    for line in trace_lines(instance.trace):
        click.echo(line)


def trace_lines(trace: Iterable[Any]) -> list[str]:
    """One line per trace event: time, event, and its data as key=value."""
    import datetime

    lines = []
    for event in trace:
        when = datetime.datetime.fromtimestamp(event.timestamp, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        details = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in event.data.items())
        lines.append(f"{when}  {event.event:<15} {details}")
    return lines


@click.command("conversations", cls=GuardedCommand)
@_store_option
@click.option("--user", "user_id", default=None, help="Only this user's conversations (in any room).")
@click.option("--room", "room_id", default=None, help="Only this room's conversations (of any user).")
@click.option(
    "--usage", is_flag=True, help="Add model calls, tokens and cost of each conversation (loads every one listed)."
)
def conversations_command(store: str | None, user_id: str | None, room_id: str | None, usage: bool) -> None:
    """List stored conversations, newest first, with the user and room each belongs to.

    A stored conversation answers only to the user and room it was started
    with: pass the same --user and --room to chat --resume, explain and trace.

    \b
    Example:
      llm-fsm conversations
      llm-fsm conversations --store redis://localhost:6379/0 --user alice
      llm-fsm conversations --usage
    """
    from llm_fsm.stores import open_store

    opened = open_store(_store_url(store))
    if user_id is not None and room_id is not None:
        summaries = opened.list(user_id=user_id, room_id=room_id)
    else:  # the stores match an exact (user, room) pair; one of the two filters every pair that has it
        summaries = [
            s
            for s in opened.list()
            if (user_id is None or s.user_id == user_id) and (room_id is None or s.room_id == room_id)
        ]
    # the stores' summaries do not carry the mode (it is not a column of the SQL stores): each record is read
    instances = [opened.load(s.conversation_id, user_id=s.user_id, room_id=s.room_id) for s in summaries]
    usages = [instance.usage for instance in instances] if usage else None
    modes = [instance.mode for instance in instances]
    for line in conversation_lines(summaries, usages, modes):
        click.echo(line)


def conversation_lines(
    summaries: Iterable[Any], usages: Sequence[Any] | None = None, modes: Sequence[str] | None = None
) -> list[str]:
    """A table: id, status, state, user, room, (calls, tokens, cost,) (mode,) definition; ``-`` for no user or room.

    mode: ``bot``, or ``human`` while a person has the conversation (handed off).
    """
    summaries = list(summaries)
    rows: list[tuple[Any, ...]] = [
        (s.conversation_id, s.status, s.current_state, s.user_id or "-", s.room_id or "-", s.fsm_id) for s in summaries
    ]
    if not rows:
        return []
    header: tuple[str, ...] = ("conversation", "status", "state", "user", "room", "definition")
    if usages is not None:
        header = (*header[:5], "calls", "tokens", "cost", header[5])
        rows = [(*row[:5], u.calls, f"{u.tokens:,}", _cost(u), row[5]) for row, u in zip(rows, usages, strict=True)]
    if modes is not None:
        header = (*header[:-1], "mode", header[-1])
        rows = [(*row[:-1], mode, row[-1]) for row, mode in zip(rows, modes, strict=True)]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    return [
        "  ".join(str(value).ljust(width) for value, width in zip(row[:-1], widths, strict=True)) + "  " + str(row[-1])
        for row in [header, *rows]
    ]


def _cost(usage: Any) -> str:
    """Dollars of the calls litellm has a price for; '?' marks calls it has none for (local models)."""
    if usage.calls and usage.calls_without_price == usage.calls:
        return "?"
    return f"${usage.cost_usd:.4f}" + ("+?" if usage.calls_without_price else "")


__all__ = [
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
