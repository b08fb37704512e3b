#!/usr/bin/env node
// Times Hugging Face tokenizers (Rust, through @anush008/tokenizers) encoding one text file in
// one call, for rl_tokenizer_bench. Prints {"seconds": S, "tokens": N, "first": [ids...]}.
// usage: reference_bench.js NPM_DIR TOKENIZER_JSON TEXT_FILE
'use strict';
const fs = require('fs');
const path = require('path');
const [npmDir, tokenizerJson, textFile] = process.argv.slice(2);
const { Tokenizer } = require(path.join(npmDir, 'node_modules', '@anush008', 'tokenizers'));
(async () => {
  const tok = Tokenizer.fromFile(tokenizerJson);
  const text = fs.readFileSync(textFile, 'utf8');
  await tok.encode('warm up', null, { addSpecialTokens: false });
  const t0 = process.hrtime.bigint();
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const ids = enc.getIds();
  console.log(JSON.stringify({ seconds, tokens: ids.length, first: ids.slice(0, 1000), last: ids.slice(-1000) }));
})().catch((e) => { console.error('reference_bench.js: ' + e); process.exit(1); });
