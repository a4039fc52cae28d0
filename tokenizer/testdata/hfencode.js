// hfencode answers for TestAgainstHFTokenizers using the reference
// implementation, the npm package tokenizers (HF tokenizers' Rust code).
// stdin: JSON {"texts": [...], "idLists": [[...], ...]}; stdout: JSON
// {"ids": [[...], ...], "decoded": [...]} where ids are the encodings of texts
// (add_special_tokens=false, special tokens parsed) and decoded the decodings
// of idLists (skip_special_tokens=false).
const path = require('path');
const { Tokenizer } = require(path.join(process.env.HEXSERVE_HF_TOKENIZERS, 'tokenizers'));

const chunks = [];
process.stdin.on('data', (d) => chunks.push(d));
process.stdin.on('end', async () => {
  const req = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const tok = Tokenizer.fromFile(process.argv[2]);
  const encs = await tok.encodeBatch(req.texts, { addSpecialTokens: false });
  const decoded = [];
  for (const ids of req.idLists) decoded.push(await tok.decode(ids, false));
  process.stdout.write(JSON.stringify({ ids: encs.map((e) => e.getIds()), decoded }));
});
