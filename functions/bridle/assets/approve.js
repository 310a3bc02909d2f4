// "Approve a change": a risky change an AI client asked for, approved or declined by its owner.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const token = params.get("token") || "";
const call = params.get("call") || "";
// Only ids of the shapes Bridle makes go into the API's path (not "..", say).
const wellFormed = /^tok_[0-9a-f]{12}$/.test(token) && /^[0-9a-f]{64}$/.test(call);
const path = `/api/mcp-approvals/${token}/${call}`;
let csrf = null;
let shown = null;

async function api(url, options = {}) {
  if (options.method && options.method !== "GET" && csrf) {
    options.headers = { ...(options.headers || {}), "X-CSRF-Token": csrf };
  }
  const res = await fetch(url, options);
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Error((body && body.error) || "Something went wrong; try again.");
  return body;
}

async function answer(approve) {
  $("problem").textContent = "";
  $("yes").disabled = $("no").disabled = true;
  try {
    const done = await api(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ approve, description: shown }),
    });
    $("done").textContent =
      done.answer === "approved"
        ? "Approved. Your client can make the change now (within 10 minutes)."
        : "Declined. Nothing will be changed.";
  } catch (e) {
    $("problem").textContent = e.message;
  }
}

$("yes").onclick = () => answer(true);
$("no").onclick = () => answer(false);

(async () => {
  try {
    if (!wellFormed) throw new Error("This address names no question; open the link your AI client gave again.");
    const session = await api("/api/session");
    csrf = session.csrf;
    const question = await api(path);
    shown = question.description;
    $("client").textContent = question.client;
    $("description").textContent = question.description;
    $("yes").disabled = $("no").disabled = false;
  } catch (e) {
    $("problem").textContent = e.message;
  }
})();
