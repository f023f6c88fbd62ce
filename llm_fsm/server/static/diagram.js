// The definition drawn by Mermaid (the text GET /v1/definitions/{id}/graph gives, as `llm-fsm graph`
// draws it), with the current state and the states the conversation went through marked.

import { clear, el } from "./dom.js";

const NAMED = { quot: '"', lt: "<", gt: ">", amp: "&" };

// The renderer writes labels with Mermaid entity codes (#quot;, #58; ...): back to the state's name.
export function unescapeLabel(text) {
  return text.replace(/#(quot|lt|gt|amp|\d+);/g, (_, name) => NAMED[name] ?? String.fromCodePoint(Number(name)));
}

// State name -> the Mermaid id the renderer gave it (`state "ask" as s0`).
export function stateIds(text) {
  const ids = new Map();
  for (const match of text.matchAll(/^\s*state "(.*)" as (s\d+)\s*$/gm)) {
    ids.set(unescapeLabel(match[1]).replace(/ \(undeclared\)$/, ""), match[2]);
  }
  return ids;
}

// The root flow's states in the order the conversation went through them, from its trace.
// Transitions inside a sub-flow (between a push or link and its pop) are another definition's.
export function pathFromTrace(events) {
  const path = [];
  let depth = 0;
  for (const { event, data } of events) {
    if (event === "start" && path.length === 0) path.push(data.state);
    else if (event === "push" || event === "link") depth += 1;
    else if (event === "pop" || (event === "cancel" && data.scope !== "conversation")) depth = Math.max(0, depth - 1);
    else if (event === "transition" && depth === 0) path.push(data.target);
  }
  return path;
}

export function withMarks(text, ids, current, visited) {
  const lines = [
    text,
    "    classDef visited fill:#dbeafe,stroke:#2563eb",
    "    classDef current fill:#fde68a,stroke:#b45309,stroke-width:3px",
  ];
  for (const state of new Set(visited)) {
    if (ids.has(state) && state !== current) lines.push(`    class ${ids.get(state)} visited`);
  }
  if (ids.has(current)) lines.push(`    class ${ids.get(current)} current`);
  return lines.join("\n");
}

let drawings = 0;

// Draws into `container`; `current` and `visited` are state names (either may be empty).
export async function draw(container, text, current = null, visited = []) {
  const mermaid = globalThis.mermaid;
  if (!mermaid) {
    clear(container).append(el("pre", {}, text));
    return;
  }
  const ids = stateIds(text);
  drawings += 1;
  try {
    const { svg } = await mermaid.render(`fsm-diagram-${drawings}`, withMarks(text, ids, current, visited));
    // Mermaid's own output, drawn with securityLevel "strict": labels escaped and sanitised (DOMPurify) by it.
    // Parsed as HTML (its labels are HTML in foreignObject, not XML); a parsed document runs no script.
    const parsed = new DOMParser().parseFromString(svg, "text/html").querySelector("svg");
    clear(container).append(document.importNode(parsed, true));
    container.dataset.current = current ?? "";
    fitDiagram(container);
  } catch (error) {
    clear(container).append(el("p", { className: "error" }, `cannot draw the diagram: ${error}`), el("pre", {}, text));
  }
}

// Fitted to its panel, a diagram of ten states is drawn a few pixels high; at full size (the container has the
// class "full") it is drawn at Mermaid's own size and scrolls inside its box.
export function fitDiagram(container) {
  const svg = container.querySelector("svg");
  if (!svg) return;
  const full = container.classList.contains("full");
  svg.dataset.fittedMaxWidth ??= svg.style.maxWidth; // Mermaid's own: the drawing's width
  svg.style.width = full && svg.viewBox.baseVal ? `${svg.viewBox.baseVal.width}px` : "";
  svg.style.maxWidth = full ? "none" : svg.dataset.fittedMaxWidth;
}

export function initMermaid() {
  globalThis.mermaid?.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
}
