// Reasoning through the SDKs: a server started here with
// model.reasoning_parser qwen3 and HOSTSIM_SCRIPT (every reply of the tiny
// model is <think>…</think> then the answer) returns the reasoning apart from
// the answer, and each SDK reads it: openai-node's reasoning_content (an
// extra field) and reasoning items, @anthropic-ai/sdk's thinking blocks
// (sent back signed), ollama-js's thinking.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { startThinking } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const key = 'sk-node-reasoning';
const thought = 'I add two and two.';
const answer = 'It is 4.';
let scripted, model;

before(async () => {
  ({ server: scripted, model } = await startThinking(url, key, thought, answer));
});

after(() => scripted?.stop());

const question = [{ role: 'user', content: 'What is 2+2?' }];

test('openai: reasoning_content whole and streamed, reasoning items in Responses', async () => {
  const c = new OpenAI({ baseURL: scripted.base + '/v1', apiKey: key, maxRetries: 0 });
  const r = await c.chat.completions.create({ model, messages: question, reasoning_effort: 'high' });
  assert.equal(r.choices[0].message.reasoning_content, thought);
  assert.equal(r.choices[0].message.content, answer);
  assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 0);

  let reasoning = '', content = '';
  for await (const ch of await c.chat.completions.create({ model, messages: question, stream: true })) {
    reasoning += ch.choices[0]?.delta?.reasoning_content ?? '';
    content += ch.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning, thought);
  assert.equal(content, answer);

  const resp = await c.responses.create({ model, input: 'What is 2+2?', reasoning: { effort: 'medium' } });
  assert.equal(resp.output[0].type, 'reasoning');
  assert.deepEqual(resp.output[0].content, [{ type: 'reasoning_text', text: thought }]);
  assert.equal(resp.output_text, answer);
  assert.ok(resp.usage.output_tokens_details.reasoning_tokens > 0);
  // The reasoning item goes back as input, as the Agents SDK sends it.
  const next = await c.responses.create({ model, input: [...question, ...resp.output, { role: 'user', content: 'And 3+3?' }] });
  assert.equal(next.output_text, answer);

  const stream = c.responses.stream({ model, input: 'What is 2+2?' });
  let deltas = '';
  stream.on('response.reasoning_text.delta', (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(deltas, thought);
  assert.equal(final.output[0].content[0].text, thought);
  assert.equal(final.output_text, answer);
});

test('anthropic: signed thinking blocks, streamed with thinking and signature deltas, sent back', async () => {
  const c = new Anthropic({ baseURL: scripted.base, apiKey: key, maxRetries: 0 });
  const ask = { model, max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: question };
  const msg = await c.messages.create(ask);
  assert.equal(msg.content[0].type, 'thinking');
  assert.equal(msg.content[0].thinking, thought);
  assert.ok(msg.content[0].signature.length > 0);
  assert.deepEqual(msg.content[1], { type: 'text', text: answer });

  const stream = c.messages.stream(ask);
  let thinking = '', signature = '';
  stream.on('thinking', (delta) => { thinking += delta; });
  stream.on('signature', (sig) => { signature = sig; });
  const streamed = await stream.finalMessage();
  assert.equal(thinking, thought);
  assert.equal(signature, msg.content[0].signature);
  assert.deepEqual(streamed.content, msg.content);

  const next = await c.messages.create({ ...ask, messages: [...question, { role: 'assistant', content: msg.content }, { role: 'user', content: 'And 3+3?' }] });
  assert.equal(next.content[1].text, answer);
  await assert.rejects(c.messages.create({ ...ask, max_tokens: 1024 }), (e) => e instanceof Anthropic.BadRequestError && /budget_tokens/.test(e.message));
});

test('ollama: thinking in chat and generate, whole and streamed', async () => {
  const o = new Ollama({ host: scripted.base, headers: { Authorization: 'Bearer ' + key } });
  const r = await o.chat({ model, messages: question, think: true });
  assert.equal(r.message.thinking, thought);
  assert.equal(r.message.content, answer);
  let thinking = '', content = '';
  for await (const part of await o.chat({ model, messages: question, think: true, stream: true })) {
    thinking += part.message.thinking ?? '';
    content += part.message.content;
  }
  assert.equal(thinking, thought);
  assert.equal(content, answer);
  const g = await o.generate({ model, prompt: 'What is 2+2?', think: true });
  assert.equal(g.thinking, thought);
  assert.equal(g.response, answer);
});
