// Drives the chat page at / in headless Chromium (the system's, through
// puppeteer-core: nothing is downloaded) against bin/hexserve serving the
// tiny bundle on hostsim. Run by scripts/test-web.sh, which sets
// HEXSERVE_BIN, HEXSERVE_BUNDLE, HOSTSIM_LIBS and CHROMIUM.
// HEXSERVE_SCREENSHOTS=dir also writes chat-page.png (laptop) and
// chat-page-phone.png there.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run scripts/test-web.sh)`);
  return v;
};
const KEY = "sk-web-test";
const tmp = mkdtempSync(join(tmpdir(), "hexserve-web-"));
let open, keyed, fast, thinking, browser;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

// startServer runs hexserve with a one-request queue and slow decode steps
// (every decode execute lasts at least decodeUs, 40 ms by default, so a reply
// streams in many steps and can be stopped).
async function startServer(name, extra = "", decodeUs = 40000, model = "", vars = {}) {
  const port = await freePort();
  const libs = env("HOSTSIM_LIBS");
  const cfg = join(tmp, name + ".yaml");
  writeFileSync(cfg, `server:
  listen: 127.0.0.1:${port}
${extra}
model:
  bundle: ${env("HEXSERVE_BUNDLE")}
${model}
  libraries: {backend: ${libs}/libQnnHtp.so, system: ${libs}/libQnnSystem.so, rpcmem: ${libs}/libcdsprpc.so}
engine:
  queue_length: 1
  max_sequences: 1 # one request runs at a time, so the queue-full case below is exact
chat: {date: 26 Jul 2024} # as configs/dev.yaml: Llama 3.2's template prints the date, and the replies checked below follow it
log: {level: debug, format: json}
`);
  const proc = spawn(env("HEXSERVE_BIN"), ["serve", "--config", cfg], {
    env: { ...process.env, HOSTSIM_LATENCY_US_DECODE: String(decodeUs), ...vars },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const srv = { url: `http://127.0.0.1:${port}`, proc, log: "" };
  proc.stdout.on("data", (d) => (srv.log += d));
  proc.stderr.on("data", (d) => (srv.log += d));
  for (let i = 0; i < 300; i++) {
    if (proc.exitCode !== null) throw new Error(`${name} server exited:\n${srv.log}`);
    try {
      if ((await fetch(srv.url + "/health")).ok) return srv;
    } catch (_) { /* not listening yet */ }
    await sleep(100);
  }
  throw new Error(`${name} server not healthy in 30 s:\n${srv.log}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, cond, ms = 10000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) {
    if (await cond()) return;
  }
  assert.fail(`timed out waiting for ${what}`);
}

// newPage opens a page in a fresh browser context (its own localStorage) and
// records console errors, page errors, CSP violations and every request.
async function newPage(srv) {
  const ctx = await browser.createBrowserContext();
  const page = await ctx.newPage();
  page.problems = [];
  page.requests = [];
  page.on("console", (m) => m.type() === "error" && page.problems.push("console: " + m.text()));
  page.on("pageerror", (e) => page.problems.push("pageerror: " + e.message));
  page.on("request", (r) => page.requests.push({ url: r.url(), auth: r.headers().authorization }));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));
  });
  await page.setViewport({ width: 1280, height: 800 });
  const res = await page.goto(srv.url + "/", { waitUntil: "load" });
  assert.equal(res.status(), 200);
  return page;
}

// unexpected drops the browser's "Failed to load resource" lines for the
// statuses a step provoked on purpose; everything else is a failure.
function unexpected(page, ...statuses) {
  return page.problems.filter((p) =>
    !statuses.some((s) => p.includes(`Failed to load resource: the server responded with a status of ${s}`)));
}

// send types a message and submits it with Enter.
async function send(page, text) {
  await page.$eval("#input", (el, t) => { el.value = t; }, text);
  await page.focus("#input");
  await page.keyboard.press("Enter");
}

const text = (page, sel) => page.$eval(sel, (el) => el.textContent);
const visible = (page, sel) => page.$eval(sel, (el) => !el.hidden);
const replies = (page) => page.$$eval("#log .assistant", (els) => els.length);

// watchReply records the length of the newest reply's text at every change
// until its stats line appears, and resolves with the distinct lengths.
function watchReply(page, n) {
  return page.evaluate((n) => new Promise((resolve) => {
    const seen = [];
    const check = () => {
      const reply = document.querySelectorAll("#log .assistant")[n];
      if (!reply) return;
      const len = reply.querySelector(".body").textContent.length;
      if (len > 0 && seen[seen.length - 1] !== len) seen.push(len);
      if (reply.querySelector(".stats")) {
        obs.disconnect();
        resolve(seen);
      }
    };
    const obs = new MutationObserver(check);
    obs.observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
    check();
  }), n);
}

before(async () => {
  open = await startServer("open");
  // The others start side by side; the reasoning server's script is
  // tokenized by the open one.
  [keyed, fast, thinking, browser] = await Promise.all([
    startServer("keyed", `  api_keys: [${KEY}]`),
    startServer("fast", "", 0),
    startThinking(),
    puppeteer.launch({
      executablePath: env("CHROMIUM"),
      headless: false, // --headless is among the args, as this workplace runs Chromium
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--user-data-dir=" + mkdtempSync(join(tmp, "chromium-"))],
    }),
  ]);
});

// startThinking runs a server with a reasoning parser, its tiny model
// scripted to think first (the tokens of <think>…</think> and the answer,
// then end of turn).
async function startThinking() {
  const r = await fetch(open.url + "/tokenize", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content: "<think>\nCount the waves.\n</think>\n\nThe sea is calm.", add_special_tokens: false }),
  });
  const script = join(tmp, "think.txt");
  writeFileSync(script, [...(await r.json()).tokens, 128009].join(" ") + "\n");
  return startServer("thinking", "", 40000, "  reasoning_parser: qwen3", { HOSTSIM_SCRIPT: script });
}

after(async () => {
  await browser?.close();
  for (const s of [open, keyed, fast, thinking]) {
    if (s && s.proc.exitCode === null) {
      s.proc.kill("SIGTERM");
      await new Promise((r) => s.proc.once("exit", r));
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

test("chat: streams, stops, reports a full queue", async (t) => {
  let t0 = Date.now();
  const step = (name) => { t.diagnostic(`${name}: ${Date.now() - t0} ms`); t0 = Date.now(); };
  const page = await newPage(open);
  const models = await (await fetch(open.url + "/v1/models")).json();
  const { id, max_model_len } = models.data[0];
  await until("the model line", async () => (await text(page, "#model")).includes(id));
  assert.equal(await text(page, "#model"), `${id} · context ${max_model_len} tokens`);
  assert.equal(await visible(page, "#keyrow"), false, "no key field on a server without keys");

  step("load");
  // A short reply streams in several steps and ends with its figures.
  await page.click("#settings summary");
  await page.type("#max_tokens", "24");
  await page.type("#seed", "7");
  await page.click("#settings summary");
  let seen = watchReply(page, 0);
  await send(page, "Write a haiku about the sea.");
  let steps = await seen;
  assert.ok(steps.length > 1, `reply appeared in ${steps.length} step(s): ${steps}`);
  assert.match(await text(page, "#log .assistant .stats"),
    /^24 tokens · \d+(\.\d)? tok\/s · TTFT \d+ ms · \d+ cached · max tokens reached$/);
  const body = await page.$eval("#log .assistant .body", (el) => el.textContent);
  assert.ok(body.length > 0);

  step("first reply");
  // A second turn carries the conversation.
  seen = watchReply(page, 1);
  await send(page, "And one about the mountains?");
  steps = await seen;
  assert.ok(steps.length > 1, `second reply appeared in ${steps.length} step(s)`);
  assert.equal(await page.$$eval("#log .user", (els) => els.length), 2);

  step("second reply");
  if (process.env.HEXSERVE_SCREENSHOTS) {
    const dir = process.env.HEXSERVE_SCREENSHOTS;
    await page.screenshot({ path: join(dir, "chat-page.png") });
    await page.setViewport({ width: 390, height: 844 }); // isMobile would reload the page
    await page.screenshot({ path: join(dir, "chat-page-phone.png") });
    await page.setViewport({ width: 1280, height: 800 });
  }

  step("screenshots");
  // Stop: a reply without max_tokens runs to the end of the context
  // (hundreds of slowed decode steps); the stop button aborts the fetch and the
  // server cancels the generation.
  await page.$eval("#max_tokens", (el) => { el.value = ""; });
  seen = watchReply(page, 2);
  await send(page, "Tell me a very long story.");
  await until("the long reply to stream", async () =>
    (await replies(page)) === 3 && (await text(page, "#log .assistant:last-child .body")).length > 10);
  assert.equal(await visible(page, "#send"), false);
  await page.click("#stop");
  await seen;
  assert.match(await text(page, "#log .assistant:last-child .stats"), /TTFT \d+ ms · stopped$/);
  assert.equal(await visible(page, "#send"), true);
  await until("the server to log the cancellation", () => /"finish":"cancelled"/.test(open.log));

  step("stop");
  // A full queue: one request runs (max_sequences 1), one waits (queue_length 1), the page's is refused.
  const ctrl = new AbortController();
  const long = { model: id, messages: [{ role: "user", content: "hi" }], stream: true };
  const held = [];
  for (let i = 0; i < 2; i++) {
    const res = await fetch(open.url + "/v1/chat/completions", {
      method: "POST", body: JSON.stringify(long), signal: ctrl.signal, headers: { "Content-Type": "application/json" },
    });
    assert.equal(res.status, 200);
    held.push(res.body.getReader().read().catch(() => {})); // the first frame; the rest is left pending
  }
  await Promise.all(held);
  await send(page, "Are you there?");
  await until("the busy message", () => visible(page, "#error"));
  assert.match(await text(page, "#error"), /^The server is busy: its queue is full\. Try again in 1 s\./);
  assert.equal(await page.$eval("#input", (el) => el.value), "Are you there?", "the unsent text is given back");
  assert.equal(await replies(page), 3, "no reply bubble for a refused request");
  ctrl.abort();

  step("503");
  // Context too long: the message alone exceeds the context (once the
  // cancelled requests have left the queue).
  const one = JSON.stringify({ model: id, messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
  await until("the queue to drain", async () =>
    (await fetch(open.url + "/v1/chat/completions", { method: "POST", body: one })).status === 200);
  await send(page, "word ".repeat(max_model_len + 50));
  await until("the context error", async () => /too long/.test(await text(page, "#error")), 15000);
  assert.match(await text(page, "#error"), new RegExp(`^The conversation is too long for the model's context \\(${max_model_len} tokens\\)`));

  step("context too long");
  assert.deepEqual(unexpected(page, 503, 400), [], "console errors");
  for (const r of page.requests) {
    const u = new URL(r.url);
    assert.equal(u.origin, open.url, `request to another origin: ${r.url}`);
    assert.match(u.pathname, /^\/$|^\/ui\/[0-9a-f]{12}\/[a-z]+\.(js|css|svg)$|^\/v1\/models$|^\/v1\/chat\/completions$/);
  }
});

test("auth: the page asks for the key and sends it as a Bearer header", async () => {
  const page = await newPage(keyed);
  await until("the auth error", () => visible(page, "#error"));
  assert.match(await text(page, "#error"), /^Authentication failed: You didn't provide an API key\./);
  assert.equal(await visible(page, "#keyrow"), true);
  await page.type("#key", KEY);
  await page.$eval("#key", (el) => el.dispatchEvent(new Event("change")));
  await until("the model line", async () => /context \d+ tokens$/.test(await text(page, "#model")));
  assert.equal(await visible(page, "#error"), false);
  assert.equal(await page.evaluate(() => localStorage.getItem("hexserve.apiKey")), KEY);

  await page.type("#max_tokens", "4");
  const seen = watchReply(page, 0);
  await send(page, "Hello");
  await seen;
  assert.match(await text(page, "#log .assistant .stats"), /^4 tokens/);

  const api = page.requests.filter((r) => r.url.includes("/v1/"));
  assert.ok(api.length >= 3);
  assert.equal(api[0].auth, undefined, "the first /v1/models goes without a key");
  for (const r of api.slice(1)) assert.equal(r.auth, "Bearer " + KEY);
  for (const r of page.requests) assert.ok(!r.url.includes(KEY), `key in a URL: ${r.url}`);
  assert.ok(!keyed.log.includes(KEY), "the key is in the server log");
  assert.deepEqual(unexpected(page, 401), [], "console errors");
});

// chatLog records the status, policy, messages and X-Hexserve-Context-Truncated
// header of every chat request the page sends.
function chatLog(page) {
  const log = [];
  page.on("response", (r) => {
    if (!r.url().endsWith("/v1/chat/completions")) return;
    const body = JSON.parse(r.request().postData());
    log.push({ status: r.status(), policy: body.context_overflow, messages: body.messages,
      left: r.headers()["x-hexserve-context-truncated"] });
  });
  return log;
}

// cut reads the marker: its text, the messages before it and the dimmed ones.
const cut = (page) => page.$eval("#log", (log) => {
  const m = log.querySelector(".cut");
  const all = [...log.children];
  return m && {
    text: m.textContent,
    before: all.slice(0, all.indexOf(m)).filter((e) => e.matches(".msg")).length,
    dimmed: [...log.querySelectorAll(".msg")].map((e, i) => e.matches(".left-out") ? i : -1).filter((i) => i >= 0),
  };
});

test("long: 30 turns past the window, the marker of left-out turns, a reply stopped by the window", async (t) => {
  let t0 = Date.now();
  const step = (name) => { t.diagnostic(`${name}: ${Date.now() - t0} ms`); t0 = Date.now(); };
  const page = await newPage(fast);
  const chats = chatLog(page);
  await until("the model line", async () => /context 512 tokens$/.test(await text(page, "#model")));
  await page.click("#settings summary");
  await page.type("#system", "You are a terse assistant.");
  await page.type("#temperature", "0");
  await page.type("#max_tokens", "8");
  await page.click("#settings summary");

  // 30 turns of about 50 tokens each: 3 windows of 512. Every turn is
  // answered under truncate_middle; once the history no longer fits, the
  // marker follows the first turn and the messages left out, as many as the
  // reply's header says.
  for (let i = 0; i < 30; i++) {
    const seen = watchReply(page, i);
    await send(page, `Turn ${i}: tell me about topic ${i}. ` + "Some more words here. ".repeat(6));
    await seen;
    const last = chats[chats.length - 1];
    assert.equal(last.status, 200, `turn ${i}`);
    assert.equal(last.policy, "truncate_middle");
    assert.equal(last.messages.length, 2 + 2 * i, `turn ${i}: the whole history is sent`);
    const stats = await text(page, `#log .assistant:last-child .stats`);
    assert.match(stats, /^\d+ tokens · /, `turn ${i}`);
    const marker = await cut(page);
    if (!last.left) {
      assert.equal(marker, null, `turn ${i}: a marker without truncation`);
      continue;
    }
    const n = Number(last.left);
    assert.ok(n >= 2 && n % 2 === 0, `turn ${i}: ${n} left out`);
    assert.deepEqual(marker, {
      text: `${n} earlier messages left out of the context of the latest reply`,
      before: 2 + n, // the first turn (kept), then the n left out
      dimmed: Array.from({ length: n }, (_, k) => 2 + k),
    }, `turn ${i}`);
    assert.match(stats, new RegExp(` · ${n} earlier messages left out · max tokens reached$`), `turn ${i}`);
  }
  assert.equal(await replies(page), 30);
  assert.equal(await visible(page, "#error"), false);
  const cut30 = chats.filter((c) => c.left).length;
  assert.ok(cut30 >= 20, `${cut30} of 30 replies truncated`);
  // The conversation (the last request's messages and its reply) is 3 windows at least.
  const { messages } = chats[chats.length - 1];
  messages.push({ role: "assistant", content: await text(page, "#log .assistant:last-child .body") });
  const post = async (path, body) => (await fetch(fast.url + path, { method: "POST", body: JSON.stringify(body) })).json();
  const { prompt } = await post("/apply-template", { messages });
  const { count } = await post("/tokenize", { content: prompt });
  assert.ok(count >= 3 * 512, `the conversation has ${count} tokens`);
  step(`30 turns (${count} tokens, ${cut30} replies truncated)`);

  // A reply without max_tokens runs to the window: the page says so (the
  // server logs the window's finish, "context"), not "max tokens reached".
  await page.click("#new");
  await page.$eval("#max_tokens", (el) => { el.value = ""; });
  let seen = watchReply(page, 0);
  await send(page, "Tell me a very long story.");
  await seen;
  assert.match(await text(page, "#log .assistant .stats"), /^\d+ tokens · .* · context window full$/);
  await until("the server to log the window's finish", () => /"finish":"context"/.test(fast.log));
  assert.equal(await cut(page), null);

  step("window");
  // That first turn fills the window, so truncate_middle (which keeps it)
  // cannot fit the next one: the page asks again with rolling, which leaves
  // it out, and marks it.
  await page.type("#max_tokens", "8");
  seen = watchReply(page, 1);
  await send(page, "And then?");
  await seen;
  assert.deepEqual(chats.slice(-2).map((c) => [c.status, c.policy, c.left]),
    [[400, "truncate_middle", undefined], [200, "rolling", "2"]]);
  assert.deepEqual(await cut(page), {
    text: "2 earlier messages left out of the context of the latest reply", before: 2, dimmed: [0, 1],
  });
  assert.equal(await visible(page, "#error"), false);
  assert.deepEqual(unexpected(page, 400), [], "console errors");
  step("rolling");
});

test("reasoning: streamed into a folded box above the answer", async () => {
  const page = await newPage(thinking);
  await until("the model line", async () => /context \d+ tokens$/.test(await text(page, "#model")));
  const seen = watchReply(page, 0);
  await send(page, "How is the sea?");
  await seen;
  assert.equal(await text(page, "#log .assistant .reasoning summary"), "Reasoning");
  assert.equal(await text(page, "#log .assistant .reasoning .text"), "Count the waves.");
  assert.equal(await page.$eval("#log .assistant .reasoning", (el) => el.open), false, "folded");
  assert.equal(await page.$eval("#log .assistant", (el) => el.firstElementChild.className), "reasoning", "above the answer");
  assert.equal(await text(page, "#log .assistant .body"), "The sea is calm.");
  assert.deepEqual(unexpected(page), [], "console errors");
});
