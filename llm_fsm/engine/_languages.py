"""A conversation's language: which it is, how the model is told, and the engine's own sentences in it.

The language is given at start (``start_conversation(..., language="de")``) or switched by the definition's
``language_key``: while that key holds one of the declared languages, it is the conversation's language (whoever
wrote it: the model from "können wir Deutsch sprechen?", the application, an operator), and the turn keeps it in
``FSMInstance.language`` so it outlives the key (a sub-flow does not see its parent's context). Without either, the
definition's default language.

The engine's instructions to the model stay in English (models read them best); what the engine asks the model to
*say* (the cancel question, the read-back question) is quoted from ``SENTENCES`` in the conversation's language,
and the prompt tells the model which language to reply in.
"""

from __future__ import annotations

from llm_fsm.definition._languages import pick, primary
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import UnknownLanguageError

SENTENCES: dict[str, dict[str, str]] = {
    "en": {
        "confirm_question": "Is everything correct?",
        "cancel_question": "Do you really want to cancel?",
        "cancelled": "Cancelled. How else can I help?",
        "what_to_change": "What would you like to change?",
    },
    "de": {
        "confirm_question": "Ist alles richtig so?",
        "cancel_question": "Möchten Sie wirklich abbrechen?",
        "cancelled": "Abgebrochen. Wie kann ich sonst helfen?",
        "what_to_change": "Was möchten Sie ändern?",
    },
}
"""The sentences the engine asks the model to say, per language the library ships (English for any other)."""

LANGUAGE_NAMES = {
    "ar": "Arabic",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "pt": "Portuguese",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}
"""Names the prompt uses for a language (the tag alone for others: models know BCP 47 tags too)."""


def check_language(definition: FSMDefinition, language: str | None) -> str | None:
    """``language`` when ``definition`` declares it (None stays None: the default language applies); otherwise
    UnknownLanguageError, naming the declared ones."""
    if language is None or language in (definition.languages or ()):
        return language
    declared = ", ".join(definition.languages or ()) or "none (the definition has no `languages`)"
    raise UnknownLanguageError(f"language {language!r} is not one of {definition.name!r}'s languages: {declared}")


def conversation_language(definition: FSMDefinition, instance: FSMInstance) -> str | None:
    """The language the conversation is held in now (None: the definition declares no languages and none was
    given)."""
    switched = _switched(definition, instance)
    return switched or instance.language or definition.language


def follow_language(definition: FSMDefinition, instance: FSMInstance) -> None:
    """Keep a switch the ``language_key`` made, so it lasts when the key is not in sight (a sub-flow, a restart)."""
    switched = _switched(definition, instance)
    if switched is not None and switched != instance.language:
        instance.language = switched


def _switched(definition: FSMDefinition, instance: FSMInstance) -> str | None:
    key = definition.language_key
    if key is None:
        return None
    value = instance.context.data.get(key)
    return value if isinstance(value, str) and value in (definition.languages or ()) else None


def sentence(name: str, language: str | None) -> str:
    """One of the engine's sentences in ``language`` (its primary language's, else English)."""
    table = SENTENCES.get(language or "en") or SENTENCES.get(primary(language or "en")) or SENTENCES["en"]
    return table[name]


def language_name(language: str) -> str:
    """How the prompt names a language: ``German (de)``."""
    name = LANGUAGE_NAMES.get(primary(language))
    return f"{name} ({language})" if name else language


def reply_language(definition: FSMDefinition, instance: FSMInstance, *, confirming: bool) -> str | None:
    """The prompt's instruction on the reply's language (None when the conversation has none)."""
    language = conversation_language(definition, instance)
    if language is None:
        return None
    told = f"Write your message in {language_name(language)}, whatever language the user writes in."
    if definition.language_key and definition.languages:
        told += (
            f" When the user asks to be served in another of these languages ({', '.join(definition.languages)}), "
            f"put it in context_update as {definition.language_key} and reply in it."
        )
    if confirming:
        told += f' After reading the values back, ask: "{sentence("confirm_question", language)}"'
    return told


def label(definition: FSMDefinition, instance: FSMInstance, key: str) -> str:
    """How a key is named to the user in the conversation's language."""
    found = definition.declaration_for(key)
    if found is None:
        return key.replace("_", " ")
    return found[1].label(key, conversation_language(definition, instance), definition.language)


def invalid_message(definition: FSMDefinition, instance: FSMInstance, key: str) -> str | None:
    """A key's ``invalid_message`` in the conversation's language."""
    found = definition.declaration_for(key)
    if found is None:
        return None
    return pick(found[1].invalid_message, conversation_language(definition, instance), definition.language)


__all__ = [
    "LANGUAGE_NAMES",
    "SENTENCES",
    "check_language",
    "conversation_language",
    "follow_language",
    "invalid_message",
    "label",
    "language_name",
    "reply_language",
    "sentence",
]
