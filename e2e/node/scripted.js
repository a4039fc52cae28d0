// A second hexserve for the tests that script the tiny model: it serves
// configs/dev.yaml (or a config of the test's) with HOSTSIM_SCRIPT (the lm-head then emits the script's
// token ids in turn, cycling) and an API key, on a free loopback port.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..', '..');
const eot = 128009;

// tokenize returns the ids of content (no special tokens added) from the
// server at url.
async function tokenize(url, content) {
  const r = await fetch(url + '/tokenize', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + (process.env.HEXSERVE_API_KEY || 'unused') },
    body: JSON.stringify({ content, add_special_tokens: false }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).tokens;
}

// turns returns the script of texts (tokenized by the server at url), each
// ended by an end-of-turn token.
export async function turns(url, ...texts) {
  const ids = [];
  for (const text of texts) {
    ids.push(...(await tokenize(url, text)), eot);
  }
  return ids;
}

async function freePort() {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

// startScripted starts the server with the script ids and key; stop() ends
// it and removes the script. config, when given, is the YAML config to serve
// instead of configs/dev.yaml; env adds environment variables.
export async function startScripted(ids, key, { config, env } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'hexserve-node-'));
  writeFileSync(join(dir, 'script.txt'), ids.join(' ') + '\n');
  let cfg = 'configs/dev.yaml';
  if (config) {
    cfg = join(dir, 'config.yaml');
    writeFileSync(cfg, config);
  }
  const port = await freePort();
  const proc = spawn(join(root, 'bin', 'hexserve'), ['serve', '--config', cfg, '--addr', `127.0.0.1:${port}`], {
    cwd: root,
    env: { ...process.env, HOSTSIM_SCRIPT: join(dir, 'script.txt'), HEXSERVE_API_KEYS: key, ...env },
    stdio: 'ignore',
  });
  const stop = () => {
    proc.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(base + '/health')).status === 200) return { base, stop };
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  stop();
  throw new Error('the scripted hexserve was not healthy within 60s');
}

// startThinking serves the tiny model with reasoning_parser qwen3, every
// reply scripted as <think>thought</think> then answer; it returns the
// server (base, stop) and the served model's id.
export async function startThinking(url, key, thought, answer) {
  const config = [
    'model:', '  bundle: build/models/tiny', '  reasoning_parser: qwen3', '  libraries:',
    '    backend: build/hostsim/amd64/libQnnHtp.so', '    system: build/hostsim/amd64/libQnnSystem.so',
    '    rpcmem: build/hostsim/amd64/libcdsprpc.so', 'chat:', '  date: 26 Jul 2024', '',
  ].join('\n');
  const server = await startScripted(await turns(url, `<think>\n${thought}\n</think>\n\n${answer}`), key, { config });
  const r = await fetch(server.base + '/v1/models', { headers: { Authorization: 'Bearer ' + key } });
  return { server, model: (await r.json()).data[0].id };
}
