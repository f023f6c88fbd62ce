// The /v1 API as the page calls it: the key from sessionStorage, relative URLs, errors as ApiError,
// and a turn's server-sent events read from a POST (EventSource can only GET).

const KEY_NAME = "llm-fsm-inspector-key";

export function storedKey() {
  return sessionStorage.getItem(KEY_NAME);
}

export function storeKey(key) {
  sessionStorage.setItem(KEY_NAME, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_NAME);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Relative to the page: under a mount prefix (/fsm/) "v1/me" is /fsm/v1/me.
export function apiUrl(path) {
  return new URL(path, document.baseURI);
}

export function segment(value) {
  return encodeURIComponent(String(value));
}

function headers(extra = {}) {
  const result = { Accept: "application/json", ...extra };
  const key = storedKey();
  if (key) result.Authorization = `Bearer ${key}`;
  return result;
}

async function errorOf(response) {
  let code = "http_error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = String(body.error.code);
      message = String(body.error.message);
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, code, message);
}

export async function getJSON(path) {
  const response = await fetch(apiUrl(path), { headers: headers() });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export async function postJSON(path, body) {
  const response = await fetch(apiUrl(path), {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

function parseEvent(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  return data.length ? { event, data: JSON.parse(data.join("\n")) } : null;
}

// Yields {event, data} for each server-sent event of one turn: state, token, done, or error.
export async function* streamMessage(conversationId, message) {
  const response = await fetch(apiUrl(`v1/conversations/${segment(conversationId)}/messages`), {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify({ message }),
  });
  if (!response.ok) throw await errorOf(response);
  if (!(response.headers.get("content-type") || "").includes("text/event-stream")) {
    yield { event: "done", data: await response.json() };
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer = (buffer + value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) yield event;
    }
  }
  const last = parseEvent(buffer.trim());
  if (last) yield last;
}
