#!/usr/bin/env node
// Prints, for each line of a corpus file, what llama-tokenizer-js (an independent JavaScript
// implementation of the LLaMA 1 / Llama 2 tokenizer, with its own copy of the vocabulary and
// merges) makes of it, as one JSON object per line:
//   {"ids": [...], "ids_bos": [...], "ids_special": [...], "decoded": "..."}
// ids: without <s>; ids_bos: with <s> first; decoded: ids decoded. It knows no special tokens:
// "<s>" in the text is text. ids_special is what Hugging Face's Llama tokenizer does with them:
// the text split at <unk>, <s> and </s> (ids 0, 1, 2), each part encoded on its own (with its
// own leading space). The last object is for the whole file at once.
// usage: llama2_reference.js NPM_DIR CORPUS     or     llama2_reference.js NPM_DIR --vocab
'use strict';
const fs = require('fs');
const path = require('path');
const [npmDir, corpus] = process.argv.slice(2);

(async () => {
  const mod = await import(path.join(npmDir, 'node_modules', 'llama-tokenizer-js', 'llama-tokenizer.js'));
  const tok = mod.default;
  if (corpus === '--vocab') {
    process.stdout.write(JSON.stringify(tok.vocabById) + '\n');
    return;
  }
  const all = fs.readFileSync(corpus, 'utf8');
  const lines = all.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  lines.push(all);
  const out = lines.map((line) => {
    const ids = tok.encode(line, false, true);
    const special = [];
    for (const part of line.split(/(<unk>|<s>|<\/s>)/)) {
      const id = {'<unk>': 0, '<s>': 1, '</s>': 2}[part];
      if (id !== undefined) special.push(id);
      else if (part !== '') special.push(...tok.encode(part, false, true));
    }
    return JSON.stringify({ids, ids_bos: tok.encode(line, true, true), ids_special: special,
                           decoded: tok.decode(ids, false, true)});
  });
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error('llama2_reference.js: ' + e); process.exit(1); });
