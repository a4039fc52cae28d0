// hfbench measures HF tokenizers' (Rust, npm tokenizers@0.23.2) encode
// throughput the way BenchmarkEncode measures the Go tokenizer: the golden
// 20,495-byte paragraph repeated 256 times, encoded in 20 KB chunks by
// sequential encode() calls, one thread; and the pre-tokenizer alone
// (preTokenizeString of each chunk). Prints the median of 5 runs after a
// warm-up, by wall-clock time and by the process's CPU time (steadier on a
// loaded machine). Run from tokenizer/testdata:
//
//	RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false UV_THREADPOOL_SIZE=1 \
//	  node hfbench.js path/to/tokenizer.json
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, 'hf', 'node_modules', 'tokenizers'));

const golden = fs.readFileSync(path.join(__dirname, '..', '..', 'testdata', 'tokenizer', 'golden_public.jsonl'), 'utf8');
const para = golden.split('\n').filter(Boolean).map(JSON.parse).find((g) => g.category === 'paragraph_20k').text;
const text = para.repeat(256);
const chunks = [];
for (let i = 0; i < text.length; ) {
  // 20 KB chunks by bytes, cut at a character boundary
  let j = i, n = 0;
  while (j < text.length && n < 20 << 10) { n += Buffer.byteLength(text[j]); j++; }
  chunks.push(text.slice(i, j));
  i = j;
}
const bytes = Buffer.byteLength(text);
const tok = Tokenizer.fromFile(process.argv[2]);
const pre = tok.getPreTokenizer();

async function run(what, f) {
  const rates = [], cpuRates = [];
  for (let k = 0; k < 6; k++) {
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    for (const c of chunks) await f(c);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const c1 = process.cpuUsage(c0), cs = (c1.user + c1.system) / 1e6;
    if (k > 0) rates.push(bytes / s / 1e6), cpuRates.push(bytes / cs / 1e6);
  }
  const show = (r) => { r.sort((a, b) => a - b); return `median ${r[2].toFixed(2)} MB/s (runs ${r.map((x) => x.toFixed(2)).join(' ')})`; };
  console.log(`${what}: wall ${show(rates)}; cpu ${show(cpuRates)}`);
}

(async () => {
  await run('encode', (c) => tok.encode(c, null, { addSpecialTokens: false }));
  if (pre) await run('pre-tokenizer', (c) => pre.preTokenizeString(c));
})();
