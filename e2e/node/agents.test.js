// The OpenAI Agents SDK (@openai/agents) against a server started here with
// model.reasoning_parser qwen3 and HOSTSIM_SCRIPT (every reply of the tiny
// model is <think>…</think> then the answer): the agent's run holds a
// reasoning item with the model's reasoning, and a second turn sends its
// history, reasoning item included, back through the Responses API.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, Runner, OpenAIProvider, setTracingDisabled } from '@openai/agents';
import { startThinking } from './scripted.js';

const url = process.env.HEXSERVE_URL ?? 'http://127.0.0.1:8080';
const key = 'sk-node-agents';
const thought = 'I add two and two.';
const answer = 'It is 4.';
let scripted, model;

before(async () => {
  ({ server: scripted, model } = await startThinking(url, key, thought, answer));
  setTracingDisabled(true); // no traces to OpenAI's service
});

after(() => scripted?.stop());

test('an agent run reads the reasoning item and sends it back', async () => {
  const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: key, baseURL: scripted.base + '/v1', useResponses: true }) });
  const agent = new Agent({ name: 'calculator', instructions: 'Answer briefly.', model });
  const first = await runner.run(agent, 'What is 2+2?');
  assert.equal(first.finalOutput, answer);
  const reasoning = first.newItems.find((i) => i.type === 'reasoning_item');
  assert.ok(reasoning, JSON.stringify(first.newItems.map((i) => i.type)));
  // The SDK keeps the raw reasoning_text parts (summaries become content) in providerData.
  assert.deepEqual(reasoning.rawItem.providerData.content, [{ type: 'reasoning_text', text: thought }]);

  const second = await runner.run(agent, [...first.history, { role: 'user', content: 'And 3+3?' }]);
  assert.equal(second.finalOutput, answer);
});
