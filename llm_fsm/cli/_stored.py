"""``llm-fsm explain``, ``trace`` and ``conversations``: reading stored conversations without running one."""

from __future__ import annotations

import json

import click

from llm_fsm.cli._app import GuardedCommand
from llm_fsm.cli._show import conversation_lines, explain_lines, explain_text, provenance_lines, trace_lines
from llm_fsm.cli._store_options import Owner, _looking_up, _owner_options, _store_option, _store_url


@click.command("explain", cls=GuardedCommand)
@click.argument("conversation_id")
@click.option("--turn", type=int, default=-1, show_default=True, help="Turn index (1-based), or negative from the end.")
@_store_option
@_owner_options
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--provenance",
    "provenance",
    is_flag=True,
    help="Instead of a turn: where each stored value came from, the words it was read from quoted.",
)
@click.option("--key", default=None, help="With --provenance: this key (and the paths under it) only.")
def explain_command(
    conversation_id: str,
    turn: int,
    store: str | None,
    user_id: str | None,
    room_id: str | None,
    output_format: str,
    provenance: bool,
    key: str | None,
) -> None:
    """Show why the engine decided what it did in one turn of a stored conversation.

    The message, what the model proposed and wrote (each value stored or refused, and why), each transition
    considered with its conditions, the verdict, the actions, the model calls and the reply; --format json
    prints the whole record. --provenance shows instead where each value came from: the model (and the words
    of the user's it read, quoted with the words in «»), an action, an operator, a hook, a sub-flow, a migration.

    \b
    Example:
      llm-fsm explain 6f1c2a3e-… --turn 3
      llm-fsm explain 6f1c2a3e-… --format json --user alice --room support
      llm-fsm explain 6f1c2a3e-… --provenance --key income
    """
    from llm_fsm.manager import FSMManager
    from llm_fsm.stores import open_store

    owner = Owner(user_id, room_id)
    manager = FSMManager(store=open_store(_store_url(store)))
    if provenance:
        with _looking_up(conversation_id, owner):
            values = manager.provenance(conversation_id, key, **owner.kwargs)
        if output_format == "json":
            shown = {path: value.model_dump(mode="json") for path, value in values.items()}
            click.echo(json.dumps(shown, indent=2, ensure_ascii=False))
            return
        for line in provenance_lines(values) or ["no value stored"]:
            click.echo(line)
        return
    with _looking_up(conversation_id, owner):
        record = manager.explain(conversation_id, turn, **owner.kwargs)
    if output_format == "json":
        click.echo(explain_text(record))
        return
    for line in explain_lines(record, conversation_id):
        click.echo(line)


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


@click.command("conversations", cls=GuardedCommand)
@_store_option
@click.option("--user", "user_id", default=None, help="Only this user's conversations (in any room).")
@click.option("--room", "room_id", default=None, help="Only this room's conversations (of any user).")
@click.option(
    "--usage", is_flag=True, help="Add model calls, tokens and cost of each conversation (loads every one listed)."
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="At most this many; the next page's cursor is printed."
)
@click.option("--cursor", default=None, help="The cursor a --limit listing printed: list the page after it.")
def conversations_command(
    store: str | None, user_id: str | None, room_id: str | None, usage: bool, limit: int | None, cursor: str | None
) -> None:
    """List stored conversations, newest first, with the user and room each belongs to.

    A stored conversation answers only to the user and room it was started
    with: pass the same --user and --room to chat --resume, explain and trace.
    With --limit, a page: the command to list the next one is printed on
    stderr (nothing when this page is the last).

    \b
    Example:
      llm-fsm conversations
      llm-fsm conversations --store redis://localhost:6379/0 --user alice
      llm-fsm conversations --limit 50
      llm-fsm conversations --limit 50 --cursor eyJ0Ijox...
      llm-fsm conversations --usage
    """
    from llm_fsm.errors import InvalidCursorError
    from llm_fsm.stores import default_store_url, open_store, redact_url
    from llm_fsm.stores._paging import page_of

    opened = open_store(_store_url(store))
    try:
        if room_id is not None and user_id is None:  # no store indexes a room across users: read all, then filter
            page = page_of([s for s in opened.list() if s.room_id == room_id], limit, cursor)
        elif user_id is not None and room_id is None:
            page = opened.list_page(user_id=user_id, all_rooms=True, limit=limit, cursor=cursor)  # type: ignore[attr-defined]
        else:
            page = opened.list_page(user_id=user_id, room_id=room_id, limit=limit, cursor=cursor)  # type: ignore[attr-defined]
    except InvalidCursorError as exc:
        raise click.BadParameter(str(exc), param_hint="--cursor") from None
    summaries = page.items
    if not summaries and cursor is None:  # a mistyped --store or --user must not read as a silent empty list
        whose = f" for user {user_id!r}" if user_id is not None else ""
        whose += f" in room {room_id!r}" if room_id is not None else ""
        click.echo(f"no conversations in {redact_url(_store_url(store) or default_store_url())}{whose}", err=True)
        return
    # the stores' summaries do not carry the mode (it is not a column of the SQL stores): each record is read
    instances = [opened.load(s.conversation_id, user_id=s.user_id, room_id=s.room_id) for s in summaries]
    usages = [instance.usage for instance in instances] if usage else None
    modes = [instance.mode for instance in instances]
    for line in conversation_lines(summaries, usages, modes):
        click.echo(line)
    if page.next_cursor is not None:
        click.echo(f"next page: --cursor {page.next_cursor}", err=True)
