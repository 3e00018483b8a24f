// plainllama's chat page: a conversation with /v1/chat/completions, streamed (Server-Sent Events), kept in
// localStorage. Model text only ever reaches the page as text nodes (textContent): never parsed as HTML.
"use strict";

const STORE_CHAT = "plainllama.chat";
const STORE_SETTINGS = "plainllama.settings";
const $ = (id) => document.getElementById(id);

let chat = { messages: [] };  // {role: "user" | "assistant", content, meta: {...}} in order
let running = null;            // the reply being generated: {controller, message, element}

// ---- storage ----

function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v && typeof v === "object" ? v : fallback;
  } catch {
    return fallback;
  }
}

function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // storage full or disabled: the page works on, without keeping the conversation
  }
}

function saveChat() { save(STORE_CHAT, chat); }

// ---- settings ----

const FIELDS = { system: "system", temperature: "temperature", top_p: "top-p", max_tokens: "max-tokens",
                 api_key: "api-key" };

function readSettings() {
  const max = parseInt($("max-tokens").value, 10);
  return {
    system: $("system").value,
    temperature: Number($("temperature").value),
    top_p: Number($("top-p").value),
    max_tokens: Number.isFinite(max) && max >= 1 ? max : 512,
    api_key: $("api-key").value.trim(),
  };
}

function showSliders() {
  $("temperature-value").textContent = Number($("temperature").value).toFixed(2);
  $("top-p-value").textContent = Number($("top-p").value).toFixed(2);
}

function initSettings() {
  const stored = load(STORE_SETTINGS, {});
  for (const [key, id] of Object.entries(FIELDS))
    if (stored[key] !== undefined && stored[key] !== null) $(id).value = String(stored[key]);
  showSliders();
  for (const id of Object.values(FIELDS)) {
    $(id).addEventListener("input", () => {
      showSliders();
      save(STORE_SETTINGS, readSettings());
    });
  }
  $("api-key").addEventListener("change", loadModel);
  $("settings").addEventListener("submit", (e) => e.preventDefault());
  $("settings-toggle").addEventListener("click", () => {
    const open = $("settings").classList.toggle("open");
    $("settings-toggle").setAttribute("aria-expanded", String(open));
  });
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = readSettings().api_key;
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

// ---- messages from the server ----

function showBanner(text) {
  $("banner").textContent = text;
  $("banner").hidden = false;
}

function clearBanner() { $("banner").hidden = true; }

// A clear sentence for an HTTP error: the server's own message (OpenAI's error shape) and what to do.
async function errorText(res) {
  let message = "";
  try {
    message = (await res.json())?.error?.message || "";
  } catch {
    // not JSON (a proxy's page): the status says enough
  }
  if (res.status === 401) {
    return readSettings().api_key
      ? `The server refused the API key (401: ${message || "wrong API key"}). Check the key under Settings.`
      : `This server needs an API key (401). Enter it under Settings → API key.`;
  }
  if (res.status === 502 || res.status === 503 || res.status === 504) {
    const after = res.headers.get("Retry-After");
    return `The server is busy or unavailable (${res.status}${message ? ": " + message : ""}). ` +
           `Try again${after ? " in " + after + " s" : " in a moment"}.`;
  }
  return `The server answered ${res.status}${message ? ": " + message : ""}.`;
}

async function loadModel() {
  try {
    const res = await fetch("v1/models", { headers: headers() });
    if (!res.ok) {
      $("model").textContent = "";
      showBanner(await errorText(res));
      return;
    }
    const data = await res.json();
    $("model").textContent = data?.data?.[0]?.id || "";
    clearBanner();
  } catch (e) {
    showBanner(`Cannot reach the server (${e.message}).`);
  }
}

// ---- Markdown-ish text: fenced code blocks, inline code and bold; the rest as written ----

function inline(parent, text) {
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*/g;
  let at = 0;
  for (let m; (m = re.exec(text)) !== null;) {
    if (m.index > at) parent.append(text.slice(at, m.index));
    const el = document.createElement(m[1] !== undefined ? "code" : "strong");
    el.textContent = m[1] !== undefined ? m[1] : m[2];
    parent.append(el);
    at = re.lastIndex;
  }
  if (at < text.length) parent.append(text.slice(at));
}

function renderText(el, text) {
  el.replaceChildren();
  // a fence not closed yet (a reply still streaming) runs to the end
  const fence = /```([^\n`]*)\n?([\s\S]*?)(?:```|$)/g;
  let at = 0;
  for (let m; at < text.length && (m = fence.exec(text)) !== null;) {
    if (m.index > at) inline(el, text.slice(at, m.index).replace(/\n$/, ""));
    const pre = document.createElement("pre");
    const lang = m[1].trim();
    if (lang) {
      const label = document.createElement("span");
      label.className = "lang";
      label.textContent = lang;
      pre.append(label);
    }
    const code = document.createElement("code");
    code.textContent = m[2].replace(/\n$/, "");
    pre.append(code);
    el.append(pre);
    at = fence.lastIndex;
    if (m[0].length === 0) break;
    if (at < text.length && text[at] === "\n") ++at;
  }
  if (at < text.length) inline(el, text.slice(at));
}

// ---- the conversation on the page ----

function statsText(meta) {
  if (!meta) return "";
  const parts = [];
  if (meta.tokens !== undefined) parts.push(`${meta.tokens} token${meta.tokens === 1 ? "" : "s"}`);
  if (meta.tokens_per_s) parts.push(`${meta.tokens_per_s.toFixed(1)} tok/s`);
  if (meta.prompt_tokens !== undefined)
    parts.push(`prompt ${meta.prompt_tokens}` + (meta.cached_tokens ? ` (${meta.cached_tokens} cached)` : ""));
  if (meta.seconds !== undefined) parts.push(`${meta.seconds.toFixed(meta.seconds < 10 ? 2 : 1)} s`);
  if (meta.finish === "length") parts.push("length limit reached");
  if (meta.stopped) parts.push("stopped");
  return parts.join(" · ");
}

function messageElement(m, index) {
  const el = document.createElement("div");
  el.className = "msg " + m.role;
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = m.role === "user" ? "You" : "Assistant";
  const body = document.createElement("div");
  body.className = "body";
  renderText(body, m.role === "assistant" ? m.content.trimStart() : m.content);
  el.append(who, body);
  if (m.role === "assistant") {
    const meta = document.createElement("div");
    meta.className = "meta";
    fillMeta(meta, m, index === chat.messages.length - 1);
    el.append(meta);
  }
  return el;
}

function fillMeta(meta, m, last) {
  meta.replaceChildren();
  const stats = statsText(m.meta);
  if (stats) {
    const span = document.createElement("span");
    span.className = "stats";
    span.textContent = stats;
    meta.append(span);
  }
  if (m.meta?.error) {
    const span = document.createElement("span");
    span.className = "error";
    span.textContent = m.meta.error;
    meta.append(span);
  }
  if (last && !running) {
    const again = document.createElement("button");
    again.type = "button";
    again.className = "regenerate";
    again.textContent = "Regenerate";
    again.addEventListener("click", regenerate);
    meta.append(again);
  }
}

function nearBottom() {
  const box = $("messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollDown() { $("messages").scrollTop = $("messages").scrollHeight; }

function renderAll() {
  const box = $("messages");
  box.replaceChildren();
  if (chat.messages.length === 0) {
    const empty = document.createElement("p");
    empty.id = "empty";
    empty.className = "muted";
    empty.textContent = "Ask something to start. Enter sends, Shift+Enter starts a new line.";
    box.append(empty);
  }
  chat.messages.forEach((m, i) => box.append(messageElement(m, i)));
  $("send").hidden = !!running;
  $("stop").hidden = !running;
  scrollDown();
}

// ---- generating a reply ----

// The events of a Server-Sent Events body: each event's data, as they arrive.
async function* events(res, signal) {
  const reader = res.body.getReader();
  signal.addEventListener("abort", () => reader.cancel().catch(() => {}));
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    for (let end; (end = buffer.indexOf("\n\n")) >= 0;) {
      const data = buffer.slice(0, end).split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      buffer = buffer.slice(end + 2);
      if (data) yield data;
    }
  }
}

async function generate() {
  const settings = readSettings();
  const messages = [];
  if (settings.system.trim()) messages.push({ role: "system", content: settings.system });
  for (const m of chat.messages) messages.push({ role: m.role, content: m.content });

  const reply = { role: "assistant", content: "", meta: {} };
  chat.messages.push(reply);
  const controller = new AbortController();
  running = { controller, message: reply };
  renderAll();
  const element = $("messages").lastElementChild;
  const body = element.querySelector(".body");
  const meta = element.querySelector(".meta");

  let pending = false;  // a render waits for the next frame: many tokens in one frame make one update
  let saved = performance.now();
  const update = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (performance.now() - saved > 1000) {  // a reload in the middle of a reply keeps most of it
        saved = performance.now();
        saveChat();
      }
      const follow = nearBottom();
      renderText(body, reply.content.trimStart());
      fillMeta(meta, reply, false);
      if (follow) scrollDown();
    });
  };

  const t0 = performance.now();
  let first = null, done = false, finish = null, usage = null;
  try {
    const res = await fetch("v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: controller.signal,
      body: JSON.stringify({
        messages, stream: true, stream_options: { include_usage: true },
        temperature: settings.temperature, top_p: settings.top_p, max_tokens: settings.max_tokens,
      }),
    });
    if (!res.ok) throw new Error(await errorText(res));
    clearBanner();
    for await (const data of events(res, controller.signal)) {
      if (data === "[DONE]") {
        done = true;
        break;
      }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(`The server ended the reply: ${chunk.error.message || "error"}`);
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const piece = choice.delta?.content;
        if (piece) {
          if (first === null) first = performance.now();
          reply.content += piece;
          update();
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    if (!done || !finish) throw new Error("The reply was cut off: the stream ended before its end.");
  } catch (e) {
    if (controller.signal.aborted) reply.meta.stopped = true;
    else reply.meta.error = e.message;
  }
  const end = performance.now();
  if (usage) {
    reply.meta.tokens = usage.completion_tokens;
    reply.meta.prompt_tokens = usage.prompt_tokens;
    reply.meta.cached_tokens = usage.prompt_tokens_details?.cached_tokens || 0;
    // over the whole request as the browser saw it: a fast server's events come in bursts, too close to time
    // one by one
    if (usage.completion_tokens > 0 && end > t0) reply.meta.tokens_per_s = usage.completion_tokens / ((end - t0) / 1000);
  }
  if (first !== null || usage) reply.meta.seconds = (end - t0) / 1000;
  if (finish) reply.meta.finish = finish;
  running = null;

  if (!reply.content) {
    // Nothing came: the reply and the question leave the conversation, the question back to the input box.
    chat.messages.pop();
    const asked = chat.messages.pop();
    if (asked && !$("input").value) $("input").value = asked.content;
    if (reply.meta.error) showBanner(reply.meta.error);
  }
  saveChat();
  renderAll();
}

function send(event) {
  event?.preventDefault();
  const text = $("input").value;
  if (running || !text.trim()) return;
  $("input").value = "";
  chat.messages.push({ role: "user", content: text });
  saveChat();
  generate();
}

function regenerate() {
  if (running) return;
  if (chat.messages.at(-1)?.role === "assistant") chat.messages.pop();
  if (chat.messages.at(-1)?.role !== "user") return;
  generate();
}

function stop() {
  if (running) running.controller.abort();
}

function newChat() {
  stop();
  chat = { messages: [] };
  saveChat();
  clearBanner();
  renderAll();
  $("input").focus();
}

function init() {
  initSettings();
  const stored = load(STORE_CHAT, { messages: [] });
  chat.messages = (Array.isArray(stored.messages) ? stored.messages : []).filter(
    (m) => m && (m.role === "user" || m.role === "assistant") && typeof m.content === "string");
  $("composer").addEventListener("submit", send);
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
  });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newChat);
  renderAll();
  loadModel();
}

init();
