// The trace viewer: threads, their turns and items, and live turns over SSE.
// Plain DOM: every piece of text goes in through text nodes, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "opencomposer.token";
const AGENT_MODEL = "opencomposer-agent";  // `/v1/models` lists the agent too, last
const TOOL_TYPES = new Set(["tool_call", "command_execution", "file_change", "search",
  "file_read", "todo_list"]);

const state = {
  threadId: null,
  items: new Map(),   // item id -> {item, el}
  turns: new Map(),   // turn id -> {turn, el, items, footer}
  running: new Map(), // thread id -> its turn being streamed ("starting" before it has an id)
  failures: new Map(), // thread id -> why its turn failed while another thread was shown
  view: 0,            // bumped when another thread is shown: older streams stop drawing
  loading: false,     // the shown thread's log is loading: no turn starts before it is shown
  engineModel: undefined,  // the engine's served model, once `/v1/models` named it
};

// ------------------------------------------------------------------ DOM helper

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const collapsed = (label, body, open) =>
  h("details", { open }, h("summary", null, label), body);

const pre = (text, cls) => h("pre", { class: cls }, text ?? "");

function when(value) {
  return value ? new Date(value).toLocaleString() : "";
}

function setStatus(message, isError) {
  $("status").textContent = message || "";
  $("status").className = isError ? "error" : "";
}

// ------------------------------------------------------------------ HTTP

function headers(extra) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const all = { ...(extra || {}) };
  if (token) all.Authorization = `Bearer ${token}`;
  return all;
}

async function failure(response) {
  // The API's 401 speaks to HTTP clients (send a header); a person here pastes the token.
  if (response.status === 401) {
    return new Error("the server needs its token: paste the one `opencomposer serve` printed " +
      "in the field above and press Use token (or open the URL it printed)");
  }
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    message = body.error?.message || body.detail || message;
  } catch (_) { /* not JSON */ }
  return new Error(message);
}

async function api(path, body) {
  const init = body === undefined ? { headers: headers() }
    : { method: "POST", headers: headers({ "Content-Type": "application/json" }),
        body: JSON.stringify(body) };
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

// Reads an SSE body (fetch + ReadableStream: EventSource cannot send headers).
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = null, data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
      }
      if (type && data) onEvent(type, JSON.parse(data));
    }
  }
}

// ------------------------------------------------------------------ threads

// Lists the threads, and returns them ([] when the server refused).
async function loadThreads() {
  try {
    const { data } = await api("/v1/threads?limit=100");
    if (!data.length) {
      $("threads").replaceChildren(h("li", { class: "meta" }, "No threads yet."));
      return data;
    }
    $("threads").replaceChildren(...data.map((thread) => h("li",
      { class: thread.id === state.threadId ? "current" : null },
      h("a", { href: `#thread=${thread.id}` },
        h("strong", null, thread.title || "(untitled)"),
        h("span", { class: "meta" }, thread.workspace),
        h("span", { class: "meta" }, when(thread.updated_at))))));
    return data;
  } catch (error) {
    setStatus(`Cannot list threads: ${error.message}`, true);
    return [];
  }
}

// Empties the right column for `threadId` (null: none, and the welcome says what to do).
// The composer shows only once a thread has loaded: a turn needs one.
function clearThread(threadId) {
  state.threadId = threadId;
  state.view += 1;
  state.loading = threadId !== null;
  state.items.clear();
  state.turns.clear();
  $("thread-header").replaceChildren();
  $("turns").replaceChildren();
  $("composer").hidden = true;
  $("welcome").hidden = threadId !== null;
  showControls();
}

// The model that serves a thread: its own, else the engine's (the runtime leaves a thread's
// model unset when the settings name none, and the engine then runs the first it lists).
async function servingModel(thread) {
  if (thread.model) return thread.model;
  try {
    state.engineModel ??= (await api("/v1/models")).data.find((m) => m.id !== AGENT_MODEL)?.id;
  } catch (error) {
    return `model unknown (${error.message})`;
  }
  return state.engineModel ?? "no model served";
}

async function showHeader(thread) {
  const model = await servingModel(thread);
  if (thread.id !== state.threadId) return;  // another thread was opened meanwhile
  $("thread-header").replaceChildren(
    h("h2", null, thread.title || "(untitled)"),
    h("p", { class: "meta" }, `${thread.workspace} · `, h("span", { class: "model" }, model),
      ` · ${thread.id} · updated ${when(thread.updated_at)}`));
}

async function openThread(threadId) {
  clearThread(threadId);
  const view = state.view;
  try {
    const { thread, turns } = await api(`/v1/threads/${encodeURIComponent(threadId)}`);
    if (view !== state.view) return;  // another thread was opened meanwhile
    await showHeader(thread);
    $("composer").hidden = false;
    for (const turn of turns) {
      addTurn(turn);
      for (const item of turn.items) showItem(item);
    }
    setStatus(state.failures.get(threadId) || "", state.failures.has(threadId));
    state.failures.delete(threadId);
    // Followed even when this page started the turn: that stream drew an older view.
    const last = turns[turns.length - 1];
    if (last && last.status === "in_progress") await follow(threadId);
  } catch (error) {
    if (view === state.view) setStatus(`Cannot open thread: ${error.message}`, true);
  }
  if (view !== state.view) return;
  state.loading = false;
  showControls();
  loadThreads();
}

// A turn is running already (started elsewhere, or before a reload): replay the log into a
// fresh view and follow it live.
async function follow(threadId) {
  state.items.clear();
  state.turns.clear();
  $("turns").replaceChildren();
  const response = await fetch(`/v1/threads/${encodeURIComponent(threadId)}/events/stream`,
    { headers: headers({ "Last-Event-ID": "0" }) });
  if (!response.ok) throw await failure(response);
  await streamTurn(response, threadId);
}

// ------------------------------------------------------------------ turns

function addTurn(turn) {
  const items = h("div", { class: "items" });
  const footer = h("div", { class: "turn-footer" });
  const el = h("section", { class: "turn", "data-turn": turn.id },
    h("h3", null, `Turn ${state.turns.size + 1}`, h("span", { class: "meta" },
      ` ${when(turn.started_at)}`)), items, footer);
  state.turns.set(turn.id, { turn, el, items, footer });
  $("turns").append(el);
  updateTurn(turn);
}

function updateTurn(turn) {
  const entry = state.turns.get(turn.id);
  if (!entry) return addTurn(turn);
  entry.turn = turn;
  entry.footer.replaceChildren(...[
    h("span", { class: `badge ${turn.status}` }, turn.status),
    // An interrupted turn's status says why it stopped already.
    turn.stop_reason && turn.stop_reason !== turn.status
      ? h("span", null, `stop: ${turn.stop_reason}`) : null,
    // A running turn's usage is only summed when it ends: its zeros would mislead.
    turn.status !== "in_progress" ? usage(turn.usage || {}) : null,
    turn.error ? h("span", { class: "error" }, `${turn.error.kind}: ${turn.error.message}`)
      : null,
  ].filter(Boolean));
}

// What a turn used; "~" marks the counts that are partly estimated from text length (a call
// cut short before the engine said what it used). Cached tokens are only ever reported.
function usage(u) {
  const about = u.estimated ? "~" : "";
  const calls = u.model_calls || 0;
  return h("span", { class: "usage",
    title: u.estimated ? "~ estimated: a model call ended before the engine reported it" : null },
  `tokens: ${about}${u.prompt_tokens || 0} prompt (${u.cached_prompt_tokens || 0} cached)`,
  ` · ${about}${u.completion_tokens || 0} completion`,
  ` · ${calls} model call${calls === 1 ? "" : "s"}`);
}

async function startTurn(text) {
  const threadId = state.threadId;
  setStatus("");
  setRunning(threadId, "starting");
  try {
    const response = await fetch(`/v1/threads/${encodeURIComponent(threadId)}/turns`, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ input: [{ type: "text", text }] }),
    });
    if (!response.ok) throw await failure(response);
    $("request").value = "";
    await streamTurn(response, threadId);
  } catch (error) {
    // Said where it happened: on this thread's page, now or when it is opened next.
    const message = `Turn failed: ${error.message}`;
    if (threadId === state.threadId) setStatus(message, true);
    else state.failures.set(threadId, message);
  } finally {
    setRunning(threadId, null);
    // The first request titles an untitled thread: the header follows the list.
    const thread = (await loadThreads()).find((t) => t.id === threadId);
    if (thread && threadId === state.threadId) await showHeader(thread);
  }
}

// Draws the thread's events while it is shown. With another thread shown the stream is still
// read to its end: it tells when the turn is over, and answers the turn's approvals (a turn
// whose every approving stream closed has its requests denied).
async function streamTurn(response, threadId) {
  const view = state.view;
  await readEvents(response, (type, event) => {
    if (type === "turn.started") setRunning(threadId, event.turn.id);
    else if (type === "turn.completed") setRunning(threadId, null);
    if (view !== state.view) return;
    if (type === "turn.started" || type === "turn.completed") {
      updateTurn(event.turn);
    } else if (type === "item.started" || type === "item.completed") {
      showItem(event.item);
    } else if (type === "item.delta") {
      const entry = state.items.get(event.item_id);
      if (!entry) return;
      const { delta } = event;
      if (delta.kind === "text") entry.item.text = (entry.item.text || "") + delta.text;
      else entry.item.output = (entry.item.output || "") + delta.text;
      showItem(entry.item);
    }
  });
}

function setRunning(threadId, turnId) {
  if (turnId) state.running.set(threadId, turnId);
  else state.running.delete(threadId);
  showControls();
}

// Send and Interrupt for the shown thread: threads run their turns independently.
function showControls() {
  const running = state.running.get(state.threadId);
  $("send").disabled = Boolean(running) || state.loading;
  $("interrupt").hidden = !running || running === "starting";
}

async function interrupt() {
  const turnId = state.running.get(state.threadId);
  if (!turnId || turnId === "starting") return;
  try {
    await api(`/v1/threads/${encodeURIComponent(state.threadId)}/turns/` +
      `${encodeURIComponent(turnId)}/interrupt`, {});
  } catch (error) {
    setStatus(`Cannot interrupt: ${error.message}`, true);
  }
}

// Answers an approval request; its buttons go when the answered item comes back (in this
// reply or as the stream's item.completed, whichever is first).
async function decide(item, decision, form) {
  const buttons = form.querySelectorAll("button");
  buttons.forEach((button) => { button.disabled = true; });
  const note = form.querySelector("input").value.trim();
  const path = `/v1/threads/${encodeURIComponent(state.threadId)}/approvals/` +
    encodeURIComponent(item.id);
  try {
    const answer = await api(path, { decision, message: decision === "deny" && note || null });
    showItem(answer.item);
  } catch (error) {
    buttons.forEach((button) => { button.disabled = false; });
    setStatus(`Cannot answer the approval: ${error.message}`, true);
  }
}

// ------------------------------------------------------------------ items

// Adds the item to its turn, or replaces what is shown for it (keeping open <details>).
function showItem(item) {
  const old = state.items.get(item.id);
  const el = renderItem(item);
  if (old) {
    const wasOpen = [...old.el.querySelectorAll("details")].map((d) => d.open);
    const now = el.querySelectorAll("details");
    if (now.length === wasOpen.length) now.forEach((d, i) => { d.open = wasOpen[i]; });
    old.el.replaceWith(el);
  } else {
    let turn = state.turns.get(item.turn_id);
    if (!turn) {
      addTurn({ id: item.turn_id, status: "in_progress", usage: {} });
      turn = state.turns.get(item.turn_id);
    }
    turn.items.append(el);
  }
  state.items.set(item.id, { item, el });
}

function renderItem(item) {
  const body = TOOL_TYPES.has(item.type) ? renderTool(item) : (RENDER[item.type] ||
    ((i) => pre(JSON.stringify(i, null, 2))))(item);
  return h("div", { class: `item ${item.type}`, "data-item": item.id, "data-type": item.type },
    h("div", { class: "item-head" }, h("span", { class: "kind" }, item.type.replace("_", " ")),
      item.status !== "completed" ? h("span", { class: `badge ${item.status}` }, item.status)
        : null),
    body);
}

const RENDER = {
  user_message: (item) => [
    ...item.content.map((part) => part.type === "text" ? h("div", { class: "text" }, part.text)
      : h("div", { class: "ref" }, `📄 ${part.path}`,
        part.range ? `:${part.range.start}-${part.range.end}` : "",
        part.note ? ` — ${part.note}` : "")),
    item.context ? collapsed("context", pre(item.context)) : null,
  ],
  agent_message: (item) => h("div", { class: "text" }, item.text),
  reasoning: (item) => collapsed("reasoning", pre(item.text)),
  context_summary: (item) => collapsed(
    `context summary #${item.summary_index} (${item.method}, ` +
    `${item.tokens_before ?? "?"} → ${item.tokens_after ?? "?"} tokens)`,
    [pre(item.text), item.state ? pre(item.state) : null]),
  approval_request: (item) => [
    h("div", null, h("strong", null, item.tool), h("span", { class: "meta" },
      ` ${item.action_class}`)),
    pre(item.summary, "summary"),
    h("div", { class: "meta reason" }, item.reason),
    item.decision === null || item.decision === undefined
      ? (item.status === "in_progress" ? approvalForm(item) : null)
      : h("div", { class: `decision ${item.decision}` }, DECIDED[item.decision] || item.decision,
        ` (by ${item.decided_by || "?"})`, item.message ? ` — ${item.message}` : ""),
  ],
  error: (item) => h("div", { class: "error" }, `${item.error.kind}: ${item.error.message}`),
};

// The ApprovalDecision values a person picks here (`abort` is what Interrupt does), and how
// every decision reads once made.
const DECISIONS = [["approve", "Approve"], ["approve_for_thread", "Approve for this thread"],
  ["deny", "Deny"]];
const DECIDED = { approve: "approved", approve_for_thread: "approved for this thread",
  deny: "denied", abort: "denied, turn stopped" };

function approvalForm(item) {
  const form = h("form", { class: "actions", onsubmit: (event) => event.preventDefault() });
  form.append(...DECISIONS.map(([decision, label]) => h("button",
    { type: "button", class: decision, "data-decision": decision,
      onclick: () => decide(item, decision, form) }, label)),
  h("input", { placeholder: "note for the model, sent with Deny (optional)",
    "aria-label": "note sent with a denial" }));
  return form;
}

function renderTool(item) {
  const a = item.arguments || {};
  let what;
  switch (item.type) {
    case "command_execution":
      what = [pre(`$ ${item.command || a.command || ""}`, "command"),
        h("div", { class: "meta" }, `cwd ${item.cwd}`,
          item.exit_code !== null && item.exit_code !== undefined
            ? ` · exit ${item.exit_code}` : "",
          item.timed_out ? " · timed out" : "", item.sandbox ? ` · ${item.sandbox}` : "")];
      break;
    case "search":
      what = h("div", null, h("code", null, item.query || a.pattern || a.query || ""),
        h("span", { class: "meta" }, ` ${item.method}`,
          item.match_count !== null && item.match_count !== undefined
            ? ` · ${item.match_count} matches in ${item.file_count ?? "?"} files` : "",
          item.truncated ? " · truncated" : ""));
      break;
    case "file_read":
      what = h("div", null, h("code", null, item.path || a.path || ""),
        item.range ? ` lines ${item.range.start}-${item.range.end}` : "",
        item.total_lines ? h("span", { class: "meta" }, ` of ${item.total_lines}`) : "");
      break;
    case "file_change":
      what = item.changes.map((change) => h("div", { class: "change" },
        h("div", null, h("code", null, change.path), ` ${change.kind}`,
          change.move_to ? ` → ${change.move_to}` : ""),
        change.diff ? renderDiff(change.diff) : null));
      break;
    case "todo_list":
      what = h("ul", { class: "todos" }, item.todos.map((todo) => h("li",
        { class: todo.status },
        `${{ pending: "☐", in_progress: "▶", completed: "☑" }[todo.status] || "·"} `,
        todo.content)));
      break;
    default:
      what = pre(item.arguments_text || JSON.stringify(a, null, 2), "arguments");
  }
  return [
    h("div", { class: "tool" }, h("strong", null, item.tool),
      item.action_class ? h("span", { class: "meta" }, ` ${item.action_class}`) : null,
      item.duration_ms !== null && item.duration_ms !== undefined
        ? h("span", { class: "meta" }, ` · ${item.duration_ms} ms`) : null),
    what,
    item.error ? h("div", { class: "error" }, `${item.error.kind}: ${item.error.message}`)
      : null,
    item.output ? collapsed("output", pre(item.output, "output")) : null,
  ];
}

// A unified diff (one file's), one span per line classed by its first character; the lines
// before the first hunk are the file header, whose "---" and "+++" are not removals or adds.
function renderDiff(diff) {
  let header = true;
  return h("pre", { class: "diff" }, diff.replace(/\n$/, "").split("\n").map((line) => {
    if (line.startsWith("@@")) header = false;
    const cls = header ? "file" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add"
      : line.startsWith("-") ? "del" : line.startsWith("\\") ? "note" : null;
    return h("span", { class: cls }, `${line}\n`);
  }));
}

// ------------------------------------------------------------------ wiring

// `opencomposer serve` prints the page's URL with `?token=`: keep the token for this tab and
// take it out of the address bar, so it is neither bookmarked nor left in the history.
function takeTokenFromUrl() {
  const url = new URL(location.href);
  const token = url.searchParams.get("token");
  if (token === null) return;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  url.searchParams.delete("token");
  history.replaceState(null, "", url.pathname + url.search + url.hash);
}

function route() {
  const match = location.hash.match(/^#thread=(.+)$/);
  if (match) {
    openThread(decodeURIComponent(match[1]));
  } else {
    clearThread(null);
    loadThreads();
  }
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  $("token").value = "";
  setStatus("");
  route();
});

$("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const { thread } = await api("/v1/threads", {
      workspace: $("workspace").value.trim(), title: $("title").value.trim() || null,
    });
    $("title").value = "";
    location.hash = `thread=${thread.id}`;
  } catch (error) {
    setStatus(`Cannot create the thread: ${error.message}`, true);
  }
});

// Why a turn cannot start now, or null; Ctrl+Enter submits even while the button is disabled.
function cannotStart(text) {
  if (!state.threadId) return "Open a thread, or create one, to start a turn.";
  if (state.running.has(state.threadId)) {
    return "A turn is running: wait for it to end, or interrupt it.";
  }
  if (state.loading) return "The thread is still loading.";
  if (!text) return "Write a request for the agent first.";
  return null;
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("request").value.trim();
  const why = cannotStart(text);
  if (why) {
    setStatus(why, true);
    $("request").focus();
  } else {
    startTurn(text);
  }
});

$("request").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("composer").requestSubmit();
});

$("interrupt").addEventListener("click", interrupt);
$("refresh").addEventListener("click", loadThreads);
window.addEventListener("hashchange", route);
takeTokenFromUrl();
route();
