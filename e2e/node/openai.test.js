// End-to-end tests of hexserve with the openai Node SDK. scripts/test-node.sh
// starts the server and sets HEXSERVE_URL (and HEXSERVE_API_KEY when the
// server needs one).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = (process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080') + '/v1';
const client = new OpenAI({ baseURL, apiKey: process.env.HEXSERVE_API_KEY || 'unused', maxRetries: 0 });
let model;

before(async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  model = list.data[0].id;
});

const chatParams = () => ({
  model,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Say hello.' },
  ],
  temperature: 0,
  max_tokens: 10,
});

test('chat.completions.create without and with stream', async () => {
  const resp = await client.chat.completions.create(chatParams());
  assert.match(resp.id, /^chatcmpl-/);
  assert.equal(resp.object, 'chat.completion');
  assert.equal(resp.model, model);
  assert.equal(resp.choices.length, 1);
  const choice = resp.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  assert.ok(resp.usage.prompt_tokens > 0);
  assert.equal(resp.usage.total_tokens, resp.usage.prompt_tokens + resp.usage.completion_tokens);
  assert.equal(typeof resp.usage.prompt_tokens_details.cached_tokens, 'number');

  const stream = await client.chat.completions.create({
    ...chatParams(),
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let first = true;
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (first) {
      assert.deepEqual(chunk.choices[0].delta, { role: 'assistant', content: '' });
      first = false;
    }
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    assert.equal(chunk.usage, null);
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(ids.size, 1);
  assert.equal(text, choice.message.content);
  assert.equal(finish, choice.finish_reason);
  assert.equal(usage.completion_tokens, resp.usage.completion_tokens);
});

test('chat.completions.stream helper and finalChatCompletion', async () => {
  const expected = await client.chat.completions.create(chatParams());
  const runner = client.chat.completions.stream(chatParams());
  let deltas = '';
  runner.on('content', (delta) => {
    deltas += delta;
  });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, expected.choices[0].message.content);
  assert.equal(deltas, expected.choices[0].message.content);
  assert.equal(final.choices[0].finish_reason, expected.choices[0].finish_reason);
});

test('completions with a token-id prompt, without and with stream', async () => {
  const prompt = [128000, 791, 4062, 14198, 39935];
  const resp = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, return_token_ids: true });
  assert.match(resp.id, /^cmpl-/);
  assert.equal(resp.object, 'text_completion');
  assert.deepEqual(resp.prompt_token_ids, prompt);
  assert.equal(resp.usage.prompt_tokens, prompt.length);
  assert.ok(resp.choices[0].token_ids.length > 0);

  const stream = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, resp.choices[0].text);
  assert.equal(finish, resp.choices[0].finish_reason);
});

test('errors are typed API errors', async () => {
  await assert.rejects(client.chat.completions.create({ ...chatParams(), model: 'no-such-model' }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ ...chatParams(), temperature: 3 }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.status, 400);
    assert.equal(err.param, 'temperature');
    assert.equal(err.type, 'invalid_request_error');
    return true;
  });
});
