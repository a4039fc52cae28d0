// Hermes tool calls (Qwen2.5, Qwen3, Falcon3) through the official SDKs: a
// server started here serves the tiny model with model.tool_parser hermes
// and HOSTSIM_SCRIPT, so every reply is some content and two <tool_call>
// blocks. The openai SDK (chat, its stream helper, Responses), the
// Anthropic SDK (create and its stream's finalMessage) and ollama-js each
// read the content and both calls.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startScripted, turns } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const sharedKey = process.env.HEXSERVE_API_KEY || 'unused';
const key = 'sk-node-hermes';
const reply = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>';
const want = [['get_weather', { city: 'Paris' }], ['get_time', { tz: 'CET' }]];
const schemas = {
  get_weather: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  get_time: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] },
};
const ask = 'Weather and time in Paris?';
let model;
let scripted;

before(async () => {
  const r = await fetch(url + '/v1/models', { headers: { Authorization: 'Bearer ' + sharedKey } });
  model = (await r.json()).data[0].id;
  const config = [
    'model:', '  bundle: build/models/tiny', '  tool_parser: hermes', '  libraries:', '    backend: build/hostsim/amd64/libQnnHtp.so',
    '    system: build/hostsim/amd64/libQnnSystem.so', '    rpcmem: build/hostsim/amd64/libcdsprpc.so',
    'chat:', '  date: 26 Jul 2024', '',
  ].join('\n');
  scripted = await startScripted(await turns(url, reply), key, { config });
});

after(() => scripted?.stop());

test('openai: chat, the stream helper and Responses read the content and both calls', async () => {
  const c = new OpenAI({ baseURL: scripted.base + '/v1', apiKey: key, maxRetries: 0 });
  const tools = Object.entries(schemas).map(([name, parameters]) => ({ type: 'function', function: { name, parameters } }));
  const req = { model, max_tokens: 200, tools, messages: [{ role: 'user', content: ask }] };
  const check = (msg, how) => {
    assert.equal(msg.content, 'Let me check.', how);
    assert.deepEqual(msg.tool_calls.map((t) => [t.function.name, JSON.parse(t.function.arguments)]), want, how);
    for (const t of msg.tool_calls) assert.match(t.id, /^call_/, how);
  };
  const whole = await c.chat.completions.create(req);
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  check(whole.choices[0].message, 'create');
  const final = await c.chat.completions.stream(req).finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  check(final.choices[0].message, 'stream');

  const rtools = Object.entries(schemas).map(([name, parameters]) => ({ type: 'function', name, parameters }));
  for (const r of [await c.responses.create({ model, max_output_tokens: 200, tools: rtools, input: ask }),
    await c.responses.stream({ model, max_output_tokens: 200, tools: rtools, input: ask }).finalResponse()]) {
    assert.equal(r.output_text, 'Let me check.');
    const calls = r.output.filter((it) => it.type === 'function_call');
    assert.deepEqual(calls.map((it) => [it.name, JSON.parse(it.arguments)]), want);
  }
});

test('anthropic: create and the stream\'s finalMessage read a text block and two tool_use blocks', async () => {
  const c = new Anthropic({ baseURL: scripted.base, apiKey: key, maxRetries: 0 });
  const tools = Object.entries(schemas).map(([name, input_schema]) => ({ name, input_schema }));
  const req = { model, max_tokens: 200, tools, messages: [{ role: 'user', content: ask }] };
  for (const msg of [await c.messages.create(req), await c.messages.stream(req).finalMessage()]) {
    assert.equal(msg.stop_reason, 'tool_use');
    assert.deepEqual(msg.content[0], { type: 'text', text: 'Let me check.' });
    assert.deepEqual(msg.content.slice(1).map((b) => [b.type, b.name, b.input]), want.map(([n, a]) => ['tool_use', n, a]));
  }
});

test('ollama: chat, streamed and not, reads the content and both calls', async () => {
  const c = new Ollama({ host: scripted.base, headers: { Authorization: 'Bearer ' + key } });
  const tools = Object.entries(schemas).map(([name, parameters]) => ({ type: 'function', function: { name, parameters } }));
  const req = { model, tools, options: { num_predict: 200 }, messages: [{ role: 'user', content: ask }] };
  const whole = await c.chat(req);
  assert.equal(whole.message.content, 'Let me check.');
  assert.deepEqual(whole.message.tool_calls.map((t) => [t.function.name, t.function.arguments]), want);
  let content = '';
  const calls = [];
  for await (const part of await c.chat({ ...req, stream: true })) {
    content += part.message.content;
    calls.push(...(part.message.tool_calls ?? []));
  }
  assert.equal(content, 'Let me check.');
  assert.deepEqual(calls.map((t) => [t.function.name, t.function.arguments]), want);
});
