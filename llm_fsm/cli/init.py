"""``llm-fsm init NAME``: a new definition and its conversation script, lint-clean and passing, to start from."""

from __future__ import annotations

import re
from pathlib import Path

import click

from llm_fsm.cli._app import EXIT_UNREADABLE, GuardedCommand, _fail

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

DEFINITION = """\
# {name}: a definition to start from (made by `llm-fsm init`).
# Format reference: docs/definition-format.md; check it with `llm-fsm lint {name}.yaml`.
name: {title}
description: >-
  Asks for the user's name and email address, reads them back, and saves them
  once the user confirms. Replace the states with your own conversation.
initial_state: ask_name
version: "3.0"
persona: A friendly assistant who keeps every reply to one or two sentences.

# What each value may be: every write is checked before it is stored, so the
# guards below only ask whether a key is recorded. A refused value is not
# stored and the reply asks again (invalid_message). Reference: "Declared
# context keys" in docs/definition-format.md.
context_keys:
  name:
    type: string
    max_length: 100
    description: The user's name, as they said it
  email:
    type: string
    format: email
    description: The user's email address
    display_name: email address
    invalid_message: An email address has an @ and a domain, like ada@example.com.
additional_keys: false   # the model may write no other key (a typo'd key is refused, not stored)

states:
  ask_name:
    id: ask_name
    description: Asking for the user's name
    purpose: Greet the user and ask for their name
    required_context_keys: [name]
    transitions:
      - target_state: ask_email
        description: The user gave their name
        conditions:
          - description: A name is recorded
            requires_context_keys: [name]

  ask_email:
    id: ask_email
    description: Asking for the user's email address
    purpose: Ask for the user's email address
    required_context_keys: [email]
    transitions:
      - target_state: confirm
        description: The user gave an email address
        conditions:
          - description: A valid email address is recorded
            requires_context_keys: [email]

  confirm:
    id: confirm
    description: Reading the details back
    purpose: Read the name and email address back and ask the user to confirm them
    confirmation:
      keys: [name, email]
      on_yes: done
    transitions:
      - target_state: done
        description: The user confirmed the details

  done:
    id: done
    description: The details are saved
    purpose: Thank the user by name and say goodbye
    transitions: []
"""

SCRIPT = """\
# Conversation scripts for {name}.yaml: `llm-fsm test {name}.yaml --min-coverage 100`.
# Each turn: what the user says, what the model answers (offline runs), what must hold after it.
# Format reference: docs/testing.md.
definition: ../{name}.yaml
opening: "Hi! I'll take your details. What's your name?"
conversations:
  - name: a typo in the email, then confirmed
    turns:
      - user: "I'm Ada Lovelace"
        model:
          target_state: ask_email
          context_update: {{name: Ada Lovelace}}
          message: "Thanks, Ada! What's your email address?"
        expect: {{state: ask_email, context: {{name: Ada Lovelace}}}}

      - user: "ada.example.com"
        model:
          target_state: confirm
          context_update: {{email: ada.example.com}}
          message: "Ada Lovelace, ada.example.com. Is that right?"
        # Not an email address (context_keys): the value is refused, not stored, so the guard
        # does not hold; the engine asks the model again with the key's invalid_message.
        regenerate: "That address has no @ in it. Could you check it?"
        expect:
          state: ask_email
          verdict: stay_rejected
          refused: {{email: format}}
          context: {{email: {{absent: true}}}}
          reply: {{regex: "no @"}}

      - user: "Sorry: ada@example.com"
        model:
          target_state: confirm
          context_update: {{email: ada@example.com}}
          message: "Ada Lovelace, ada@example.com. Is that right?"
        expect: {{state: confirm, context: {{email: ada@example.com}}}}

      - user: "Yes"
        model: {{intent: confirm, message: "Saved. Thank you, Ada, and goodbye!"}}
        expect: {{state: done, ended: true}}

  - name: corrects the name at the read-back
    turns:
      - user: "Bob"
        model: {{target_state: ask_email, context_update: {{name: Bob}}, message: "Hi Bob! Your email address?"}}
        expect: {{state: ask_email}}

      - user: "bob@example.com"
        model:
          target_state: confirm
          context_update: {{email: bob@example.com}}
          message: "Bob, bob@example.com. Is that right?"
        expect: {{state: confirm}}

      - user: "My name is Robert, actually"
        model:
          intent: deny
          context_update: {{name: Robert}}
          message: "Robert, bob@example.com. Is that right now?"
        expect: {{state: confirm, context: {{name: Robert}}, ended: false}}

      - user: "Yes, thanks"
        model: {{intent: confirm, message: "Saved. Goodbye, Robert!"}}
        expect: {{state: done, ended: true, context: {{name: Robert, email: bob@example.com}}}}
"""


def files_for(name: str, directory: Path) -> dict[Path, str]:
    """The files ``init`` writes, with their text."""
    title = " ".join(part.capitalize() for part in re.split(r"[_-]+", name) if part)
    return {
        directory / f"{name}.yaml": DEFINITION.format(name=name, title=title),
        directory / "conversations" / f"{name}.conv.yaml": SCRIPT.format(name=name),
    }


@click.command("init", cls=GuardedCommand)
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder to write into (created when missing).",
)
@click.pass_context
def init_command(ctx: click.Context, name: str, directory: Path) -> None:
    """Write a new definition NAME.yaml and its conversation script, to start from.

    The definition declares its keys (a name, an email address the engine
    checks before storing it), asks for them (guarded transitions), reads them
    back in a confirmation step and ends. Its script,
    conversations/NAME.conv.yaml, takes every transition, so both lint and
    test clean; change them together. Existing files are never overwritten.

    \b
    Example:
      llm-fsm init signup
      llm-fsm lint signup.yaml && llm-fsm test signup.yaml --min-coverage 100
      llm-fsm chat signup.yaml --model scripted:conversations/signup.conv.yaml
    """
    if not NAME_RE.match(name):
        _fail(f"{name!r} is not a usable name: start with a letter; letters, digits, _ and - only (at most 64)")
        ctx.exit(EXIT_UNREADABLE)
    files = files_for(name, directory)
    existing = [path for path in files if path.exists()]
    if existing:
        _fail(f"not overwriting {', '.join(str(p) for p in existing)}; choose another name or --dir")
        ctx.exit(EXIT_UNREADABLE)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as handle:  # "x": never replace a file created meanwhile
            handle.write(text)
        click.echo(f"wrote {path}")
    definition, script = (str(path) for path in files)
    click.echo("")
    click.echo("next:")
    click.echo(f"  llm-fsm lint {definition}")
    click.echo(f"  llm-fsm test {definition} --min-coverage 100")
    click.echo(f"  llm-fsm graph {definition}")
    click.echo(f"  llm-fsm chat {definition} --model scripted:{script}   # or --model gpt-4o-mini, local, ...")


__all__ = ["files_for", "init_command"]
