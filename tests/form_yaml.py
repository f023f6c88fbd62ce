"""A small three-state form in YAML, shared by the conversation-script tests."""

FORM = """\
name: Form
description: name, then email, then done
initial_state: ask_name
states:
  ask_name:
    id: ask_name
    description: asking the name
    purpose: get the name
    required_context_keys: [name]
    transitions:
      - target_state: ask_email
        description: name given
        conditions:
          - description: a name is recorded
            requires_context_keys: [name]
  ask_email:
    id: ask_email
    description: asking the email
    purpose: get the email
    required_context_keys: [email]
    transitions:
      - target_state: done
        description: email given
        conditions:
          - description: the email has an @
            requires_context_keys: [email]
            logic: {in: ["@", {var: email}]}
  done:
    id: done
    description: finished
    purpose: say goodbye
    transitions: []
"""
