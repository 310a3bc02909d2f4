// The turn inspector: lists the admin's conversations and shows one turn by turn. Every piece
// of stored data is put on the page with textContent, never as HTML.
"use strict";

let token = null;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function say(text) {
  document.getElementById("status").textContent = text;
}

async function api(path) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const res = await fetch(path, { headers });
  if (res.status === 401) {
    document.getElementById("token-form").hidden = false;
    throw new Error(token ? "That admin token was not accepted." : "Enter the admin token to open the inspector.");
  }
  if (!res.ok) {
    let message = "The inspector could not load this; please try again.";
    try { message = (await res.json()).error || message; } catch (_) { /* keep the sentence */ }
    throw new Error(message);
  }
  return res.json();
}

function dollars(micros) {
  return "$" + (micros / 1e6).toFixed(6);
}

function tokens(usage) {
  return usage.input_tokens + " in · " + usage.output_tokens + " out · " +
    usage.cache_read_tokens + " cache read · " + usage.cache_write_tokens + " cache write";
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function partNode(part) {
  switch (part.type) {
    case "text": return el("pre", "part text", part.text);
    case "reasoning":
      return el("pre", "part reasoning", part.redacted_bytes !== undefined
        ? "[redacted reasoning, " + part.redacted_bytes + " bytes]" : "[reasoning] " + part.text);
    case "tool_use": return el("pre", "part tool-use", "call " + part.name + " (" + part.id + ") " + json(part.input));
    case "tool_result":
      return el("pre", "part tool-result", (part.is_error ? "error for " : "result for ") + part.tool_use_id + ": " + json(part.content));
    default: return el("pre", "part media", "[" + part.type + " " + part.mime_type + ", " + part.size_bytes + " bytes]");
  }
}

function messageNode(message) {
  const box = el("div", "message " + message.role);
  box.append(el("div", "label", message.role + " · position " + message.position));
  for (const part of message.parts) box.append(partNode(part));
  return box;
}

function metrics(call) {
  const line = el("div", "metrics");
  line.append(
    el("span", "model", call.model + " (" + call.backend + ")"),
    el("span", "tokens", tokens(call.usage)),
    el("span", "cost", dollars(call.cost_micros)),
    el("span", "latency", call.latency_ms + " ms"),
    el("span", "stop", "stop: " + (call.stop_reason || "none")),
  );
  if (call.error) line.append(el("span", "error", "error: " + call.error));
  return line;
}

function turnNode(turn, channel) {
  const box = el("section", "turn");
  box.dataset.turn = turn.number;
  box.append(el("h3", null, "Turn " + turn.number + " · segment " + turn.segment));
  const totals = el("div", "metrics totals");
  totals.append(
    el("span", "tokens", tokens(turn.totals.usage)),
    el("span", "cost", dollars(turn.totals.cost_micros)),
    el("span", "latency", turn.totals.latency_ms + " ms"),
    el("span", null, turn.totals.requests + " request(s)"),
  );
  box.append(totals);
  if (turn.user) {
    box.append(el("h4", null, "Context block"));
    box.append(el("pre", "context", turn.user.context === null ? "(none)" : turn.user.context));
    box.append(el("h4", null, "User's words"));
    box.append(el("pre", "words", turn.user.words));
  }
  for (const request of turn.requests) {
    const r = el("div", "request");
    r.append(el("h4", null, "Request " + request.number + (request.kind === "compaction" ? " (compaction notes)" : "")));
    r.append(metrics(request.call));
    r.append(el("div", "tools-offered", "tools offered: " + (request.call.tools_offered.join(", ") || "none")));
    r.append(el("div", "label", "new messages"));
    for (const m of request.new_messages) r.append(messageNode(m));
    r.append(el("div", "label", "reply"));
    r.append(messageNode(request.reply));
    box.append(r);
  }
  if (turn.tool_calls.length) {
    box.append(el("h4", null, "Tool calls"));
    for (const call of turn.tool_calls) {
      const c = el("div", "tool-call" + (call.is_error ? " error" : ""));
      c.append(el("div", "tool-name", call.name + " (" + call.id + ")"));
      c.append(el("pre", "tool-input", json(call.input)));
      c.append(el("pre", "tool-result", call.result === null ? "(no result stored)" : json(call.result)));
      box.append(c);
    }
  }
  if (turn.after.length) {
    box.append(el("h4", null, "Stored after the last request"));
    for (const m of turn.after) box.append(messageNode(m));
  }
  box.append(el("h4", null, "What the user saw on " + channel));
  for (const entry of turn.shown) {
    const s = el("div", "shown " + entry.role);
    s.append(el("div", "label", entry.role));
    s.append(el("pre", "shown-text", entry.text));
    if (entry.buttons.length) s.append(el("div", "buttons", "buttons: " + entry.buttons.join(" | ")));
    if (entry.reaction) s.append(el("div", "reaction", "reaction: " + entry.reaction));
    box.append(s);
  }
  return box;
}

async function open(id, button) {
  for (const b of document.querySelectorAll("nav button")) b.removeAttribute("aria-current");
  if (button) button.setAttribute("aria-current", "true");
  const detail = document.getElementById("detail");
  detail.replaceChildren(el("p", null, "Loading…"));
  try {
    const conv = await api("/admin/inspect/conversations/" + encodeURIComponent(id));
    const summary = el("dl", "summary");
    for (const [k, v] of [["conversation", conv.id], ["channel", conv.channel], ["prompt version", conv.prompt_version || "(none yet)"],
      ["segment", conv.segment], ["tokens", tokens(conv.totals.usage)], ["cost", dollars(conv.totals.cost_micros)],
      ["latency", conv.totals.latency_ms + " ms"]]) {
      summary.append(el("dt", null, k), el("dd", "summary-" + k.replace(" ", "-"), v));
    }
    detail.replaceChildren(summary);
    if (!conv.turns.length) detail.append(el("p", null, "No turns yet."));
    for (const turn of conv.turns) detail.append(turnNode(turn, conv.channel));
    say("");
  } catch (err) {
    detail.replaceChildren();
    say(err.message);
  }
}

async function load() {
  try {
    const list = await api("/admin/inspect/conversations");
    document.getElementById("token-form").hidden = true;
    const ul = document.getElementById("conversations");
    ul.replaceChildren();
    for (const c of list) {
      const b = el("button", "conversation");
      b.type = "button";
      b.dataset.id = c.id;
      b.append(el("span", null, c.id), el("small", null, c.channel + " · " + c.turns + " turn(s)"));
      b.addEventListener("click", () => open(c.id, b));
      const li = el("li");
      li.append(b);
      ul.append(li);
    }
    say(list.length ? "" : "You have no conversations yet.");
    if (list.length) open(list[0].id, ul.querySelector("button"));
  } catch (err) {
    say(err.message);
  }
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token = document.getElementById("token").value.trim() || null;
  load();
});

load();
