// The Responses API through the openai Node SDK. The shared server
// (HEXSERVE_URL) answers the plain, streaming, continuation and
// retrieve/delete checks; the function-call round trip and 401 use a second
// server started here with HOSTSIM_SCRIPT (the tiny model then emits the
// scripted tokens) and an API key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startScripted, turns } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const client = new OpenAI({ baseURL: url + '/v1', apiKey: process.env.HEXSERVE_API_KEY || 'unused', maxRetries: 0 });
let model;

before(async () => {
  model = (await client.models.list()).data[0].id;
});

// Long enough to pass the tiny bundle's 128-token prefill window: recomputing
// the conversation then costs more than reusing it, so the engine's planner
// always reuses the cached prefix (see e2e/responses_test.go).
const instructions = 'Be brief.' + ' You are a helpful assistant.'.repeat(24);
const params = (input) => ({ model, instructions, input, temperature: 0, max_output_tokens: 16 });

test('responses.create: plain text and previous_response_id continuation', async () => {
  const resp = await client.responses.create(params('Say hello.'));
  assert.match(resp.id, /^resp_/);
  assert.equal(resp.object, 'response');
  assert.equal(resp.model, model);
  assert.ok(['completed', 'incomplete'].includes(resp.status));
  assert.equal(resp.output[0].type, 'message');
  assert.equal(typeof resp.output_text, 'string');
  assert.ok(resp.output_text.length > 0);
  assert.equal(resp.output_text, resp.output[0].content.map((p) => p.text).join(''));
  const u = resp.usage;
  assert.ok(u.input_tokens > 0 && u.output_tokens > 0 && u.output_tokens <= 16);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(u.output_tokens_details.reasoning_tokens, 0);

  const next = await client.responses.create({ ...params('Once more.'), previous_response_id: resp.id });
  assert.equal(next.previous_response_id, resp.id);
  assert.ok(next.usage.input_tokens > u.total_tokens);
  assert.ok(next.usage.input_tokens_details.cached_tokens >= u.input_tokens,
    `cached ${next.usage.input_tokens_details.cached_tokens} of ${next.usage.input_tokens}`);
});

test('responses.stream with finalResponse and the raw event stream', async () => {
  const expected = await client.responses.create(params('Say hello.'));
  const runner = client.responses.stream(params('Say hello.'));
  let deltas = '';
  runner.on('response.output_text.delta', (e) => {
    deltas += e.delta;
  });
  const final = await runner.finalResponse();
  assert.equal(final.output_text, expected.output_text);
  assert.equal(deltas, expected.output_text);
  assert.equal(final.status, expected.status);

  const stream = await client.responses.create({ ...params('Say hello.'), stream: true });
  const types = [];
  let seq = 0;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq++);
    if (types.at(-1) !== ev.type) types.push(ev.type);
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    expected.status === 'completed' ? 'response.completed' : 'response.incomplete']);
});

test('responses retrieve, inputItems.list and delete', async () => {
  const resp = await client.responses.create(params('Say hello.'));
  const got = await client.responses.retrieve(resp.id);
  assert.equal(got.output_text, resp.output_text);
  const items = [];
  for await (const item of client.responses.inputItems.list(resp.id)) items.push(item);
  assert.equal(items.length, 1);
  assert.equal(items[0].role, 'user');
  assert.deepEqual(items[0].content, [{ type: 'input_text', text: 'Say hello.' }]);
  await client.responses.delete(resp.id);
  await assert.rejects(client.responses.retrieve(resp.id), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.type, 'invalid_request_error');
    return true;
  });
});

test('responses errors are typed: 400 and 404', async () => {
  await assert.rejects(client.responses.create({ ...params('Hi'), temperature: 3 }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.param, 'temperature');
    return true;
  });
  await assert.rejects(
    client.responses.create({ ...params('Hi'), text: { format: { type: 'json_schema', name: 'x', schema: { type: 'string', not: {} } } } }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.param, 'text.format.schema.not');
      return true;
    },
  );
  await assert.rejects(client.responses.create({ ...params('Hi'), previous_response_id: 'resp_unknown' }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'previous_response_not_found');
    assert.equal(err.param, 'previous_response_id');
    return true;
  });
});

// The scripted server.
const answer = 'It is sunny in Paris.';
const key = 'sk-node-responses';
let scripted;

after(() => scripted?.stop());

test('function_call → function_call_output → final text, and 401', async () => {
  scripted = await startScripted(await turns(url, '{"name": "get_weather", "parameters": {"city": "Paris"}}', answer), key);
  const c = new OpenAI({ baseURL: scripted.base + '/v1', apiKey: key, maxRetries: 0 });
  const tools = [{
    type: 'function', name: 'get_weather', description: 'Get the current weather in a city', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  }];
  const ask = { ...params('What is the weather in Paris?'), max_output_tokens: 64, tools };
  const resp = await c.responses.create(ask);
  assert.equal(resp.output.length, 1);
  const call = resp.output[0];
  assert.equal(call.type, 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
  assert.match(call.call_id, /^call_/);
  assert.equal(resp.output_text, '');

  const final = await c.responses.create({
    ...ask, previous_response_id: resp.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 18}' }],
  });
  assert.equal(final.output_text, answer);
  assert.ok(final.usage.input_tokens_details.cached_tokens > 0);

  // Streamed: the call arrives as function_call_arguments events.
  const runner = c.responses.stream(ask);
  let args = '';
  runner.on('response.function_call_arguments.delta', (e) => {
    args += e.delta;
  });
  const streamed = await runner.finalResponse();
  assert.equal(streamed.output[0].type, 'function_call');
  assert.equal(args, streamed.output[0].arguments);
  const streamedFinal = await c.responses.stream({
    ...ask, previous_response_id: streamed.id,
    input: [{ type: 'function_call_output', call_id: streamed.output[0].call_id, output: '18C' }],
  }).finalResponse();
  assert.equal(streamedFinal.output_text, answer);

  const wrong = new OpenAI({ baseURL: scripted.base + '/v1', apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.responses.create(params('Hi')), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    return true;
  });
});
