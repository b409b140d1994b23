// playdeck web: the page's one script. It keeps the view current from
// the server's event stream and sends the commands its buttons carry.
// Everything it inserts is markup the server rendered and escaped; it
// never builds markup from what it receives otherwise.
"use strict";

function say(text, bad) {
  const m = document.getElementById("msg");
  if (!m) return;
  m.textContent = text;
  m.className = bad ? "bad" : "ok";
}

// A view replaced keeps what did not change: a card (an element with an
// id) whose markup is the same is the very element it was, so a tap on
// it, its focus and what was typed in it are not lost; the inputs of a
// card that did change keep what was typed.
function swap(el, html) {
  const kept = {};
  el.querySelectorAll("input[id]").forEach((i) => { kept[i.id] = i.value; });
  const focus = document.activeElement && document.activeElement.id;
  const box = document.createElement("div");
  box.innerHTML = html;
  box.querySelectorAll("article[id]").forEach((fresh) => {
    const old = document.getElementById(fresh.id);
    if (old && el.contains(old) && old.dataset.html === fresh.outerHTML) {
      fresh.replaceWith(old);
    } else {
      fresh.dataset.html = fresh.outerHTML;
    }
  });
  el.replaceChildren(...box.childNodes);
  for (const id in kept) {
    const i = document.getElementById(id);
    if (i) i.value = kept[id];
  }
  if (focus) {
    const f = document.getElementById(focus);
    if (f) f.focus();
  }
}

function listen() {
  // What each card was rendered as, to know it again in the next view.
  document.querySelectorAll("article[id]").forEach((a) => {
    const h = a.outerHTML;
    a.dataset.html = h;
  });
  const url = document.body.dataset.stream;
  if (!url) return;
  const es = new EventSource(url);
  es.addEventListener("view", (e) => {
    const target = document.getElementById("opview") || document.getElementById("view");
    if (document.getElementById("opview")) {
      const box = document.createElement("div");
      box.innerHTML = e.data;
      const fresh = box.firstElementChild;
      if (fresh) swap(target, fresh.innerHTML);
    } else {
      swap(target, e.data);
    }
  });
  es.addEventListener("log", (e) => {
    document.body.dataset.seq = e.lastEventId;
  });
  es.addEventListener("turns", (e) => {
    const list = document.getElementById("turns");
    if (!list) return;
    const nl = e.data.indexOf("\n");
    const from = parseInt(e.data.slice(0, nl), 10) || 0;
    while (list.children.length > from) list.removeChild(list.lastElementChild);
    list.insertAdjacentHTML("beforeend", e.data.slice(nl + 1));
  });
  es.addEventListener("revoked", (e) => {
    es.close();
    say(e.data + "; pair it again with `playdeck web pair`", true);
  });
}

async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  let answer = {};
  try { answer = await r.json(); } catch (_) { /* not JSON */ }
  return { status: r.status, answer };
}

function runOf() {
  const m = location.pathname.match(/^\/runs\/([^/]+)/);
  return m ? m[1] : null;
}

// Several commands from one button (every failure retried), one after
// another; what each answered, summed up.
async function commands(button) {
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  const run = runOf();
  const cmds = JSON.parse(button.dataset.cmds);
  button.disabled = true;
  let done = 0;
  const refused = [];
  try {
    for (const cmd of cmds) {
      const { answer } = await post("/api/runs/" + encodeURIComponent(run), cmd);
      if (answer.ok) done += 1;
      else refused.push(cmd.op + ": " + ((answer.error && answer.error.message) || "refused"));
    }
  } catch (e) {
    refused.push("the server did not answer: " + e);
  } finally {
    button.disabled = false;
  }
  say(cmds[0].cmd + ": " + done + " of " + cmds.length + " done" +
      (refused.length ? "; " + refused.join("; ") : ""), refused.length > 0);
}

async function command(button) {
  const cmd = JSON.parse(button.dataset.cmd);
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  if (button.dataset.input) {
    const input = document.getElementById(button.dataset.input);
    const text = input ? input.value.trim() : "";
    if (button.dataset.words === "raise") {
      if (!text) { say("say what to raise: usd=+5 or tokens=+100000", true); return; }
      cmd.raise = text.split(/\s+/);
    } else if (text) {
      cmd[button.dataset.words] = text;
    } else if (cmd.cmd === "say") {
      say("write what to say first", true);
      return;
    }
  }
  const card = button.closest("[data-run]");
  const run = (card && card.dataset.run) || runOf();
  if (!run) { say("which run? open it first", true); return; }
  button.disabled = true;
  try {
    const { status, answer } = await post("/api/runs/" + encodeURIComponent(run), cmd);
    if (answer.ok) {
      say(answer.message || "done", false);
    } else {
      const err = answer.error || {};
      // A card answered elsewhere, or one whose ground moved: the stream
      // brings the new state; say why nothing was done.
      say((err.message || ("refused (" + status + ")")), true);
    }
  } catch (e) {
    say("the server did not answer: " + e, true);
  } finally {
    button.disabled = false;
  }
}

async function pair(form) {
  const name = form.querySelector("input[name=name]").value.trim();
  const body = { code: form.dataset.pair };
  if (name) body.name = name;
  const { answer } = await post("/api/pair", body);
  if (answer.ok) {
    say("paired as " + answer.device.name, false);
    location.href = "/";
  } else {
    say((answer.error && answer.error.message) || "pairing failed", true);
  }
}

document.addEventListener("click", (e) => {
  const b = e.target.closest("button[data-cmd]");
  if (b) { e.preventDefault(); command(b); return; }
  const many = e.target.closest("button[data-cmds]");
  if (many) { e.preventDefault(); commands(many); }
});
document.addEventListener("submit", (e) => {
  const f = e.target.closest("form[data-pair]");
  if (f) { e.preventDefault(); pair(f); }
});
document.addEventListener("DOMContentLoaded", listen);
