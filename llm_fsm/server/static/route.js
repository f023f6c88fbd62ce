// The page's address: one URL per conversation and per turn, in the fragment (the server serves one page,
// and a fragment is never sent to it). Each open is a history entry, so the back button and a link
// both work:
//   #/c/<conversation id>            a conversation, at its last turn
//   #/c/<conversation id>/t/<n>      a conversation, at turn n
//   #/d/<definition id>              a definition: its diagram and lint findings
//   (empty)                          nothing open

import { segment } from "./api.js";

export function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/");
  let decoded;
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    return {}; // a malformed escape: nothing to open
  }
  const [kind, id, sub, number] = decoded;
  if (kind === "c" && id) {
    const turn = sub === "t" && /^[1-9][0-9]*$/.test(number ?? "") ? Number(number) : null;
    return { conversation: id, turn };
  }
  if (kind === "d" && id) return { definition: id };
  return {};
}

export function conversationHash(conversationId, turn = null) {
  return `#/c/${segment(conversationId)}${turn ? `/t/${turn}` : ""}`;
}

export function definitionHash(definitionId) {
  return `#/d/${segment(definitionId)}`;
}
