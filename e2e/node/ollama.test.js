// The Ollama API through the official ollama library (ollama-js). The shared
// server (HEXSERVE_URL) answers chat, generate, format, the listings and the
// errors; the tool-call round trip uses a second server started here with
// HOSTSIM_SCRIPT (the tiny model then emits the scripted tokens) and an API
// key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { startScripted, turns } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const headers = process.env.HEXSERVE_API_KEY ? { Authorization: 'Bearer ' + process.env.HEXSERVE_API_KEY } : undefined;
const ollama = new Ollama({ host: url, headers });
let model;

before(async () => {
  const { models } = await ollama.list();
  assert.equal(models.length, 1);
  model = models[0].name;
});

const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Say hello.' },
];
const options = { temperature: 0, num_predict: 10 };

function checkDone(r) {
  assert.equal(r.done, true);
  assert.ok(['stop', 'length'].includes(r.done_reason), r.done_reason);
  assert.ok(r.prompt_eval_count > 0);
  assert.ok(r.eval_count > 0 && r.eval_count <= options.num_predict);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration']) {
    assert.equal(typeof r[k], 'number', k);
  }
  assert.ok(r.total_duration >= r.prompt_eval_duration + r.eval_duration, 'total_duration covers the evaluation');
}

test('chat without and with stream', async () => {
  const resp = await ollama.chat({ model, messages, options });
  assert.equal(resp.model, model);
  assert.equal(resp.message.role, 'assistant');
  assert.equal(typeof resp.message.content, 'string');
  assert.ok(resp.message.content.length > 0);
  assert.equal(resp.message.thinking, undefined, 'Llama-3.2 does not think');
  assert.ok(!Number.isNaN(Date.parse(resp.created_at)));
  checkDone(resp);

  const stream = await ollama.chat({ model, messages, options, stream: true, think: true, keep_alive: '5m' });
  let text = '';
  let last;
  let n = 0;
  for await (const part of stream) {
    n++;
    last = part;
    text += part.message.content;
    if (!part.done) assert.equal(part.done_reason, undefined);
  }
  assert.ok(n > 2, `${n} lines`);
  assert.equal(text, resp.message.content);
  checkDone(last);
  assert.equal(last.eval_count, resp.eval_count);
});

test('generate without and with stream, templated and raw', async () => {
  const resp = await ollama.generate({ model, prompt: 'Say hello.', system: 'Be brief.', options });
  assert.equal(typeof resp.response, 'string');
  assert.ok(resp.response.length > 0);
  checkDone(resp);
  // The same conversation through chat renders the same prompt.
  const chat = await ollama.chat({ model, messages, options });
  assert.equal(resp.response, chat.message.content);
  assert.equal(resp.prompt_eval_count, chat.prompt_eval_count);

  const stream = await ollama.generate({ model, prompt: 'Say hello.', system: 'Be brief.', options, stream: true });
  let text = '';
  let last;
  for await (const part of stream) {
    text += part.response;
    last = part;
  }
  assert.equal(text, resp.response);
  checkDone(last);

  const raw = await ollama.generate({ model, prompt: 'The sky is', raw: true, options });
  checkDone(raw);
  assert.ok(raw.prompt_eval_count < 6, `raw prompt of ${raw.prompt_eval_count} tokens is not templated`);

  // An empty prompt loads the model (the library's way to preload).
  const load = await ollama.generate({ model, prompt: '' });
  assert.equal(load.done, true);
  assert.equal(load.done_reason, 'load');
});

test('format with a JSON schema: every finished output validates', async () => {
  const format = {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 12 }, rain: { type: 'boolean' }, n: { type: 'integer' } },
    required: ['city', 'rain', 'n'],
    additionalProperties: false,
  };
  let finished = 0;
  for (let seed = 0; seed < 8; seed++) {
    const resp = await ollama.chat({
      model, messages: [{ role: 'user', content: 'JSON please.' }], format, options: { temperature: 1, seed, num_predict: 80 },
    });
    if (resp.done_reason !== 'stop') continue;
    finished++;
    const v = JSON.parse(resp.message.content);
    assert.deepEqual(Object.keys(v), ['city', 'rain', 'n'], resp.message.content);
    assert.equal(typeof v.city, 'string');
    assert.ok([...v.city].length <= 12);
    assert.equal(typeof v.rain, 'boolean');
    assert.ok(Number.isInteger(v.n), resp.message.content);
  }
  assert.ok(finished > 0, 'no output finished within num_predict');

  const json = await ollama.generate({ model, prompt: 'JSON', format: 'json', options: { temperature: 1, seed: 3, num_predict: 60 } });
  if (json.done_reason === 'stop') assert.equal(typeof JSON.parse(json.response), 'object');
});

test('list, ps, show and version', async () => {
  const { models } = await ollama.list();
  const m = models[0];
  assert.equal(m.model, model);
  assert.match(m.digest, /^sha256:[0-9a-f]{64}$/);
  assert.ok(m.size > 0);
  assert.ok(!Number.isNaN(Date.parse(m.modified_at)));
  assert.equal(m.details.family, 'llama');
  assert.equal(m.details.format, 'qhexrt');
  assert.equal(typeof m.details.parameter_size, 'string');
  assert.equal(typeof m.details.quantization_level, 'string');

  const ps = await ollama.ps();
  assert.equal(ps.models.length, 1);
  assert.equal(ps.models[0].name, model);
  assert.equal(ps.models[0].digest, m.digest);
  assert.equal(ps.models[0].context_length, 512);
  assert.ok(Date.parse(ps.models[0].expires_at) > Date.now());

  const show = await ollama.show({ model: model + ':latest' });
  assert.equal(show.model_info['llama.context_length'], 512);
  assert.equal(show.details.family, 'llama');
  assert.match(show.template, /\{\{ \.Prompt \}\}<\|eot_id\|><\|start_header_id\|>assistant<\|end_header_id\|>/);
  assert.ok(show.capabilities.includes('tools'));

  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+$/);
});

test('errors: unknown model, bad options, images, model management', async () => {
  await assert.rejects(ollama.chat({ model: 'llama3.2:3b', messages }), (err) => {
    assert.equal(err.name, 'ResponseError');
    assert.equal(err.status_code, 404);
    // names the served ids
    assert.equal(err.error, `model "llama3.2:3b" not found; this server serves ${model}; server.model_aliases maps other names to them`);
    return true;
  });
  await assert.rejects(ollama.generate({ model: 'nope', prompt: 'x', stream: true }), (err) => err.status_code === 404);
  await assert.rejects(ollama.chat({ model, messages, options: { temperature: 'hot' } }), (err) => {
    assert.equal(err.status_code, 400);
    assert.match(err.error, /options\.temperature/);
    return true;
  });
  await assert.rejects(ollama.generate({ model, prompt: 'x', images: [new Uint8Array([1, 2, 3])] }), (err) => {
    assert.equal(err.status_code, 400);
    assert.match(err.error, /images are not supported/);
    return true;
  });
  await assert.rejects(ollama.pull({ model: 'llama3.2' }), (err) => {
    assert.equal(err.status_code, 501);
    assert.match(err.error, /model files on the device/);
    return true;
  });
  await assert.rejects(ollama.embed({ model, input: 'hi' }), (err) => err.status_code === 400 && /embedding/.test(err.error));
});

// The scripted server: a call, the answer to it, and again (streamed).
const answer = 'It is sunny in Paris.';
const key = 'sk-node-ollama';
let scripted;
after(() => scripted?.stop());

test('tool call → tool result → final text, streamed and not, and 401', async () => {
  const call = '{"name": "get_weather", "parameters": {"city": "Paris"}}';
  scripted = await startScripted(await turns(url, call, answer), key);
  const c = new Ollama({ host: scripted.base, headers: { Authorization: 'Bearer ' + key } });
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Get the current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const req = { model, tools, options: { temperature: 0, num_predict: 64 } };

  const first = await c.chat({ ...req, messages: ask });
  assert.equal(first.message.content, '');
  assert.equal(first.message.tool_calls.length, 1);
  assert.deepEqual(first.message.tool_calls[0].function.arguments, { city: 'Paris' });
  assert.equal(first.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(first.done_reason, 'stop');
  const history = [...ask, first.message, { role: 'tool', tool_name: 'get_weather', content: '18C and sunny' }];
  const final = await c.chat({ ...req, messages: history });
  assert.equal(final.message.content, answer);
  assert.equal(final.message.tool_calls, undefined);

  // Streamed: the call arrives whole on one line, then the done line.
  const parts = [];
  for await (const part of await c.chat({ ...req, messages: ask, stream: true })) parts.push(part);
  assert.equal(parts.length, 2);
  assert.deepEqual(parts[0].message.tool_calls.map((t) => t.function), [{ index: 0, name: 'get_weather', arguments: { city: 'Paris' } }]);
  assert.equal(parts[1].done, true);
  let text = '';
  for await (const part of await c.chat({ ...req, messages: [...ask, parts[0].message, history[2]], stream: true })) {
    text += part.message.content;
  }
  assert.equal(text, answer);

  const wrong = new Ollama({ host: scripted.base, headers: { Authorization: 'Bearer sk-wrong' } });
  await assert.rejects(wrong.list(), (err) => {
    assert.equal(err.status_code, 401);
    assert.equal(err.error, 'Incorrect API key provided.');
    return true;
  });
  // The probe stays public.
  const probe = await fetch(scripted.base + '/');
  assert.equal(probe.status, 200);
  assert.equal(await probe.text(), 'Ollama is running');
});
