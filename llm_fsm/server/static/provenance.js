// Where each value of the open conversation came from (GET /v1/conversations/{id}/provenance): who wrote it and,
// for a value read from what was said, the message with the words marked. Text goes in as text nodes (dom.js):
// a quoted message can hold markup, and it must show as typed.

import { el, show } from "./dom.js";
import { scrolling } from "./explain.js";

// Who wrote the value, in words: the model, an action (its call), an operator (who), a hook, a sub-flow ...
export function originText(origin) {
  if (!origin) return "unknown (stored before origins were kept)";
  const when = origin.turn === 0 ? "at the opening" : origin.turn ? `turn ${origin.turn}` : "between turns";
  const by = {
    model: origin.source === "assistant" ? "the model, from an offer the user accepted" : "the model",
    extractor: `the extractors (${origin.rule ?? "fill"})`,
    application: `the application (${origin.hook ?? "update_context"})`,
    action: `action ${origin.call ?? ""}`.trim(),
    operator: `operator ${origin.actor ?? ""}`.trim(),
    flow: `flow ${origin.flow ?? ""}`.trim(),
    migration: "a migration",
  }[origin.by] ?? origin.by;
  const rule = origin.by === "model" && origin.rule ? ` · read as ${origin.rule}` : "";
  return `${by}${rule} · ${when}`;
}

// The quoted message with the words in a <mark>; nothing when the value was not read from words.
export function quoted(quote) {
  if (!quote) return "";
  return el(
    "span",
    { className: "quote", dataset: { message: quote.message } },
    quote.before,
    el("mark", {}, quote.inside),
    quote.after,
  );
}

export function renderProvenance(values) {
  const rows = Object.values(values ?? {});
  if (!rows.length) return el("p", { className: "note" }, "No value stored.");
  return scrolling(
    el(
      "table",
      { className: "provenance" },
      el("thead", {}, el("tr", {}, ["key", "value", "from", "words"].map((h) => el("th", {}, h)))),
      el(
        "tbody",
        {},
        rows.map((row) =>
          el(
            "tr",
            { dataset: { key: row.key, by: row.origin?.by ?? "unknown" } },
            el("td", { className: "id" }, row.key),
            el("td", { className: "value" }, show(row.value)),
            el("td", {}, originText(row.origin)),
            el("td", {}, quoted(row.quote)),
          ),
        ),
      ),
    ),
  );
}
