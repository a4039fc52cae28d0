// The chat page: one conversation with the served model through
// /v1/chat/completions (stream: true). Text is only ever set as textContent,
// never parsed as HTML.
import { segments } from "./text.js";

const $ = (id) => document.getElementById(id);
const KEY = "hexserve.apiKey";
const params = ["temperature", "top_p", "max_tokens", "seed"];
const history = []; // {role, content} of the conversation so far
let model = null; // {id, max_model_len}
let running = null; // AbortController of the reply being streamed

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem(KEY);
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

// apiError reads an OpenAI error body ({"error": {...}}), whatever arrived.
async function apiError(res) {
  try {
    const body = await res.json();
    if (body && body.error) return body.error;
  } catch (_) { /* not JSON */ }
  return { message: res.statusText || "no details" };
}

// explain turns a failed request into what to do about it.
function explain(status, err, retryAfter) {
  const msg = err.message || "";
  if (status === 401) {
    askForKey();
    return "Authentication failed: " + msg + " Enter this server's API key under Settings.";
  }
  if (status === 503 && err.code === "server_overloaded") {
    return "The server is busy: its queue is full. Try again " +
      (retryAfter ? "in " + retryAfter + " s." : "in a moment.") + " (" + msg + ")";
  }
  if (err.code === "context_length_exceeded") {
    return "The conversation is too long for the model's context" +
      (model && model.max_model_len ? " (" + model.max_model_len + " tokens)" : "") +
      ": start a new chat, shorten the message or lower Max tokens. (" + msg + ")";
  }
  if (status === 503) return "The server is not ready: " + msg;
  return "Error " + status + ": " + msg;
}

function askForKey() {
  $("keyrow").hidden = false;
  $("settings").open = true;
}

async function loadModel() {
  let res;
  try {
    res = await fetch("/v1/models", { headers: headers() });
  } catch (e) {
    $("model").textContent = "server unreachable";
    showError("Cannot reach the server: " + e.message);
    return;
  }
  if (!res.ok) {
    const retry = res.headers.get("Retry-After");
    $("model").textContent = res.status === 503 ? "loading…" : res.status === 401 ? "API key needed" : "no model";
    showError(explain(res.status, await apiError(res), retry));
    if (res.status === 503) setTimeout(loadModel, (Number(retry) || 2) * 1000); // still loading
    return;
  }
  // Several models: the first loaded one (else the first; it loads with the first message).
  const list = (await res.json()).data;
  const m = list.find((x) => x.loaded) || list[0];
  model = { id: m.id, max_model_len: m.max_model_len };
  $("model").textContent = m.id + (m.max_model_len ? " · context " + m.max_model_len + " tokens" : " · loads with the first message");
  showError("");
}

// render replaces el's content with text: paragraphs and <pre> code blocks.
function render(el, text) {
  const parts = segments(text).map((s) => {
    const node = document.createElement(s.kind === "code" ? "pre" : "div");
    if (s.kind === "code") {
      const code = document.createElement("code");
      code.textContent = s.text;
      if (s.lang) code.dataset.lang = s.lang;
      node.append(code);
    } else {
      node.className = "text";
      node.textContent = s.text;
    }
    return node;
  });
  el.replaceChildren(...parts);
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const body = document.createElement("div");
  body.className = "body";
  render(body, text);
  div.append(body);
  const log = $("log");
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(div);
  if (atBottom) div.scrollIntoView({ block: "end" });
  return div;
}

// reasoning returns the folded reasoning of a reply bubble, made above its
// answer on first use.
function reasoning(reply) {
  let box = reply.querySelector(".reasoning .text");
  if (!box) {
    const details = document.createElement("details");
    details.className = "reasoning";
    const summary = document.createElement("summary");
    summary.textContent = "Reasoning";
    box = document.createElement("div");
    box.className = "text";
    details.append(summary, box);
    reply.prepend(details);
  }
  return box;
}

function settings() {
  const body = {};
  for (const p of params) {
    const v = $(p).value.trim();
    if (v !== "") body[p] = Number(v);
  }
  return body;
}

function setRunning(ctrl) {
  running = ctrl;
  $("send").hidden = !!ctrl;
  $("stop").hidden = !ctrl;
}

// stream reads the SSE body, calling onData with each parsed frame.
async function stream(res, onData) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
      for (const line of event.split(/\r?\n/)) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

const earlier = (n) => n + " earlier message" + (n === 1 ? "" : "s") + " left out";

function stats(div, s) {
  const p = document.createElement("p");
  p.className = "stats";
  const parts = [];
  if (s.tokens != null) parts.push(s.tokens + " tokens");
  if (s.tps != null) parts.push(s.tps.toFixed(1) + " tok/s");
  if (s.ttft != null) parts.push("TTFT " + Math.round(s.ttft) + " ms");
  if (s.cached != null) parts.push(s.cached + " cached");
  if (s.left) parts.push(earlier(s.left));
  if (s.note) parts.push(s.note);
  p.textContent = parts.join(" · ");
  div.append(p);
}

// markCut shows, for the latest reply, which earlier messages the model did
// not see: they are dimmed, and a marker follows them saying how many.
// truncate_middle leaves out the turns after the first (a user message and its
// reply), rolling the oldest ones.
function markCut(left, policy) {
  const log = $("log");
  log.querySelector(".cut")?.remove();
  const msgs = [...log.querySelectorAll(".msg")];
  msgs.forEach((m) => m.classList.remove("left-out"));
  if (!left) return;
  const from = policy === "rolling" ? 0 : 2;
  msgs.slice(from, from + left).forEach((m) => m.classList.add("left-out"));
  const cut = document.createElement("p");
  cut.className = "cut";
  cut.textContent = earlier(left) + " of the context of the latest reply";
  msgs[Math.min(from + left, msgs.length - 1)].before(cut);
}

// post sends the conversation. A conversation longer than the window keeps
// going: the server leaves the oldest turns out (truncate_middle keeps the
// system prompt, the first turn and the last) and says how many in
// X-Hexserve-Context-Truncated. When the first turn itself leaves no room
// (a long first message or reply), rolling leaves it out too.
async function post(messages, signal) {
  const body = {
    model: model.id, messages, stream: true, stream_options: { include_usage: true },
    context_overflow: "truncate_middle", ...settings(),
  };
  const req = () => fetch("/v1/chat/completions", {
    method: "POST", headers: headers(), body: JSON.stringify(body), signal,
  });
  const res = await req();
  if (res.status !== 400 || !history.length) return { res, policy: body.context_overflow };
  const err = await apiError(res);
  if (err.code !== "context_length_exceeded") return { res, policy: body.context_overflow, err };
  body.context_overflow = "rolling";
  return { res: await req(), policy: body.context_overflow };
}

// ending says how a reply ended: "length" is the window when the prompt and
// the reply fill it (usage), else max_tokens.
function ending(finish, usage) {
  if (finish !== "length") return null;
  const full = usage && model.max_model_len && usage.total_tokens >= model.max_model_len;
  return full ? "context window full" : "max tokens reached";
}

async function send(text) {
  showError("");
  if (!model) await loadModel();
  if (!model) return false;
  const user = bubble("user", text);
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history, { role: "user", content: text });
  const ctrl = new AbortController();
  setRunning(ctrl);
  const start = performance.now();
  let reply = null, first = null, out = "", thought = "", usage = null, timings = null, finish = null, failure = null, left = 0;
  try {
    const { res, policy, err } = await post(messages, ctrl.signal);
    if (!res.ok) {
      failure = explain(res.status, err || await apiError(res), res.headers.get("Retry-After"));
    } else {
      left = Number(res.headers.get("X-Hexserve-Context-Truncated")) || 0;
      markCut(left, policy);
      reply = bubble("assistant", "");
      reply.classList.add("streaming");
      const el = reply.querySelector(".body");
      await stream(res, (frame) => {
        if (frame.error) throw new Error(explain(200, frame.error));
        if (frame.usage) usage = frame.usage;
        if (frame.timings) timings = frame.timings; // llama.cpp's extension, on the last frame
        const c = frame.choices && frame.choices[0];
        if (!c) return;
        if (c.finish_reason) finish = c.finish_reason;
        const r = c.delta && c.delta.reasoning_content;
        if (r) {
          if (first === null) first = performance.now();
          thought += r;
          reasoning(reply).textContent = thought;
        }
        const d = c.delta && c.delta.content;
        if (d) {
          if (first === null) first = performance.now();
          out += d;
          render(el, out);
          const log = $("log");
          if (log.scrollHeight - log.scrollTop - log.clientHeight < 120) reply.scrollIntoView({ block: "end" });
        }
      });
    }
  } catch (e) {
    if (e.name !== "AbortError") failure = e.message.startsWith("Failed to fetch") ? "Cannot reach the server: " + e.message : e.message;
  }
  setRunning(null);
  if (!reply) {
    user.remove(); // nothing was said: give the text back to edit and resend
    showError(failure || "The request was stopped.");
    return false;
  }
  reply.classList.remove("streaming");
  if (!reply.isConnected) return true; // "New chat" during the reply
  history.push({ role: "user", content: text }, { role: "assistant", content: out });
  if (finish === "length" && !model.max_model_len) await loadModel(); // loaded with this message
  const s = { ttft: first === null ? null : first - start, left };
  if (usage) {
    s.tokens = usage.completion_tokens;
    s.cached = (usage.prompt_tokens_details && usage.prompt_tokens_details.cached_tokens) || 0;
  }
  if (timings && timings.predicted_per_second > 0) s.tps = timings.predicted_per_second;
  if (ctrl.signal.aborted) s.note = "stopped";
  else s.note = ending(finish, usage);
  if (failure) {
    s.note = "failed";
    showError(failure);
  }
  stats(reply, s);
  return true;
}

function init() {
  const stored = localStorage.getItem(KEY);
  if (stored) {
    $("key").value = stored;
    $("keyrow").hidden = false;
  }
  $("key").addEventListener("change", () => {
    const v = $("key").value.trim();
    if (v) localStorage.setItem(KEY, v);
    else localStorage.removeItem(KEY);
    loadModel();
  });
  $("form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = $("input").value.trim();
    if (!text || running) return;
    $("input").value = "";
    if (!(await send(text))) $("input").value = text;
    $("input").focus();
  });
  $("input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $("form").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => running && running.abort());
  $("new").addEventListener("click", () => {
    if (running) running.abort();
    history.length = 0;
    $("log").replaceChildren();
    showError("");
  });
  loadModel();
}

init();
