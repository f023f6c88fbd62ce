// One turn's explain record (GET /v1/conversations/{id}/turns/{n}) laid out for people: what the model
// proposed, each transition considered with its conditions, the verdict and why, the context changes
// (refused writes marked), the model calls.

import { el, show } from "./dom.js";

function yesNo(value, yes, no) {
  return el("span", { className: value ? "yes" : "no" }, value ? yes : no);
}

// A table in a box of its own that scrolls sideways when the panel is narrower than the table.
export function scrolling(table) {
  return el("div", { className: "table-scroll" }, table);
}

function reason(c) {
  if (!c.rule) return c.reason;
  return [c.reason, " (rule: ", el("code", { className: "rule" }, c.rule), ")"];
}

function contextChanges(changes) {
  if (!changes.length) return el("p", { className: "note" }, "No context change.");
  return scrolling(
    el(
      "table",
      { className: "changes" },
      el("thead", {}, el("tr", {}, ["key", "value", "before", "", "reason"].map((h) => el("th", {}, h)))),
      el(
        "tbody",
        {},
        changes.map((c) =>
          el(
            "tr",
            { className: c.applied ? "applied" : "refused" },
            el("td", { className: "id" }, c.key),
            el("td", { className: "value" }, show(c.value)),
            el("td", { className: "value" }, show(c.previous)),
            el("td", { className: "outcome" }, yesNo(c.applied, "applied", "refused")),
            el("td", {}, reason(c)),
          ),
        ),
      ),
    ),
  );
}

function condition(c) {
  const details = [];
  if (c.missing_keys.length) details.push(el("div", { className: "missing" }, `missing keys: ${c.missing_keys.join(", ")}`));
  if (c.logic_value !== null && c.logic_value !== undefined) details.push(el("div", {}, `logic value: ${show(c.logic_value)}`));
  if (c.logic_missing_vars.length) {
    details.push(el("div", { className: "missing" }, `rule read missing: ${c.logic_missing_vars.join(", ")}`));
  }
  if (c.error) details.push(el("div", { className: "error" }, `error: ${c.error}`));
  return el("li", { className: c.holds ? "holds" : "fails" }, yesNo(c.holds, "holds", "fails"), " ", c.description, details);
}

function evaluation(e, verdict) {
  const taken = verdict.transition_index === e.index && verdict.target_state === e.target_state;
  return el(
    "li",
    { className: `evaluation ${e.eligible ? "eligible" : "ineligible"}${taken ? " taken" : ""}` },
    el(
      "div",
      {},
      `#${e.index} → `,
      el("strong", {}, e.target_state),
      ` (priority ${e.priority}${e.guarded ? ", guarded" : ""}) `,
      yesNo(e.eligible, "eligible", "not eligible"),
      taken ? el("span", { className: "taken-mark" }, " taken") : null,
    ),
    e.conditions.length ? el("ul", { className: "conditions" }, e.conditions.map(condition)) : el("div", { className: "note" }, "no condition"),
  );
}

function verdictBlock(v, label = "Verdict") {
  return el(
    "div",
    { className: `verdict kind-${v.kind}`, dataset: { kind: v.kind } },
    el("div", {}, `${label}: `, el("strong", { className: "verdict-kind" }, v.kind), " → ", el("strong", {}, v.target_state)),
    el("div", { className: "verdict-reason" }, v.reason),
  );
}

// What the state's retrieve looked up before the model was asked: the query, each snippet the prompt held (id,
// source, score, its text) with the ones the reply cited marked, or why there were none. Snippet text comes from
// documents: like everything here it goes in as text, never as markup.
function retrievedBlock(r) {
  const outcome = r.skipped !== null && r.skipped !== undefined ? "skipped" : r.error ? "failed" : "ok";
  const cited = new Set(r.cited);
  const asked = [
    "From ",
    el("strong", {}, r.retriever),
    ...(r.query ? [" for ", el("q", { className: "retrieval-query" }, r.query)] : []),
    outcome === "skipped" ? "" : ` · ${r.duration_ms.toFixed(0)} ms`,
  ];
  let body;
  if (outcome === "skipped") body = el("p", { className: "note retrieval-skipped" }, `Not asked: ${r.skipped}.`);
  else if (outcome === "failed") {
    body = el("p", { className: "error retrieval-error" }, `${r.timed_out ? "Timed out" : "Failed"}: ${r.error} (on_error: ${r.on_error})`);
  } else {
    body = [
      r.snippets.length
        ? el(
            "ol",
            { className: "snippets" },
            r.snippets.map((s) =>
              el(
                "li",
                { className: `snippet${cited.has(s.id) ? " cited" : ""}`, dataset: { snippet: s.id } },
                el("div", {}, el("code", { className: "snippet-id" }, `[${s.id}]`), " ", el("span", { className: "snippet-source" }, s.source)),
                el(
                  "div",
                  { className: "note" },
                  el("span", { className: "snippet-score" }, `score ${s.score.toFixed(2)}`),
                  ` · ${s.chars} characters`,
                  cited.has(s.id) ? el("span", { className: "yes" }, " · cited") : "",
                ),
                s.text === null || s.text === undefined ? null : el("blockquote", { className: "quote snippet-text" }, s.text),
              ),
            ),
          )
        : el("p", { className: "note" }, "The retriever found nothing."),
      el("p", { className: "retrieval-cited" }, `cited: ${r.cited.length ? r.cited.join(", ") : "none"}`),
    ];
  }
  return el("div", { className: "retrieval", dataset: { retriever: r.retriever, outcome } }, el("p", {}, asked), body);
}

export function renderTurn(record) {
  // a turn that chained transitions may come back to where it started: it did not stay, it went round
  const steps = [record.verdict, ...record.chained].map((v) => v.target_state);
  const moved = record.state_before !== record.state_after || record.chained.length > 0;
  const flows = record.flow_before !== record.flow_after ? ` (flow ${record.flow_before} → ${record.flow_after})` : "";
  return el(
    "article",
    { className: "turn", dataset: { turn: record.index } },
    el("h3", {}, `Turn ${record.index}: ${record.state_before}${moved ? ` → ${record.chained.length ? steps.join(" → ") : record.state_after}` : " (stayed)"}${flows}`),
    el("p", { className: "quote user" }, el("span", { className: "who" }, "user: "), record.user_message),
    el("p", {}, "Intent: ", el("strong", {}, record.intent), " · proposal: ", el("strong", { className: "proposal" }, record.proposal ?? "stay")),
    ...(record.retrieval ? [el("h4", {}, "Retrieved"), retrievedBlock(record.retrieval)] : []),
    verdictBlock(record.verdict),
    record.chained.length ? el("div", { className: "chained" }, record.chained.map((v) => verdictBlock(v, "Then"))) : null,
    el("h4", {}, "Transitions considered"),
    record.evaluations.length
      ? el("ol", { className: "evaluations" }, record.evaluations.map((e) => evaluation(e, record.verdict)))
      : el("p", { className: "note" }, "None (no transition was evaluated this turn)."),
    el("h4", {}, "Context changes"),
    contextChanges(record.context_changes),
    ...(record.actions && record.actions.length
      ? [
          el("h4", {}, "Actions"),
          el(
            "ul",
            { className: "action-calls" },
            record.actions.map((a) =>
              el(
                "li",
                { dataset: { outcome: a.outcome } },
                `${a.call} (${a.when}, ${a.state}): `,
                el("strong", {}, a.outcome),
                a.outcome === "skipped" ? "" : ` · ${a.duration_ms.toFixed(0)} ms`,
                Object.keys(a.inputs).length ? ` · inputs ${JSON.stringify(a.inputs)}` : "",
                Object.keys(a.outputs).length ? ` · wrote ${JSON.stringify(a.outputs)}` : "",
                a.error ? el("span", { className: "error" }, ` — ${a.error}${a.on_error ? ` (on_error: ${a.on_error})` : ""}`) : null,
              ),
            ),
          ),
        ]
      : []),
    el("h4", {}, "Model calls"),
    el(
      "ul",
      {},
      record.llm_calls.map((call) =>
        el("li", {}, `${call.purpose}: ${call.attempts} attempt${call.attempts === 1 ? "" : "s"}`, call.error ? el("span", { className: "error" }, ` — ${call.error}`) : null),
      ),
    ),
    el("p", { className: "quote assistant" }, el("span", { className: "who" }, "reply: "), record.reply),
    el("p", { className: "note" }, `${((record.finished_at - record.started_at) * 1000).toFixed(0)} ms · message id ${record.message_id ?? "none"}`),
  );
}
