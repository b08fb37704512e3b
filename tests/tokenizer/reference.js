#!/usr/bin/env node
// Prints, for each line of a corpus file, what Hugging Face tokenizers (the Rust crate, through
// the @anush008/tokenizers Node binding) makes of it, as one JSON object per line:
//   {"ids": [...], "decoded": "...", "decoded_skip": "...", "half": "..."}
// decoded keeps special tokens, decoded_skip leaves them out, half decodes the first half of
// the ids (which may end inside a character). The last object is for the whole file at once.
// usage: reference.js NPM_DIR TOKENIZER_JSON CORPUS ADD_SPECIAL(0|1)
'use strict';
const fs = require('fs');
const path = require('path');
const [npmDir, tokenizerJson, corpus, addSpecial] = process.argv.slice(2);
const { Tokenizer } = require(path.join(npmDir, 'node_modules', '@anush008', 'tokenizers'));

async function one(tok, text) {
  const enc = await tok.encode(text, null, { addSpecialTokens: addSpecial === '1' });
  const ids = enc.getIds();
  return {
    ids,
    decoded: await tok.decode(ids, false),
    decoded_skip: await tok.decode(ids, true),
    half: await tok.decode(ids.slice(0, Math.floor(ids.length / 2)), false),
  };
}

(async () => {
  const tok = Tokenizer.fromFile(tokenizerJson);
  const all = fs.readFileSync(corpus, 'utf8');
  const lines = all.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out = [];
  for (const line of lines) out.push(JSON.stringify(await one(tok, line)));
  out.push(JSON.stringify(await one(tok, all)));
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error('reference.js: ' + e); process.exit(1); });
