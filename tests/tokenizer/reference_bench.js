#!/usr/bin/env node
// Times Hugging Face tokenizers (Rust, through @anush008/tokenizers) encoding one text file in
// one call, for rl_tokenizer_bench. Prints {"seconds": S, "cpu_seconds": C, "tokens": N, "first": [ids...], "last": [ids...]}:
// wall and CPU time (all threads) of the encode call alone; line_* for the text split at
// newlines and encoded as one batch.
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
  const c0 = process.cpuUsage();
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  const c1 = process.cpuUsage(c0);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu_seconds = (c1.user + c1.system) / 1e6;
  const ids = enc.getIds();
  // The same text as lines, in one encodeBatch call (tokenizers spreads a batch over threads;
  // CPU time counts them all).
  const lines = text.split('\n');
  const l0 = process.hrtime.bigint();
  const lc0 = process.cpuUsage();
  const encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
  const lc1 = process.cpuUsage(lc0);
  const line_seconds = Number(process.hrtime.bigint() - l0) / 1e9;
  const line_cpu_seconds = (lc1.user + lc1.system) / 1e6;
  let line_tokens = 0;
  for (const e of encs) line_tokens += e.getIds().length;
  console.log(JSON.stringify({ seconds, cpu_seconds, tokens: ids.length, first: ids.slice(0, 1000), last: ids.slice(-1000),
                               line_seconds, line_cpu_seconds, line_tokens }));
})().catch((e) => { console.error('reference_bench.js: ' + e); process.exit(1); });
