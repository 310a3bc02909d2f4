// "Connect an AI client": create, list and revoke MCP access tokens, and undo a client's last
// change (a revoked one's too): the page shows what would be put back, and asks first.
"use strict";

const $ = (id) => document.getElementById(id);
let csrf = null;

async function api(path, options = {}) {
  if (options.method && options.method !== "GET" && csrf) {
    options.headers = { ...(options.headers || {}), "X-CSRF-Token": csrf };
  }
  const res = await fetch(path, options);
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw new Error((body && body.error) || "Something went wrong; try again.");
  return body;
}

function show(list) {
  const ul = $("tokens");
  ul.replaceChildren();
  for (const t of list) {
    const li = document.createElement("li");
    li.textContent = `${t.name} — ${t.scope} — ${t.status} (${t.id}) `;
    if (t.status === "live") {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Revoke";
      b.onclick = async () => {
        try {
          await api(`/api/mcp-tokens/${encodeURIComponent(t.id)}`, { method: "DELETE" });
          await load();
        } catch (e) {
          $("problem").textContent = e.message;
        }
      };
      li.append(b);
    }
    const undo = document.createElement("button");
    undo.type = "button";
    undo.textContent = "Undo its last change";
    undo.onclick = () => undoLast(t);
    li.append(" ", undo);
    ul.append(li);
  }
}

// Read what undoing the client's last change would put back, ask, then undo exactly that one.
async function undoLast(t) {
  $("problem").textContent = "";
  const path = `/api/mcp-tokens/${encodeURIComponent(t.id)}/undo`;
  try {
    const { change } = await api(path);
    if (!change) {
      $("problem").textContent = `${t.name} has no change left to undo.`;
      return;
    }
    const made = new Date(change.made_at_ms).toLocaleString();
    const asked = `Undo ${t.name}'s change of ${made}? It would:\n- ${change.lines.join("\n- ")}`;
    if (!window.confirm(asked)) return;
    const done = await api(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ action: change.action }),
    });
    $("problem").textContent = done.undone;
  } catch (e) {
    $("problem").textContent = e.message;
  }
}

async function load() {
  const body = await api("/api/mcp-tokens");
  $("mcp-url").textContent = body.url;
  show(body.tokens);
}

$("new-token").onsubmit = async (event) => {
  event.preventDefault();
  $("problem").textContent = "";
  try {
    const made = await api("/api/mcp-tokens", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        name: $("token-name").value,
        scope: $("token-scope").value,
        expires_in_days: Number($("token-days").value),
      }),
    });
    $("token-value").textContent = made.token;
    $("example").textContent = JSON.stringify(
      { mcpServers: { bridle: { url: made.url, headers: { Authorization: `Bearer ${made.token}` } } } },
      null,
      2,
    );
    $("created").hidden = false;
    await load();
  } catch (e) {
    $("problem").textContent = e.message;
  }
};

$("copy").onclick = () => navigator.clipboard.writeText($("token-value").textContent);

(async () => {
  try {
    const session = await api("/api/session");
    csrf = session.csrf;
    $("no-sign-in").hidden = session.sign_in;
    await load();
  } catch (e) {
    $("problem").textContent = e.message;
  }
})();
