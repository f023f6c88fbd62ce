// The inspector page: conversations, a chat panel that streams, the definition drawn with the path
// taken, each turn's explain record, the trace, the context and the definition's lint findings and proof.
// Read-only unless the key has the write right (GET v1/me says which). What is open is in the URL
// (route.js): the page opens what a link names, and the back button returns to what was open before.

import { ApiError, forgetKey, getJSON, postJSON, segment, storeKey, storedKey, streamMessage } from "./api.js";
import { append, clear, el, show, time } from "./dom.js";
import { draw, fitDiagram, initMermaid, pathFromTrace } from "./diagram.js";
import { renderTurn, scrolling } from "./explain.js";
import { proveWhenOpen } from "./proof.js";
import { renderProvenance } from "./provenance.js";
import { showReplay } from "./replay.js";
import { conversationHash, definitionHash, parseRoute } from "./route.js";

const $ = (id) => document.getElementById(id);

const page = {
  me: null,
  definitions: new Map(), // id -> DefinitionItem
  graphs: new Map(), // id -> Mermaid text
  conversations: [],
  conversation: null, // ConversationDetail of the one open
  path: [],
  sending: false,
  navigation: 0, // counts route changes: an open that a later one overtook does not draw over it
  turnAsked: 0, // counts explain records asked for: only the last one asked is shown
};

// More definitions than this and their list starts folded: the conversations are what an operator watches.
const DEFINITIONS_SHOWN_OPEN = 3;

const canWrite = () => Boolean(page.me && page.me.rights.includes("write"));

function report(where, error) {
  $(where).textContent = error instanceof ApiError ? `${error.message} (${error.code})` : String(error);
}

// --- key ---------------------------------------------------------------------------------------

function askForKey(message = "") {
  $("main").hidden = true;
  $("key-panel").hidden = false;
  $("key-error").textContent = message;
  $("key-input").focus();
}

async function start() {
  initMermaid();
  try {
    // asked first, so a page without a key does not send a request bound to fail (and log a 401)
    const { keys_required: keysRequired } = await getJSON("v1/auth");
    if (keysRequired && storedKey() === null) {
      askForKey();
      return;
    }
  } catch (error) {
    askForKey(String(error.message ?? error));
    return;
  }
  try {
    page.me = await getJSON("v1/me");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      const refused = storedKey() !== null;
      forgetKey();
      askForKey(refused ? "That key was not accepted." : "");
      return;
    }
    askForKey(String(error.message ?? error));
    return;
  }
  $("key-panel").hidden = true;
  $("main").hidden = false;
  const rights = page.me.rights.join(", ");
  $("who").textContent = page.me.keys_required
    ? `tenant ${page.me.tenant} · ${rights}`
    : `no keys (loopback): tenant ${page.me.tenant} · ${rights}`;
  $("forget-key").hidden = !page.me.keys_required;
  $("read-only").hidden = canWrite();
  await loadDefinitions();
  await loadConversations();
  await applyRoute();
}

// --- definitions -------------------------------------------------------------------------------

async function graph(definitionId) {
  if (!page.graphs.has(definitionId)) {
    const out = await getJSON(`v1/definitions/${segment(definitionId)}/graph?format=mermaid`);
    page.graphs.set(definitionId, out.graph);
  }
  return page.graphs.get(definitionId);
}

async function loadDefinitions() {
  const { definitions } = await getJSON("v1/definitions");
  const list = clear($("definitions"));
  $("definition-count").textContent = `(${definitions.length})`;
  $("definitions-section").open = definitions.length <= DEFINITIONS_SHOWN_OPEN;
  const filter = $("filter-definition");
  const states = new Set();
  filter.replaceChildren(el("option", { value: "" }, "any"));
  for (const item of definitions) {
    page.definitions.set(item.id, item);
    item.states.forEach((s) => states.add(s));
    filter.append(el("option", { value: item.id }, item.id));
    list.append(
      el(
        "li",
        { dataset: { definition: item.id } },
        el("div", { className: "title" }, item.name, el("span", { className: "id" }, ` (${item.id})`)),
        el("div", { className: "note", title: item.description }, item.description),
        el(
          "div",
          { className: "actions" },
          el("button", { type: "button", className: "view-definition", onclick: () => go(definitionHash(item.id)) }, "View"),
          canWrite()
            ? el("button", { type: "button", className: "start-conversation", onclick: () => startConversation(item.id) }, "New conversation")
            : null,
        ),
      ),
    );
  }
  const stateFilter = $("filter-state");
  stateFilter.replaceChildren(el("option", { value: "" }, "any"), [...states].sort().map((s) => el("option", { value: s }, s)));
}

async function showLint(definitionId) {
  const box = clear($("lint"));
  const proof = el("div", { id: "proof", className: "proof" }, el("h4", {}, "Proof"));
  try {
    const { findings } = await getJSON(`v1/definitions/${segment(definitionId)}/lint`);
    if (!findings.length) {
      box.append(el("p", { className: "note" }, `${definitionId}: no finding.`), proof);
      proveWhenOpen($("lint-section"), proof, definitionId);
      return findings;
    }
    box.append(
      el(
        "ul",
        { className: "findings" },
        findings.map((f) =>
          el(
            "li",
            { className: `finding severity-${f.severity}` },
            el("strong", {}, `${f.code} ${f.severity}`),
            ` ${f.name} at ${f.path}${f.line ? ` (line ${f.line})` : ""}: `,
            f.message,
            f.hint ? el("div", { className: "hint" }, f.hint) : null,
          ),
        ),
      ),
      proof,
    );
    proveWhenOpen($("lint-section"), proof, definitionId);
    return findings;
  } catch (error) {
    box.append(el("p", { className: "error" }, String(error.message ?? error)));
    return [];
  }
}

// Nothing open: the panels of the last conversation or definition emptied.
function closeConversation(title = "No conversation selected") {
  page.conversation = null;
  page.path = [];
  markSelected();
  $("chat-title").textContent = title;
  for (const id of ["messages", "explain", "turn-picker", "trace", "diagram", "lint", "replay", "provenance"]) {
    clear($(id));
  }
  for (const id of ["context", "path", "chat-state", "chat-error"]) $(id).textContent = "";
  updateSendForm();
}

async function viewDefinition(definitionId) {
  closeConversation(`Definition ${definitionId}`);
  $("lint-section").open = true;
  showReplay($("replay"), page.definitions.get(definitionId));
  try {
    await Promise.all([draw($("diagram"), await graph(definitionId)), showLint(definitionId)]);
  } catch (error) {
    report("chat-error", error);
  }
}

// --- conversations -----------------------------------------------------------------------------

function visible(item) {
  const definition = $("filter-definition").value;
  const state = $("filter-state").value;
  const status = $("filter-status").value;
  if (definition && item.definition !== definition) return false;
  if (state && item.state !== state) return false;
  if (status === "active" && item.status !== "active") return false;
  if (status === "ended" && item.status === "active") return false;
  return true;
}

function markSelected() {
  for (const li of $("conversations").children) {
    li.classList.toggle("selected", page.conversation?.conversation_id === li.dataset.conversation);
  }
}

function renderConversations() {
  const list = clear($("conversations"));
  const shown = page.conversations.filter(visible);
  const total = page.conversations.length;
  $("conversation-count").textContent = shown.length === total ? `(${total})` : `(${shown.length} of ${total})`;
  if (!total && canWrite()) {
    // a first visit: the definitions, folded when there are many, hold the only way to start one
    $("definitions-section").open = true;
    list.append(el("li", { className: "note" }, "No conversation yet: press New conversation under a definition below."));
  } else if (!shown.length) {
    list.append(el("li", { className: "note" }, total ? "No conversation matches the filters." : "No conversation."));
  }
  for (const item of shown) {
    list.append(
      el(
        "li",
        { dataset: { conversation: item.conversation_id }, onclick: () => go(conversationHash(item.conversation_id)) },
        el("div", { className: "title" }, item.definition, " ", el("span", { className: "badge" }, item.state)),
        el("div", { className: "note" }, `${item.status} · ${time(item.updated_at)}`),
        el("div", { className: "id" }, item.conversation_id),
      ),
    );
  }
  markSelected();
}

async function loadConversations() {
  try {
    page.conversations = (await getJSON("v1/conversations")).conversations;
  } catch (error) {
    report("chat-error", error);
    return;
  }
  renderConversations();
}

async function startConversation(definitionId) {
  $("chat-error").textContent = "";
  try {
    const started = await postJSON("v1/conversations", { definition: definitionId });
    await loadConversations();
    go(conversationHash(started.conversation_id));
  } catch (error) {
    report("chat-error", error);
  }
}

// A message's text, and how many images it carried: the page names them, it never loads them.
function shownText(item) {
  const images = (item.parts || []).filter((part) => part && part.type === "image_url").length;
  if (!images) return item.content;
  return `${item.content} [${images} image${images > 1 ? "s" : ""}]`.trim();
}

function message(role, text) {
  return el("li", { className: `message ${role}` }, el("span", { className: "role" }, role), el("div", { className: "text" }, text));
}

function updateSendForm() {
  const open = page.conversation;
  $("send-form").hidden = !(open && canWrite() && !open.ended);
  $("message-input").disabled = page.sending;
  $("send-button").disabled = page.sending;
}

async function drawConversation() {
  const open = page.conversation;
  if (!open) return;
  const text = await graph(open.definition);
  if (page.conversation !== open) return; // another conversation was opened meanwhile: it draws its own
  const path = page.path.length ? `Path: ${page.path.join(" → ")}` : "";
  // a sub-flow runs another definition: its states are not in this diagram, so nothing is highlighted
  const flows = open.stack?.length ? `In sub-flow ${open.stack.join(" › ")} (not drawn here). ` : "";
  $("path").textContent = flows + path;
  await draw($("diagram"), text, open.state, page.path);
}

// The explain record of turn `index`; of several asked in a row, only the last asked is shown.
async function showTurn(index) {
  const conversationId = page.conversation.conversation_id;
  const asked = (page.turnAsked += 1);
  for (const button of $("turn-picker").children) button.classList.toggle("selected", Number(button.dataset.turn) === index);
  let shown;
  try {
    shown = renderTurn(await getJSON(`v1/conversations/${segment(conversationId)}/turns/${index}`));
  } catch (error) {
    shown = el("p", { className: "note" }, String(error.message ?? error));
  }
  if (asked === page.turnAsked && page.conversation?.conversation_id === conversationId) clear($("explain")).append(shown);
}

function renderTrace(events) {
  const box = clear($("trace"));
  box.append(
    scrolling(
      el(
        "table",
        { className: "trace" },
        el("thead", {}, el("tr", {}, el("th", {}, "time"), el("th", {}, "event"), el("th", {}, "data"))),
        el(
          "tbody",
          {},
          events.map((e) =>
            el(
              "tr",
              {},
              el("td", { className: "time" }, new Date(e.timestamp * 1000).toLocaleTimeString()),
              el("td", { className: "event" }, e.event),
              el("td", { className: "value" }, show(e.data)),
            ),
          ),
        ),
      ),
    ),
  );
}

// Everything about the open conversation, read again: after opening it and after each turn.
// False when the user went elsewhere meanwhile: then it stops drawing, and what was opened since stays.
async function refreshConversation(conversationId) {
  const ticket = page.navigation;
  const base = `v1/conversations/${segment(conversationId)}`;
  const [detail, trace, origins] = await Promise.all([
    getJSON(base),
    getJSON(`${base}/trace`),
    getJSON(`${base}/provenance`),
  ]);
  if (ticket !== page.navigation) return false;
  page.conversation = detail; // from here on, only another conversation opened replaces it
  page.path = pathFromTrace(trace);
  $("chat-title").textContent = `${detail.definition} · ${detail.conversation_id}`;
  $("chat-state").textContent = detail.ended ? `${detail.state} (${detail.status})` : detail.state;
  $("context").textContent = JSON.stringify(detail.context, null, 2);
  clear($("provenance")).append(renderProvenance(origins));
  renderTrace(trace);
  const picker = clear($("turn-picker"));
  for (let index = 1; index <= detail.turn_count; index += 1) {
    picker.append(
      el("button", { type: "button", dataset: { turn: index }, onclick: () => go(conversationHash(conversationId, index)) }, String(index)),
    );
  }
  updateSendForm();
  await drawConversation();
  if (page.conversation !== detail) return false;
  // the turn the address names now (the user may have gone back or forward while this loaded), else the last
  const route = parseRoute(location.hash);
  const turn = route.conversation === conversationId ? route.turn : null;
  if (detail.turn_count > 0) await showTurn(turn ?? detail.turn_count);
  else clear($("explain")).append(el("p", { className: "note" }, "No turn yet."));
  return page.conversation === detail;
}

async function openConversation(conversationId) {
  const ticket = page.navigation;
  $("chat-error").textContent = "";
  clear($("messages"));
  try {
    if (!(await refreshConversation(conversationId))) return;
  } catch (error) {
    if (ticket !== page.navigation) return;
    closeConversation();
    report("chat-error", error);
    return;
  }
  const list = clear($("messages"));
  for (const item of page.conversation.history) list.append(message(item.role, shownText(item)));
  markSelected();
  showLint(page.conversation.definition);
}

async function send(text) {
  const open = page.conversation;
  if (!open || page.sending) return;
  page.sending = true;
  updateSendForm();
  $("chat-error").textContent = "";
  const messages = $("messages");
  messages.append(message("user", text));
  const reply = message("assistant", "");
  reply.classList.add("streaming");
  messages.append(reply);
  const replyText = reply.querySelector(".text");
  try {
    for await (const { event, data } of streamMessage(open.conversation_id, text)) {
      if (event === "token") {
        append(replyText, data.text);
        messages.scrollTop = messages.scrollHeight;
      } else if (event === "state") {
        if (data.state !== open.state) page.path = [...page.path, data.state];
        open.state = data.state;
        open.ended = data.ended;
        if (page.conversation === open) {
          $("chat-state").textContent = data.state;
          await drawConversation();
        }
      } else if (event === "done") {
        if (!replyText.textContent && data.reply) replyText.textContent = data.reply;
      } else if (event === "error") {
        throw new ApiError(data.status ?? 500, data.code, data.message);
      }
    }
    // the user may have opened another conversation while this turn ran: then that one stays open
    if (page.conversation === open) {
      if (location.hash !== conversationHash(open.conversation_id)) {
        history.replaceState(null, "", conversationHash(open.conversation_id)); // shown at its new last turn
      }
      await refreshConversation(open.conversation_id);
    }
    await loadConversations();
  } catch (error) {
    reply.classList.add("failed");
    if (!replyText.textContent) replyText.textContent = "(no reply: the turn failed and changed nothing)";
    report("chat-error", error);
  } finally {
    reply.classList.remove("streaming");
    page.sending = false;
    updateSendForm();
    if (!$("send-form").hidden) $("message-input").focus();
  }
}

// --- the address -------------------------------------------------------------------------------

// Opens what the URL names; called on load (a link) and on every change (a click, back, forward).
async function applyRoute() {
  if (!page.me) return;
  const ticket = (page.navigation += 1);
  const route = parseRoute(location.hash);
  if (route.conversation) {
    if (page.conversation?.conversation_id === route.conversation) {
      await showTurn(route.turn ?? page.conversation.turn_count);
    } else {
      await openConversation(route.conversation);
    }
  } else if (route.definition) {
    await viewDefinition(route.definition);
  } else {
    closeConversation();
  }
  if (ticket === page.navigation) markSelected();
}

// A new history entry for `hash` (the hashchange listener opens it); the same one again is re-opened.
function go(hash) {
  if (location.hash === hash) applyRoute();
  else location.hash = hash;
}

window.addEventListener("hashchange", applyRoute);

// --- wiring ------------------------------------------------------------------------------------

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("key-input").value.trim();
  if (!key) return;
  storeKey(key);
  $("key-input").value = "";
  start();
});

// Another key may see other conversations and have other rights: nothing of the last one's stays on the page.
function closeAll() {
  closeConversation();
  page.graphs.clear();
  for (const id of ["conversations", "definitions"]) clear($(id));
}

$("forget-key").addEventListener("click", () => {
  forgetKey();
  page.me = null;
  closeAll();
  askForKey();
});

$("send-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("message-input");
  const text = input.value;
  if (!text.trim()) return;
  input.value = "";
  send(text);
});

for (const id of ["filter-definition", "filter-state", "filter-status"]) $(id).addEventListener("change", renderConversations);
$("refresh").addEventListener("click", loadConversations);
$("diagram-size").addEventListener("click", () => {
  const full = $("diagram").classList.toggle("full");
  $("diagram-size").textContent = full ? "Fit to panel" : "Full size";
  $("diagram-size").setAttribute("aria-pressed", String(full));
  fitDiagram($("diagram"));
});

start();
