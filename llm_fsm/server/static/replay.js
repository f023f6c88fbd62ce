// The Replay panel of a definition's view: pick one of its aliases, and every recorded turn of the tenant's
// conversations is decided again with that alias's version (GET v1/definitions/{id}/replay?against=ALIAS):
// the totals, the turns whose decision would change and how, and the conversations in flight the version
// could not hold. Asked only on the button: a replay reads every conversation it covers.
// Everything shown from the report (ids, differences, messages) goes in as text (dom.js), never as HTML.

import { getJSON, segment } from "./api.js";
import { el } from "./dom.js";
import { conversationHash } from "./route.js";
import { scrolling } from "./explain.js";

function count(value, one, many = `${one}s`) {
  return `${value} ${value === 1 ? one : many}`;
}

function summary(report) {
  const s = report.summary;
  const ratio = `${(s.changed_ratio * 100).toFixed(1)} %`;
  return el(
    "p",
    { className: "replay-summary", dataset: { changed: s.changed, turns: s.turns, stranded: s.stranded } },
    `${count(s.conversations, "conversation")} (${s.in_flight} in flight), ${count(s.turns, "turn")} decided again: `,
    el("strong", {}, `${s.changed} changed`),
    ` (${ratio}), ${s.unchanged} unchanged, `,
    el("strong", {}, `${s.stranded} stranded`),
    s.not_recorded || s.not_recomputable
      ? `; ${s.not_recorded} recorded without their inputs, ${s.not_recomputable} not recomputable`
      : null,
    ` (version ${s.version}).`,
  );
}

function shown(listed, total, what) {
  return listed < total ? el("p", { className: "note" }, `The first ${listed} of ${total} ${what}.`) : null;
}

function changed(report) {
  if (!report.changed.length) return el("p", { className: "note replay-no-change" }, "No recorded decision changes.");
  return scrolling(
    el(
      "table",
      { className: "replay-changed" },
      el("thead", {}, el("tr", {}, el("th", {}, "conversation"), el("th", {}, "turn"), el("th", {}, "what changes"))),
      el(
        "tbody",
        {},
        report.changed.map((c) =>
          el(
            "tr",
            { dataset: { conversation: c.conversation_id, turn: c.turn } },
            el("td", { className: "id" }, el("a", { href: conversationHash(c.conversation_id, c.turn) }, c.conversation_id)),
            el("td", {}, String(c.turn)),
            el(
              "td",
              {},
              el("ul", { className: "replay-differences" }, c.differences.map((d) => el("li", {}, d))),
              c.unrecorded.length ? el("div", { className: "note" }, `never answered in production: ${c.unrecorded.join(", ")}`) : null,
            ),
          ),
        ),
      ),
    ),
  );
}

function stranded(report) {
  if (!report.stranded.length) return null;
  return el(
    "ul",
    { className: "findings replay-stranded" },
    report.stranded.map((c) =>
      el(
        "li",
        { className: "finding", dataset: { conversation: c.conversation_id } },
        el("a", { href: conversationHash(c.conversation_id) }, c.conversation_id),
        ` in ${[...c.stack, c.state].join(" › ")}: `,
        c.problems.map((p) => p.message).join("; "),
      ),
    ),
  );
}

// The report as the panel shows it (exported for the page's tests).
export function renderReport(report) {
  const s = report.summary;
  return el(
    "div",
    { className: "replay-report" },
    summary(report),
    el("h4", {}, "Changed turns"),
    shown(report.listed.changed, s.changed, "changed turns"),
    changed(report),
    s.stranded ? el("h4", {}, "Stranded conversations") : null,
    shown(report.listed.stranded, s.stranded, "stranded conversations"),
    stranded(report),
  );
}

async function run(holder, definitionId, alias) {
  holder.replaceChildren(el("p", { className: "note" }, `Replaying against ${alias}…`));
  try {
    const report = await getJSON(`v1/definitions/${segment(definitionId)}/replay?against=${segment(alias)}`);
    holder.replaceChildren(renderReport(report));
  } catch (error) {
    holder.replaceChildren(el("p", { className: "error" }, String(error.message ?? error)));
  }
}

// Fills `box` with the alias picker of `definition` (a DefinitionItem), the report below it once asked for.
export function showReplay(box, definition) {
  const aliases = Object.keys(definition?.aliases ?? {});
  if (!aliases.length) {
    box.replaceChildren(
      el("p", { className: "note" }, "No alias: serve another version beside this one (llm-fsm serve --alias NAME=FILE) to replay against it."),
    );
    return;
  }
  const picker = el(
    "select",
    { id: "replay-alias", "aria-label": "Alias to replay against" },
    aliases.map((name) => el("option", { value: name }, `${name} (${definition.aliases[name]})`)),
  );
  const holder = el("div", { id: "replay-report" });
  const button = el("button", { id: "replay-run", type: "button", onclick: () => run(holder, definition.id, picker.value) }, "Replay");
  box.replaceChildren(el("div", { className: "replay-picker" }, el("label", { for: "replay-alias" }, "Against "), picker, button), holder);
}
