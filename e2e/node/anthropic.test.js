// The Anthropic Messages API through the official @anthropic-ai/sdk. The
// shared server (HEXSERVE_URL, random-weight tiny model) answers create,
// stream, countTokens, tool_choice "any" and the 400/404 checks by the
// served id; a second server started here with server.model_aliases
// ("claude-*"), an API key, a queue of one and HOSTSIM_SCRIPT (the model
// emits the scripted tokens) runs the tool-use round trip, 401 and 529.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startScripted, turns } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const sharedKey = process.env.HEXSERVE_API_KEY || 'unused';
const client = new Anthropic({ baseURL: url, apiKey: sharedKey, maxRetries: 0 });
let model;

before(async () => {
  const r = await fetch(url + '/v1/models', { headers: { Authorization: 'Bearer ' + sharedKey } });
  model = (await r.json()).data[0].id;
});

test('models.list and models.retrieve in Anthropic\'s shape', async () => {
  const ids = [];
  for await (const m of client.models.list({ limit: 1 })) {
    assert.equal(m.type, 'model');
    assert.equal(m.display_name, m.id);
    assert.ok(!Number.isNaN(Date.parse(m.created_at)), m.created_at);
    ids.push(m.id);
  }
  assert.deepEqual(ids, [model]);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  await assert.rejects(client.models.retrieve('claude-nope'), (e) => e instanceof Anthropic.NotFoundError);
});

const ask = (extra = {}) => ({
  model,
  max_tokens: 12,
  temperature: 0,
  system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
  messages: [{ role: 'user', content: 'Say hello.' }],
  ...extra,
});

test('messages.create and countTokens', async () => {
  const msg = await client.messages.create(ask());
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, model);
  assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason));
  for (const b of msg.content) assert.equal(b.type, 'text');
  const u = msg.usage;
  assert.ok(u.output_tokens > 0 && u.output_tokens <= 12);
  assert.equal(u.cache_creation_input_tokens, 0);
  const { input_tokens } = await client.messages.countTokens({ model, system: ask().system, messages: ask().messages });
  assert.equal(input_tokens, u.input_tokens + u.cache_read_input_tokens);
});

test('messages.stream with finalMessage equals create', async () => {
  const expected = await client.messages.create(ask());
  const stream = client.messages.stream(ask());
  let deltas = '';
  const events = [];
  stream.on('text', (t) => {
    deltas += t;
  });
  stream.on('streamEvent', (e) => events.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, expected.content);
  assert.equal(deltas, expected.content.map((b) => b.text).join(''));
  assert.equal(final.stop_reason, expected.stop_reason);
  assert.equal(final.usage.output_tokens, expected.usage.output_tokens);
  assert.equal(events[0], 'message_start');
  assert.deepEqual(events.slice(-2), ['message_delta', 'message_stop']);
});

// A minimal check of the one schema below: what the constrained decoder
// must guarantee on a random-weight model (greedy, so the run is the same
// every time; maxLength bounds the string a random model would not close).
const weatherTool = {
  name: 'get_weather',
  description: 'Get the current weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 10 }, unit: { type: 'string', enum: ['c', 'f'] } },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
};
function validWeatherInput(input) {
  return typeof input === 'object' && input !== null && !Array.isArray(input) &&
    Object.keys(input).every((k) => k === 'city' || k === 'unit') &&
    typeof input.city === 'string' && input.city.length <= 10 && ['c', 'f'].includes(input.unit);
}

test('tool_choice any gives a schema-valid tool_use on the random-weight model', async () => {
  for (const disable of [false, true]) {
    const msg = await client.messages.create(ask({
      max_tokens: 300, tools: [weatherTool],
      tool_choice: { type: 'any', disable_parallel_tool_use: disable },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    }));
    assert.equal(msg.stop_reason, 'tool_use', JSON.stringify(msg));
    assert.ok(msg.content.length >= 1 && (!disable || msg.content.length === 1));
    for (const b of msg.content) {
      assert.equal(b.type, 'tool_use');
      assert.equal(b.name, 'get_weather');
      assert.match(b.id, /^toolu_/);
      assert.ok(validWeatherInput(b.input), JSON.stringify(b.input));
    }
  }
});

test('typed errors: 404 unknown model, 400 out of range, 400 prompt too long', async () => {
  await assert.rejects(client.messages.create(ask({ model: 'claude-no-alias-here' })), (err) => {
    assert.ok(err instanceof Anthropic.NotFoundError);
    assert.equal(err.status, 404);
    assert.equal(err.type, 'not_found_error');
    return true;
  });
  await assert.rejects(client.messages.create(ask({ temperature: 1.5 })), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, /temperature/);
    return true;
  });
  await assert.rejects(client.messages.create(ask({ messages: [{ role: 'user', content: 'hello '.repeat(600) }] })), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.match(err.message, /prompt is too long: \d+ tokens > \d+ maximum/);
    return true;
  });
  await assert.rejects(client.messages.create(ask({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] })), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.match(err.message, /image/);
    return true;
  });
});

// The scripted server.
const answer = 'It is sunny in Paris.';
const key = 'sk-node-anthropic';
let scripted;

// startAliased starts the scripted server on configs/dev.yaml plus the aliases, one sequence at a
// time and a queue of one (a request is refused only when the queue and the free sequence slots
// are both full).
async function startAliased() {
  const ids = await turns(url, '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}', answer);
  const config = [
    'server:', `  model_aliases: {"claude-*": ${model}}`,
    'model:', '  bundle: build/models/tiny', '  libraries:', '    backend: build/hostsim/amd64/libQnnHtp.so',
    '    system: build/hostsim/amd64/libQnnSystem.so', '    rpcmem: build/hostsim/amd64/libcdsprpc.so',
    'engine:', '  queue_length: 1', '  max_sequences: 1', 'chat:', '  date: 26 Jul 2024', '',
  ].join('\n');
  return startScripted(ids, key, { config, env: { HOSTSIM_LATENCY_US_DECODE: '3000' } });
}

after(() => scripted?.stop());

test('tool_use → tool_result → answer through a claude-* alias, streamed and not; 401; 529', async () => {
  scripted = await startAliased();
  const c = new Anthropic({ baseURL: scripted.base, apiKey: key, maxRetries: 0 });
  const first = {
    model: 'claude-sonnet-4-5', max_tokens: 64, temperature: 0, tools: [weatherTool],
    system: 'You are a weather assistant.' + ' Answer with the tools.'.repeat(12),
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  };
  const reply = (call, content) => ({
    ...first,
    messages: [...first.messages, { role: 'assistant', content: [call] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content }] }],
  });

  const msg = await c.messages.create(first);
  assert.equal(msg.model, 'claude-sonnet-4-5');
  assert.equal(msg.stop_reason, 'tool_use');
  assert.equal(msg.content.length, 1);
  const call = msg.content[0];
  assert.equal(call.type, 'tool_use');
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(call.input, { city: 'Paris', unit: 'c' });
  assert.match(call.id, /^toolu_/);
  const final = await c.messages.create(reply(call, '{"temperature_c": 18}'));
  assert.deepEqual(final.content, [{ type: 'text', text: answer }]);
  assert.equal(final.stop_reason, 'end_turn');
  assert.ok(final.usage.cache_read_input_tokens > 0, JSON.stringify(final.usage));

  // Streamed: the call arrives as an input_json_delta.
  const stream = c.messages.stream(first);
  let json = '';
  stream.on('inputJson', (partial) => {
    json += partial;
  });
  const streamed = await stream.finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.deepEqual(streamed.content[0].input, { city: 'Paris', unit: 'c' });
  assert.deepEqual(JSON.parse(json), streamed.content[0].input);
  const streamedFinal = await c.messages.stream(reply(streamed.content[0], [{ type: 'text', text: '18C' }])).finalMessage();
  assert.equal(streamedFinal.content[0].text, answer);

  const wrong = new Anthropic({ baseURL: scripted.base, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create(first), (err) => {
    assert.ok(err instanceof Anthropic.AuthenticationError);
    assert.equal(err.status, 401);
    assert.equal(err.type, 'authentication_error');
    return true;
  });

  // One sequence and a queue of one: of four concurrent requests, some are refused.
  const results = await Promise.allSettled([0, 1, 2, 3].map(() => c.messages.create({ ...first, tools: undefined, max_tokens: 40 })));
  const refused = results.filter((r) => r.status === 'rejected');
  assert.ok(refused.length >= 1, 'no request was refused');
  for (const r of refused) {
    assert.ok(r.reason instanceof Anthropic.OverloadedError || r.reason?.status === 529, String(r.reason));
    assert.equal(r.reason.status, 529);
    assert.equal(r.reason.type, 'overloaded_error');
    assert.ok(Number(r.reason.headers.get('retry-after')) > 0);
  }
});
