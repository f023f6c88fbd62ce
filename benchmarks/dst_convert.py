"""A Schema-Guided Dialogue (SGD) service schema as an llm_fsm definition, with or without key declarations.

Reads any folder in SGD's format (``schema.json``: a list of services;
``dialogues.json``: a list of dialogues). The dataset is CC BY-SA 4.0: the
definitions derived here are written to a temporary folder by ``dst.py`` and
never kept in the repository.

The shape of a converted service:

- ``start``: the first user turn lands here; it lists every slot the user can
  give (any intent's required or optional slots), because a first message often
  names the intent *and* some of its slots ("a table for two in Sunnyvale").
- one state per intent (``FindRestaurants`` -> ``find_restaurants``): its
  required slots, then its optional ones, as ``required_context_keys`` (the
  format has no optional keys; the purpose says which are optional). Every
  intent state can move to every other one (users switch from searching to
  booking) and back to ``start``, so none is terminal and a dialogue never ends
  early; the definition is not ``cancellable`` for the same reason. A terminal
  state ``over`` is reachable from ``start`` only through a condition that never holds (the
  original refuses a definition without a reachable terminal state).
- with declarations, a definition-level ``context_keys`` block: each slot's
  description and display name; a date or time slot (by its name) is declared
  ``format: date`` or ``format: time`` and ``grounded: true``; categorical slots become enums of their
  ``possible_values`` (plus SGD's special value ``dontcare``) with synonyms a
  user would say (yes/no for True/False, number words for digits, "any" for
  dontcare); and ``additional_keys: false``, so a key that is no slot of the
  service is refused. Without declarations the keys are names only, as
  definitions are written today.
- ``dontcare: true`` (the key may take "dontcare", grounded only by an indifference the user expressed) on the
  slots SGD lets be dontcare: categorical ones, dates and times, and those an intent lists as optional with the
  default "dontcare".
- with ``aliases`` (the default), free-text ``synonyms`` a definition author for these services would declare:
  nicknames and airport codes of US cities on city slots, dishes and styles of food on food-category slots
  (``TEXT_ALIASES``; written after seeing the benchmark's misses, see there). ``aliases=False`` gives the
  figure without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DONTCARE = "dontcare"
"""SGD's value for "the user has no preference"; any slot may take it."""

START = "start"
OVER = "over"

_NEVER = {
    "target_state": OVER,
    "description": "The dialogue has ended (the application decides)",
    "priority": 3,
    "conditions": [{"description": "Never true", "logic": {"==": [1, 2]}}],
}
"""The original refuses a definition without a reachable terminal state; this makes one reachable, and closed."""

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_DONTCARE_SYNONYMS = ("any", "anything", "don't care", "do not care", "doesn't matter", "no preference", "whatever")
_BOOLEAN_SYNONYMS = {"True": ("yes", "yeah", "sure"), "False": ("no", "nope")}

# Free-text synonyms of the kind a definition author for these services would declare. DISCLOSURE: written after
# seeing the misses of `dst.py --oracle canonical` (city nicknames, airport codes, dishes for a cuisine), then
# widened to US cities and food styles generally, not only the ones seen. `aliases=False` gives the figure
# without them. No alias shortens a name (a restaurant's first word is not the restaurant: lexical grounding of
# partial names stays strict), and no airport code that is an English word (SEA, DEN, SAT, MIA, FAT) is one,
# since an alias the user "said" grounds its value.
TEXT_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "city": {
        "New York": ("NYC", "NY", "New York City", "the Big Apple", "JFK", "LGA"),
        "Los Angeles": ("LA", "L.A.", "LAX"),
        "San Francisco": ("SF", "SFO", "San Fran", "Frisco"),
        "Philadelphia": ("Philly", "PHL"),
        "Las Vegas": ("Vegas", "LV"),
        "Washington D.C.": ("DC", "D.C.", "Washington DC", "District of Columbia", "DCA", "IAD"),
        "Chicago": ("Chi-town", "Chitown", "ORD", "MDW"),
        "San Diego": ("SD",),
        "San Jose": ("SJ", "SJC"),
        "Sacramento": ("Sacto", "SMF"),
        "Boston": ("Beantown", "BOS"),
        "New Orleans": ("NOLA", "the Big Easy", "MSY"),
        "Atlanta": ("ATL", "Hotlanta"),
        "Seattle": ("SEA-TAC",),
        "Portland": ("PDX",),
        "Detroit": ("Motor City", "DTW"),
        "Houston": ("H-Town", "IAH"),
        "Dallas": ("DFW", "Big D"),
        "Phoenix": ("PHX",),
        "Salt Lake City": ("Salt Lake", "SLC"),
        "St. Louis": ("Saint Louis", "St Louis", "STL"),
        "Minneapolis": ("MSP",),
        "Kansas City": ("KC", "KCMO"),
        "Indianapolis": ("Indy",),
        "Cincinnati": ("Cincy", "CVG"),
        "Pittsburgh": ("Steel City",),
        "Oklahoma City": ("OKC",),
        "Albuquerque": ("ABQ",),
        "Baltimore": ("BWI", "Charm City"),
        "Orlando": ("MCO",),
        "Nashville": ("Music City", "BNA"),
        "Charlotte": ("CLT",),
        "Honolulu": ("HNL",),
    },
    "food": {
        "Italian": ("pizza", "pasta", "pizza and pasta", "pizzeria", "trattoria", "spaghetti", "lasagna"),
        "American": ("Southern", "diner", "barbecue", "BBQ", "burgers", "burger", "steakhouse", "soul food"),
        "Japanese": ("sushi", "ramen", "izakaya", "teriyaki", "tempura"),
        "Vietnamese": ("pho", "banh mi"),
        "Seafood": ("fish", "lobster", "crab", "oysters", "shellfish", "shrimp"),
        "Mexican": ("tacos", "taco", "burritos", "burrito", "Tex-Mex", "taqueria"),
        "Chinese": ("dim sum", "dumplings", "Szechuan", "Sichuan", "Cantonese"),
        "Indian": ("curry", "tandoori", "biryani"),
        "Mediterranean": ("falafel", "kebab", "hummus"),
        "Greek": ("gyros", "gyro", "souvlaki"),
        "Breakfast": ("brunch", "pancakes"),
    },
}


@dataclass(frozen=True)
class Slot:
    name: str
    description: str
    is_categorical: bool
    possible_values: tuple[str, ...] = ()
    dontcare_default: bool = False
    """Some intent lists the slot as optional with the default "dontcare"."""


@dataclass(frozen=True)
class Intent:
    name: str
    description: str
    required_slots: tuple[str, ...]
    optional_slots: tuple[str, ...]


@dataclass(frozen=True)
class Service:
    name: str
    description: str
    slots: tuple[Slot, ...]
    intents: tuple[Intent, ...]

    def slot(self, name: str) -> Slot:
        for slot in self.slots:
            if slot.name == name:
                return slot
        raise KeyError(f"{self.name} has no slot {name!r}")

    @property
    def user_slots(self) -> list[str]:
        """Slots a user can give: any intent's required or optional ones, in the schema's order."""
        wanted = {s for i in self.intents for s in (*i.required_slots, *i.optional_slots)}
        return [s.name for s in self.slots if s.name in wanted]


@dataclass(frozen=True)
class UserTurn:
    """One USER turn, the SYSTEM utterance that answers it, and the dialogue state after it."""

    utterance: str
    system_reply: str
    active_intent: str
    slot_values: Mapping[str, tuple[str, ...]]
    canonical: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each slot value's canonical form, as SGD records it in the dialogue's actions (``canonical_values``:
    ``2019-03-08`` for "next Friday", ``18:15`` for "a quarter past six", "San Francisco" for "SFO"), for
    the slots of ``slot_values`` whose forms have one."""

    @property
    def references(self) -> dict[str, tuple[str, ...]]:
        """What counts as right for each slot: the forms the state lists, and their canonical forms."""
        return {k: tuple(dict.fromkeys((*v, *self.canonical.get(k, ())))) for k, v in self.slot_values.items()}


@dataclass(frozen=True)
class Dialogue:
    dialogue_id: str
    service: str
    turns: tuple[UserTurn, ...] = field(default=())


class DatasetError(ValueError):
    """The folder is not in SGD's format (or holds a dialogue this benchmark cannot replay); the message says why."""


def load_services(folder: Path) -> dict[str, Service]:
    raw = _read_json(folder / "schema.json")
    services: dict[str, Service] = {}
    for item in raw:
        optional_dontcare = {
            name
            for i in item["intents"]
            for name, default in dict(i.get("optional_slots") or {}).items()
            if default == DONTCARE
        }
        slots = tuple(
            Slot(
                name=s["name"],
                description=s.get("description", ""),
                is_categorical=bool(s.get("is_categorical")),
                possible_values=tuple(s.get("possible_values") or ()),
                dontcare_default=s["name"] in optional_dontcare,
            )
            for s in item["slots"]
        )
        intents = tuple(
            Intent(
                name=i["name"],
                description=i.get("description", ""),
                required_slots=tuple(i.get("required_slots") or ()),
                optional_slots=tuple(i.get("optional_slots") or {}),
            )
            for i in item["intents"]
        )
        services[item["service_name"]] = Service(item["service_name"], item.get("description", ""), slots, intents)
    return services


def load_dialogues(folder: Path, services: Mapping[str, Service]) -> list[Dialogue]:
    """Single-service dialogues as user turns; multi-service dialogues are refused (one definition per run)."""
    dialogues: list[Dialogue] = []
    for item in _read_json(folder / "dialogues.json"):
        names = item.get("services") or []
        if len(names) != 1 or names[0] not in services:
            raise DatasetError(f"dialogue {item.get('dialogue_id')}: one service of schema.json expected, got {names}")
        turns: list[UserTurn] = []
        raw_turns = item["turns"]
        canonical = _canonical_forms(raw_turns)
        for index, turn in enumerate(raw_turns):
            if turn["speaker"] != "USER":
                continue
            following = raw_turns[index + 1] if index + 1 < len(raw_turns) else None
            reply = following["utterance"] if following and following["speaker"] == "SYSTEM" else ""
            frame = next(f for f in turn["frames"] if f["service"] == names[0])
            state = frame["state"]
            values = {k: tuple(v) for k, v in state["slot_values"].items()}
            turns.append(
                UserTurn(
                    utterance=turn["utterance"],
                    system_reply=reply,
                    active_intent=state.get("active_intent", "NONE"),
                    slot_values=values,
                    canonical={
                        slot: forms
                        for slot, listed in values.items()
                        if (forms := tuple(dict.fromkeys(c for v in listed if (c := canonical.get((slot, v))))))
                    },
                )
            )
        dialogues.append(Dialogue(item["dialogue_id"], names[0], tuple(turns)))
    return dialogues


def _canonical_forms(turns: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(slot, value as said) -> its canonical form, from every action of the dialogue (user's and system's)."""
    forms: dict[tuple[str, str], str] = {}
    for turn in turns:
        for frame in turn.get("frames") or ():
            for action in frame.get("actions") or ():
                said, canonical = action.get("values") or (), action.get("canonical_values") or ()
                for value, form in zip(said, canonical, strict=False):
                    forms.setdefault((action.get("slot", ""), value), form)
    return forms


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def state_id(intent: str) -> str:
    """``FindRestaurants`` -> ``find_restaurants``: the state of an intent."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", intent).lower()


def _words(name: str) -> str:
    return name.replace("_", " ")


def _join(names: Sequence[str]) -> str:
    return ", ".join(_words(n) for n in names) or "nothing"


def value_format(slot: Slot) -> str | None:
    """``date`` or ``time`` for a free-form slot that holds one (by its name: SGD's ``date``, ``leaving_date``,
    ``time``, ``leaving_time``, ...; their canonical values are ISO dates and 24-hour times), else None."""
    name = slot.name.lower()
    if name == "date" or name.endswith("_date"):
        return "date"
    if name == "time" or name.endswith("_time"):
        return "time"
    return None


# Categorical values as people name them, by slot, of the same kind and with the same DISCLOSURE as TEXT_ALIASES
# (written after seeing `dst.py --engines extractors` miss them): a definition author lists what their users say
# for a value ("a concert" is Music, "a shared ride" is True). A negated mention ("not a shared ride") is no
# mention for the engine's extractors, so "shared" naming True is safe from "I don't want a shared ride".
CATEGORICAL_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "category": {
        "Music": ("concert", "concerts", "band", "gig", "live music"),
        "Sports": ("game", "games", "match", "sports", "sport", "baseball", "basketball", "football", "soccer"),
    },
    "has_vegetarian_options": {"True": ("vegetarian", "vegetarians", "vegan", "veggie")},
    "has_seating_outdoors": {"True": ("outdoor", "outdoors", "patio")},
    "shared_ride": {"True": ("shared", "sharing"), "False": ("private",)},
    "price_range": {
        "cheap": ("inexpensive", "affordable", "budget", "low cost", "cheaply"),
        "moderate": ("moderately priced", "reasonably priced", "reasonable", "mid-range", "average priced"),
        "pricey": ("expensive", "upscale", "fancy", "high-end"),
        "ultra high-end": ("luxury", "very expensive", "ultra high end"),
    },
}


def text_aliases(slot: Slot) -> dict[str, str]:
    """The free-text synonyms of a slot, by what its description says it holds (a city, a kind of food)."""
    described = slot.description.casefold()
    aliases: dict[str, str] = {}
    for topic, table in TEXT_ALIASES.items():
        if re.search(rf"\b{topic}\b", described):
            aliases.update({alias: value for value, spoken in table.items() for alias in spoken})
    return aliases


def declaration(slot: Slot, *, aliases: bool = True) -> dict[str, Any]:
    """The ``context_keys`` entry of one slot (``aliases``: with the free-text synonyms of ``TEXT_ALIASES``)."""
    declared: dict[str, Any] = {"type": "string", "display_name": _words(slot.name), "description": slot.description}
    if not slot.is_categorical:
        typed = value_format(slot)
        if typed is not None:
            # a date or a time: stored in one form, and grounded by what the user's words mean
            declared.update({"format": typed, "grounded": True})
        if typed is not None or slot.dontcare_default:
            declared["dontcare"] = True
        spoken = text_aliases(slot) if aliases and typed is None else {}
        if spoken:
            declared["synonyms"] = spoken
        return declared  # free text: grounded by default in the engine
    values = list(slot.possible_values)
    synonyms: dict[str, str] = {}
    for value in values:
        if value.isdigit() and int(value) < len(_NUMBER_WORDS):
            synonyms[_NUMBER_WORDS[int(value)]] = value
        for word in _BOOLEAN_SYNONYMS.get(value, ()):
            synonyms[word] = value
    if aliases:
        for value, spoken in CATEGORICAL_ALIASES.get(slot.name, {}).items():
            synonyms.update({word: value for word in spoken if value in values})
    if DONTCARE not in values:
        values.append(DONTCARE)
    for word in _DONTCARE_SYNONYMS:
        synonyms.setdefault(word, DONTCARE)
    declared["enum"] = values
    declared["synonyms"] = synonyms
    declared["dontcare"] = True  # listed in the enum too, so a model's "any" is read as it; grounded by indifference
    declared["description"] = f'{slot.description}, or "{DONTCARE}" when the user has no preference'
    return declared


def convert(service: Service, *, declarations: bool, aliases: bool = True) -> dict[str, Any]:
    """The definition of one service, as a JSON-ready document (``aliases``: see ``declaration``)."""
    states: dict[str, Any] = {}
    intent_transitions = [
        {"target_state": state_id(i.name), "description": f"The user wants to: {i.description}", "priority": 1}
        for i in service.intents
    ]
    states[START] = {
        "id": START,
        "description": "Finding out what the user wants",
        "purpose": (
            "Find out which of these the user wants: "
            + "; ".join(i.description for i in service.intents)
            + ". Record every detail the user gives."
        ),
        "required_context_keys": service.user_slots,
        "transitions": [*intent_transitions, _NEVER],
    }
    for intent in service.intents:
        own = state_id(intent.name)
        states[own] = {
            "id": own,
            "description": intent.description,
            "purpose": (
                f"{intent.description}. Collect {_join(intent.required_slots)}"
                + (f"; optionally {_join(intent.optional_slots)}" if intent.optional_slots else "")
                + ". Record every detail the user gives or accepts, and any change the user makes."
            ),
            "required_context_keys": list(dict.fromkeys((*intent.required_slots, *intent.optional_slots))),
            "transitions": [
                *(t for t in intent_transitions if t["target_state"] != own),
                {"target_state": START, "description": "The user wants something else", "priority": 2},
            ],
        }
    states[OVER] = {
        "id": OVER,
        "description": "The dialogue is over",
        "purpose": "Say goodbye",
        "transitions": [],
    }
    document: dict[str, Any] = {
        "name": f"SGD {service.name}",
        "description": service.description,
        "initial_state": START,
        "version": "3.0",
        "persona": f"An assistant of this service: {service.description}.",
        "cancellable": False,  # "cancel" read into a user turn would end the conversation before the dialogue does
        "states": states,
    }
    if declarations:
        document["additional_keys"] = False
        document["context_keys"] = {
            name: declaration(service.slot(name), aliases=aliases) for name in service.user_slots
        }
    return document


def write_definitions(
    services: Mapping[str, Service], folder: Path, *, aliases: bool = True
) -> dict[tuple[str, bool], Path]:
    """Both variants of every service as JSON files (the original reads JSON only); ``aliases``: see
    ``declaration``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[tuple[str, bool], Path] = {}
    for name, service in services.items():
        for declared in (False, True):
            path = folder / f"{name}{'.declared' if declared else ''}.json"
            document = convert(service, declarations=declared, aliases=aliases)
            path.write_text(json.dumps(document, indent=1), encoding="utf-8")
            paths[(name, declared)] = path
    return paths
