// Bridle web chat: plain JavaScript, no build step.
// Talks to the API documented in README.md and renders the engine's events as they stream.
"use strict";

const $ = (sel) => document.querySelector(sel);
// `follow`: the message list keeps to the newest message (false once the user scrolls up).
// shownUpTo: the position of the newest entry the history showed (-1: none); sentSinceLoad:
// messages the server took since then (what `awaitAnswer` waits to see recorded).
const state = {
  conversation: null, busy: false, csrf: null, pressed: null, follow: true, lastTop: 0,
  shownUpTo: -1, sentSinceLoad: 0,
  // The last message whose sending failed ({conversation, text, buttonId, id; after: the
  // newest position the history showed when it failed, and also: how many messages of the
  // same words the server took since that history was loaded}): sent again unchanged, it goes
  // with the same id, so one the server took before the failure is recognised and answered
  // once. sentTexts: the words of each message the server took since the history was loaded.
  unsent: null, sentTexts: [],
  // The conversation list: drawings started (only the newest one draws), older pages added
  // to it, and how many the person has asked to see by pressing "Older conversations".
  listDraw: 0, listPages: 0, listWanted: 0,
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; // never innerHTML: model text is untrusted
  return e;
}

// Keep to the newest message, unless the user scrolled up to read (`force`: they just sent
// a message or opened a conversation). Only the user ever scrolls up: the list never does.
function scrollDown(force) {
  const m = $("#messages");
  if (force) state.follow = true;
  // Moved up since the list last followed (its scroll event may still be on its way).
  else if (m.scrollTop < state.lastTop - 1) state.follow = false;
  if (!state.follow) {
    $("#jump").hidden = atBottom(m);
    return;
  }
  m.scrollTop = m.scrollHeight;
  state.lastTop = m.scrollTop;
  $("#jump").hidden = true;
}

// Near the bottom (a few pixels of slack for rounding) counts as at the bottom.
function atBottom(m) {
  return m.scrollHeight - m.scrollTop - m.clientHeight < 24;
}

$("#messages").addEventListener("scroll", () => {
  const m = $("#messages");
  if (m.scrollTop < state.lastTop - 1) state.follow = false;
  else if (atBottom(m)) state.follow = true;
  state.lastTop = m.scrollTop;
  $("#jump").hidden = state.follow;
});

$("#jump").addEventListener("click", () => scrollDown(true));

function setStatus(text) {
  $("#status").textContent = text || "";
}

async function api(path, options) {
  options = options || {};
  // A signed-in session's changes carry its CSRF token (README: "Sign-in").
  if (options.method && options.method !== "GET" && state.csrf) {
    options.headers = { ...(options.headers || {}), "X-CSRF-Token": state.csrf };
  }
  // No answer at all (the connection failed): the request may or may not have arrived.
  const res = await fetch(path, options).catch(() => {
    const err = new Error("The connection failed, so the message may not have reached us. Send it again: it is answered once.");
    err.network = true;
    throw err;
  });
  if (res.status === 401) {
    location.href = "/auth/login?return_to=" + encodeURIComponent(location.pathname + location.hash);
    throw new Error("Signing you in…");
  }
  if (!res.ok) {
    let message = `HTTP ${res.status}`;
    try { message = (await res.json()).error || message; } catch (_) { /* not JSON */ }
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return res;
}

// The newest page of conversations; older pages on asking ("Older conversations"), from the
// answer's `Link: <…>; rel="next"`. Read again after a turn, it keeps as many as were shown or
// asked for (up to the API's 200), so older ones the person opened stay in the list. Drawings
// may overlap (a turn ends while a conversation opens): only the last one started draws, and
// one that an older page overtook starts again, to keep it.
async function loadConversations() {
  const nav = $("#conversations");
  const draw = ++state.listDraw;
  const pages = state.listPages;
  const shown = nav.querySelectorAll("a").length;
  const limit = Math.min(200, Math.max(50, shown, state.listWanted));
  const res = await api(`/api/conversations?limit=${limit}`);
  const list = await res.json();
  if (draw !== state.listDraw) return list;
  if (pages !== state.listPages) return loadConversations();
  nav.replaceChildren();
  appendConversations(nav, list, nextPage(res));
  return list;
}

function nextPage(res) {
  const link = res.headers.get("Link") || "";
  return /<([^>]+)>;\s*rel="next"/.exec(link)?.[1];
}

function appendConversations(nav, list, next) {
  for (const c of list) {
    const a = el("a", c.id === state.conversation ? "active" : "", c.preview || "New conversation");
    a.href = `#${c.id}`;
    a.dataset.id = c.id;
    nav.append(a);
  }
  if (!next) return;
  nav.append(moreButton("older", "Older conversations", async (more) => {
    const shown = nav.querySelectorAll("a").length;
    const res = await api(next);
    const older = await res.json();
    state.listWanted = Math.max(state.listWanted, shown + older.length);
    // The list was drawn again meanwhile (a turn ended, a conversation opened), from what was
    // shown before these came: draw it once more, with them.
    if (!more.isConnected) {
      await loadConversations();
      return;
    }
    more.remove();
    appendConversations(nav, older, nextPage(res));
    state.listPages++;
  }));
}

// A button that loads more when pressed (`load(button)` puts it in place): pressed once while
// it loads; a failure is said, and it can be pressed again.
function moreButton(cls, label, load) {
  const more = el("button", cls, label);
  more.type = "button";
  more.addEventListener("click", async () => {
    more.disabled = true;
    try {
      await load(more);
    } catch (err) {
      more.disabled = false;
      setStatus(err.message);
    }
  });
  return more;
}

// Buttons under a reply; pressing one sends its title as the next message, with its id (a
// confirmation button's id decides a held action on the server).
function buttonRow(buttons) {
  const row = el("div", "choices");
  for (const b of buttons) {
    const btn = el("button", "choice", b.title);
    btn.type = "button";
    btn.addEventListener("click", () => {
      if (state.busy) return;
      state.pressed = b.id;
      $("#input").value = b.title;
      $("#composer").requestSubmit();
    });
    row.append(btn);
  }
  return row;
}

// The newest page of a conversation's history (README: "HTTP API"); older pages are shown on
// asking, above it ("Show earlier messages").
async function loadHistory(id) {
  const data = await (await api(`/api/conversations/${encodeURIComponent(id)}/messages`)).json();
  const box = $("#messages");
  box.replaceChildren();
  data.messages.forEach((m, i) => {
    box.append(entryBubble(m));
    const last = i === data.messages.length - 1;
    if (last && m.buttons && m.buttons.length) box.append(buttonRow(m.buttons));
  });
  if (!data.messages.length) box.append(el("p", "empty", "Say hello to start."));
  // A failed message the history now shows arrived (after what was shown when it failed) is
  // answered: the same words typed again are a new message. One not shown yet may still be on
  // its way (waiting for its turn, or taken by another instance): its id is kept.
  const u = state.unsent;
  const arrived = (m) => m.role === "user" && m.position > u.after && m.text === u.text;
  if (u && u.conversation === id && data.messages.filter(arrived).length > u.also) {
    state.unsent = null;
  }
  state.shownUpTo = data.messages.at(-1)?.position ?? -1;
  state.sentSinceLoad = 0;
  state.sentTexts = [];
  showEarlierButton(id, data);
  scrollDown(true);
}

// Above the oldest entry shown, when older ones exist: a button that puts the page before it
// in place, keeping what is on screen where it was.
function showEarlierButton(id, data) {
  const box = $("#messages");
  box.querySelector(".earlier")?.remove();
  const oldest = data.messages[0]?.position;
  if (!data.earlier || oldest === undefined) return;
  box.prepend(moreButton("earlier", "Show earlier messages", async (more) => {
    const page = await (await api(`/api/conversations/${encodeURIComponent(id)}/messages?before=${oldest}`)).json();
    if (state.conversation !== id) return;
    const height = box.scrollHeight;
    more.replaceWith(...page.messages.map(entryBubble));
    box.scrollTop += box.scrollHeight - height;
    showEarlierButton(id, page);
  }));
}

// Look for the answer to the last message of conversation `id` in its stored history (every 2 s,
// for up to 3 minutes, while it is open) and show the history once that answer is in: every
// message sent since the history was shown recorded, and an assistant entry after them.
async function awaitAnswer(id) {
  const after = state.shownUpTo;
  const asked = state.sentSinceLoad;
  for (let tries = 0; tries < 90; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    if (state.conversation !== id) return;
    try {
      // `api` throws on a failed answer (caught below).
      const { messages } = await (await api(`/api/conversations/${encodeURIComponent(id)}/messages`)).json();
      const since = messages.filter((m) => m.position > after);
      const users = since.filter((m) => m.role === "user").length;
      if (users >= asked && since.at(-1)?.role === "assistant") {
        if (state.conversation === id) await loadHistory(id);
        return;
      }
    } catch (_) {
      // The server is restarting, or answered with an error: look again.
    }
  }
}

// One stored entry. A reply that ended in a failure sentence (`error`) shows that sentence in
// the error style, as it was shown live.
function entryBubble(m) {
  return fill(el("div", `msg ${m.role}`), m.text, m.error);
}

// Put `text` in `bubble`; its ending `error` sentence, if any, in the error style.
function fill(bubble, text, error) {
  if (error && text.endsWith(error)) {
    bubble.replaceChildren(
      document.createTextNode(text.slice(0, text.length - error.length)),
      el("span", "error", error),
    );
  } else {
    bubble.replaceChildren(document.createTextNode(text));
  }
  return bubble;
}

async function loadNotes(highlightNew) {
  const data = await (await api("/api/notes")).json();
  const ul = $("#notes");
  const before = new Set([...ul.children].map((li) => li.dataset.id));
  ul.replaceChildren();
  for (const n of data.notes) {
    const li = el("li", highlightNew && !before.has(String(n.id)) ? "fresh" : "", n.text);
    li.dataset.id = String(n.id);
    ul.append(li);
  }
  if (!data.notes.length) ul.append(el("li", "empty", "No notes yet."));
}

async function newConversation() {
  const c = await (await api("/api/conversations", { method: "POST" })).json();
  location.hash = c.id;
  return c.id;
}

async function openConversation(id) {
  state.conversation = id;
  await Promise.all([loadHistory(id), loadConversations()]);
  $("#input").focus();
}

// Reads a text/event-stream response body and calls onEvent(name, data) per event.
async function readSse(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

/** What the page says of a message sent again that the server had taken already. */
const ALREADY_TAKEN = "That message had reached us already; its answer shows here when it is ready.";

/** Throws `err` marked as a message the server never took. */
function notSent(err) {
  err.notSent = true;
  throw err;
}

async function send(text, buttonId) {
  if (!state.conversation) await newConversation().then(openConversation).catch(notSent);
  const box = $("#messages");
  box.querySelector(".empty")?.remove();
  const choices = [...box.querySelectorAll(".choices")];
  choices.forEach((row) => row.remove());
  const mine = el("div", "msg user", text);
  box.append(mine);
  let bubble = null;
  let tools = null;
  let thinking = null;
  let failure = null; // the error sentence shown, if the turn failed
  const chips = new Map();
  const bubbles = []; // this answer's bubbles (tool chips go between them)
  // Whatever ends the stream (done, error, a dropped connection), no tool is left running.
  const settleChips = () => {
    for (const chip of chips.values()) {
      if (chip.dataset.state === "running") chip.dataset.state = "not_run";
    }
  };
  const bubbleFor = () => {
    if (!bubble) {
      bubble = el("div", "msg assistant streaming");
      box.append(bubble);
      bubbles.push(bubble);
      tools = null; // later tool calls go below this text
    }
    return bubble;
  };
  scrollDown(true);
  const conversation = state.conversation;
  const u = state.unsent;
  const again = u && u.conversation === conversation && u.text === text && u.buttonId === buttonId;
  const id = again ? u.id : crypto.randomUUID();
  const also = state.sentTexts.filter((t) => t === text).length;
  state.unsent = again ? u : { conversation, text, buttonId, id, after: state.shownUpTo, also };
  const res = await api(`/api/conversations/${encodeURIComponent(conversation)}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      text,
      client_message_id: id,
      ...(buttonId ? { button_id: buttonId } : {}),
    }),
  }).catch((err) => {
    if (again && err.status === 409) {
      // The server had taken it before the connection failed: it is answered once, there.
      state.unsent = null;
      state.sentSinceLoad += 1;
      state.sentTexts.push(text);
      awaitAnswer(conversation);
      throw new Error(ALREADY_TAKEN);
    }
    // Refused (too long, too many, signed out…), or the connection failed: it is not shown as
    // sent; sent again unchanged, it keeps its id (above).
    mine.remove();
    box.append(...choices);
    notSent(err);
  });
  state.unsent = null;
  state.sentSinceLoad += 1;
  state.sentTexts.push(text);
  let finished = false;
  try {
    await readSse(res, (name, ev) => {
      if (name === "done") finished = true;
      onEvent(name, ev);
    });
  } catch (_) {
    // The connection dropped: said below, without the browser's raw error.
  } finally {
    settleChips();
    bubble?.classList.remove("streaming");
    thinking?.remove();
  }
  if (!finished && again) {
    // Sent again and taken already where the first went (another instance of the server, which
    // has no stream of it to give): its answer is there.
    awaitAnswer(conversation);
    throw new Error(ALREADY_TAKEN);
  }
  if (!finished) {
    throw new Error("The connection dropped before the answer finished. Reload to see it.");
  }

  function onEvent(name, ev) {
    switch (name) {
      case "token": {
        thinking?.remove(); thinking = null;
        const b = bubbleFor();
        // A new bubble after tool activity does not need the paragraph break the stream carries.
        b.append(document.createTextNode(b.textContent ? ev.text : ev.text.replace(/^\n+/, "")));
        break;
      }
      case "reasoning":
        if (!thinking) { thinking = el("div", "thinking", "Thinking…"); box.append(thinking); }
        break;
      case "tool_use": {
        if (!tools) { tools = el("div", "tools"); box.append(tools); }
        const chip = el("span", "tool", ev.name);
        chip.dataset.state = "running";
        chip.dataset.tool = ev.name;
        chip.title = JSON.stringify(ev.input);
        tools.append(chip);
        chips.set(ev.id, chip);
        if (bubble) { bubble.classList.remove("streaming"); bubble = null; }
        break;
      }
      case "tool_result": {
        const chip = chips.get(ev.id);
        if (chip) chip.dataset.state = ev.is_error ? "error" : "ok";
        break;
      }
      case "tool_not_run": {
        const chip = chips.get(ev.id);
        if (chip) chip.dataset.state = "not_run";
        break;
      }
      case "effects": {
        const refresh = ev.effects?.refresh || [];
        if (refresh.includes("notes")) loadNotes(true);
        // The timetable panel (timetable.js): the planner changed; show the event it touched.
        if (refresh.includes("planner") && typeof loadTimetable === "function") {
          loadTimetable(ev.effects.event_id);
        }
        break;
      }
      case "error": {
        settleChips();
        failure = ev.message;
        const b = bubbleFor();
        if (b.textContent) b.append(document.createTextNode("\n\n"));
        b.append(el("span", "error", ev.message));
        break;
      }
      case "shaped": {
        // The reply carried markers: show the final text and its buttons instead. Text already
        // shown above this answer's tool chips stays there; the last bubble gets the rest.
        const b = bubbleFor();
        let rest = ev.text;
        for (const earlier of bubbles.slice(0, -1)) {
          const said = earlier.textContent.trim();
          if (rest === null || !rest.trimStart().startsWith(said)) { rest = null; break; }
          rest = rest.trimStart().slice(said.length);
        }
        fill(b, rest === null ? ev.text : rest.trimStart(), failure);
        if (ev.buttons.length) box.append(buttonRow(ev.buttons));
        break;
      }
      case "done":
        settleChips();
        bubble?.classList.remove("streaming");
        thinking?.remove();
        loadConversations();
        loadUsage();
        // Not answered here, but kept and answered by the server itself (a retry, or the next
        // start): show the answer when it is in.
        if (ev.end === "retrying" || ev.end === "interrupted") awaitAnswer(state.conversation);
        break;
    }
    scrollDown();
  }
}

// The usage meter stays hidden until a budget bucket is nearly full (GET /api/usage says when).
const BUCKET_LABELS = {
  user_tokens_minute: "this minute",
  user_tokens_hour: "this hour",
  user_usd_30d: "this month",
  global_usd_30d: "service-wide",
};

async function loadUsage() {
  const meter = $("#usage-meter");
  try {
    const usage = await (await api("/api/usage")).json();
    meter.replaceChildren();
    meter.hidden = !usage.show;
    if (!usage.show) return;
    meter.append(el("span", "meter-title", "Usage"));
    for (const b of usage.buckets) {
      if (b.fraction < usage.show_from) continue;
      const pct = Math.min(100, Math.round(b.fraction * 100));
      const row = el("span", "meter-row");
      row.dataset.bucket = b.bucket;
      const bar = el("span", "meter-bar");
      const fill = el("span", "meter-fill");
      fill.style.width = pct + "%";
      bar.append(fill);
      row.append(el("span", "meter-label", BUCKET_LABELS[b.bucket] || b.bucket), bar, el("span", "meter-pct", pct + "%"));
      meter.append(row);
    }
  } catch {
    meter.hidden = true;
  }
}

$("#composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("#input");
  const text = input.value.trim();
  const pressed = state.pressed;
  state.pressed = null;
  if (!text || state.busy) return;
  state.busy = true;
  $("#send").disabled = true;
  input.value = "";
  setStatus("");
  try {
    await send(text, pressed);
  } catch (err) {
    // A typed message the server did not take goes back in the box, so nothing typed is lost;
    // a press's buttons are back under the reply, to press again.
    if (err.notSent && !pressed && !input.value) input.value = text;
    setStatus(err.message);
  } finally {
    state.busy = false;
    $("#send").disabled = false;
    input.focus();
  }
});

$("#input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("#composer").requestSubmit();
  }
});

$("#new-chat").addEventListener("click", () => newConversation().catch((e) => setStatus(e.message)));

// Phone width: conversations and notes open over the chat from the top bar.
function toggle(which) {
  const open = !document.body.classList.contains(which);
  document.body.classList.remove("show-chats", "show-notes");
  document.body.classList.toggle(which, open);
  $("#show-chats").setAttribute("aria-expanded", String(document.body.classList.contains("show-chats")));
  $("#show-notes").setAttribute("aria-expanded", String(document.body.classList.contains("show-notes")));
}
$("#show-chats").addEventListener("click", () => toggle("show-chats"));
$("#show-notes").addEventListener("click", () => toggle("show-notes"));
$("#conversations").addEventListener("click", (e) => {
  // Opening a conversation closes the list; asking for older ones keeps it open.
  if (e.target.closest("a") && document.body.classList.contains("show-chats")) toggle("show-chats");
});

// The conversation the address names, when its fragment is shaped like one (the server makes
// UUIDs): a fragment is put into API paths, and one like "#../../auth/logout?" must not turn
// the next message into another request.
function conversationInHash() {
  const id = location.hash.slice(1);
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? id : "";
}

window.addEventListener("hashchange", () => {
  const id = conversationInHash();
  if (id && id !== state.conversation) openConversation(id).catch((e) => setStatus(e.message));
});

// Who is signed in, the CSRF token for changes, and ways to sign out: this browser, or every
// session of the person's (a lost phone's too), after which their identity provider is asked
// to check who they are again.
async function loadSession() {
  const s = await (await api("/api/session")).json();
  state.csrf = s.csrf;
  if (!s.sign_in) return;
  const who = $("#who");
  who.hidden = false;
  $("#who-name").textContent = s.user.email || s.user.name;
  const signOut = (path) => () =>
    api(path, { method: "POST" })
      .then(() => { location.href = "/auth/signed-out"; })
      .catch((e) => setStatus(e.message));
  $("#sign-out").addEventListener("click", signOut("/auth/logout"));
  $("#sign-out-everywhere").addEventListener("click", signOut("/auth/logout-everywhere"));
}

(async () => {
  try {
    await loadSession();
    await loadNotes(false);
    loadUsage();
    loadGrant();
    loadLinks();
    const list = await loadConversations();
    const wanted = conversationInHash();
    if (wanted) await openConversation(wanted);
    else if (list.length) location.hash = list[0].id;
    else $("#messages").append(el("p", "empty", "Say hello to start."));
  } catch (err) {
    setStatus(err.message);
  }
})();

// "Link a messaging app": a one-time code and per-platform "open the chat" links.
async function getLinkCode() {
  const out = $("#link-result");
  out.replaceChildren();
  try {
    const data = await (await api("/api/link-code", { method: "POST" })).json();
    out.append(el("p", "link-code", data.code));
    const minutes = Math.round((data.expires_at_ms - Date.now()) / 60000);
    out.append(el("p", "hint", `Works once, for ${minutes} minutes. Send it to Bridle:`));
    const ul = el("ul", "link-list");
    for (const l of data.links) {
      const li = el("li");
      if (l.url) {
        const a = el("a", "", `Open ${l.label}`);
        a.href = l.url;
        a.target = "_blank";
        a.rel = "noopener";
        li.append(a, el("span", "hint", ` — ${l.instruction}`));
      } else {
        li.append(el("strong", "", `${l.label}: `), el("span", "", l.instruction));
      }
      ul.append(li);
    }
    out.append(ul);
  } catch (err) {
    out.append(el("p", "error", err.message));
  }
}
$("#link-button").addEventListener("click", getLinkCode);

// The chats linked to this account, each with a way to unlink it from here (a lost phone's,
// say): its messages then come from a stranger again.
const CHANNEL_NAMES = { whatsapp: "WhatsApp", telegram: "Telegram", slack: "Slack", twilio: "SMS" };
async function loadLinks() {
  const ul = $("#linked");
  try {
    const data = await (await api("/api/links")).json();
    ul.replaceChildren(...data.links.map((l) => {
      const button = el("button", "unlink", "Unlink");
      button.type = "button";
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          await api("/api/links/unlink", {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ channel: l.channel, external_id: l.external_id }),
          });
        } catch (err) {
          setStatus(err.message);
        }
        loadLinks();
      });
      const li = el("li", "linked-chat");
      li.append(el("span", "", `${CHANNEL_NAMES[l.channel] || l.channel}: ${l.external_id} `), button);
      return li;
    }));
  } catch (err) {
    ul.replaceChildren(el("li", "error", err.message));
  }
}

// "What the assistant may do": the person's own grant (read, write, risky); the assistant's
// next call is checked against it. The tools it is offered never change.
async function loadGrant() {
  const select = $("#grant-choice");
  try {
    const g = await (await api("/api/assistant-grant")).json();
    select.replaceChildren(...g.choices.map((c) => {
      const option = el("option", "", `${c.grant}: ${c.meaning}`);
      option.value = c.grant;
      return option;
    }));
    select.value = g.grant;
    select.disabled = false;
  } catch (err) {
    $("#grant-said").textContent = err.message;
  }
}
$("#grant-choice").addEventListener("change", async (e) => {
  const said = $("#grant-said");
  try {
    const g = await (await api("/api/assistant-grant", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ grant: e.target.value }),
    })).json();
    said.textContent = `Saved: the assistant may ${g.meaning}.`;
  } catch (err) {
    said.textContent = err.message;
    loadGrant();
  }
});
