// The prover's answer for a definition (GET v1/definitions/{id}/prove) in the lint panel: each property
// proved, failed or unknown, the findings with how many turns lead into each, and each state's statuses.
// Asked after the lint findings are shown, and only while the panel is open: the first proof of a definition
// costs the server seconds of work (then it keeps it), which browsing conversations with the panel folded
// should not cause.

import { getJSON, segment } from "./api.js";
import { el } from "./dom.js";
import { scrolling } from "./explain.js";

function status(value) {
  return el("span", { className: `proof-status status-${value}` }, value);
}

function properties(proof) {
  return el(
    "ul",
    { className: "proof-properties" },
    proof.properties.map((p) =>
      el("li", { dataset: { property: p.name } }, el("code", {}, p.name), " ", status(p.status), p.reason ? ` (${p.reason})` : null),
    ),
  );
}

function findings(proof) {
  if (!proof.findings.length) return null;
  return el(
    "ul",
    { className: "findings proof-findings" },
    proof.findings.map((f) =>
      el(
        "li",
        { className: "finding proof-finding" },
        el("strong", {}, `${f.code} ${f.property}`),
        ` at ${f.flow ? `${f.flow}: ` : ""}${f.state}${f.line ? ` (line ${f.line})` : ""}, `,
        `${f.path_length} turn${f.path_length === 1 ? "" : "s"} in: `,
        f.message,
      ),
    ),
  );
}

function states(proof) {
  const names = proof.properties.map((p) => p.name);
  return scrolling(
    el(
      "table",
      { className: "proof-states" },
      el("thead", {}, el("tr", {}, el("th", {}, "state"), names.map((n) => el("th", {}, n)))),
      el(
        "tbody",
        {},
        Object.entries(proof.states).map(([state, statuses]) =>
          el(
            "tr",
            { dataset: { state } },
            el("td", { className: "id" }, state),
            names.map((n) => el("td", { dataset: { property: n } }, statuses[n] ? status(statuses[n]) : "")),
          ),
        ),
      ),
    ),
  );
}

function summary(proof) {
  const scope = `${proof.explored} configurations explored (bound ${proof.bound})`;
  return el("p", { className: "note" }, proof.complete ? scope : `${scope}: the bound was hit, so nothing more is proved`);
}

// Fills `holder` (already in the panel) with the proof; a holder the panel dropped meanwhile is filled unseen.
export async function showProof(holder, definitionId) {
  holder.replaceChildren(el("h4", {}, "Proof"), el("p", { className: "note" }, "Proving…"));
  try {
    const proof = await getJSON(`v1/definitions/${segment(definitionId)}/prove`);
    holder.replaceChildren(el("h4", {}, "Proof"), properties(proof), summary(proof));
    holder.append(...[findings(proof), states(proof)].filter(Boolean));
  } catch (error) {
    holder.replaceChildren(el("h4", {}, "Proof"), el("p", { className: "error" }, String(error.message ?? error)));
  }
}

let pending = null; // the proof the panel will show once it is opened: { section, holder, definitionId }

function provePending() {
  if (!pending || !pending.section.open) return;
  const { holder, definitionId } = pending;
  pending = null;
  if (holder.isConnected) showProof(holder, definitionId); // not a holder the panel dropped meanwhile
}

// `holder` gets the proof of `definitionId` now if `section` is open, else when it is next opened.
export function proveWhenOpen(section, holder, definitionId) {
  if (!section.dataset.proofWatched) {
    section.dataset.proofWatched = "1";
    section.addEventListener("toggle", provePending);
  }
  pending = { section, holder, definitionId };
  provePending();
}
