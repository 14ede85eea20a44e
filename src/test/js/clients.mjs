// The official `openai` and `ollama` JavaScript clients against a running `vmmkit serve`.
// Usage: node clients.mjs BASE_URL MODEL ENDLESS_MODEL   (NODE_PATH names the folder holding both packages)
// MODEL serves the text checks; ENDLESS_MODEL (the echo engine) the cancellation, with a
// generation of a billion tokens that only a client going away can end.
// Prints one line per check; exits 1 at the first failure, naming it.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(import.meta.url);
const OpenAI = require('openai').default ?? require('openai');
const { Ollama } = require('ollama');

const [base, model, endlessModel] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const ollama = new Ollama({ host: base });
let checks = 0;
const ok = (what) => { checks++; console.log(`ok ${what}`); };

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

async function expectStatus(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.status ?? e.status_code, status, `${what}: ${e}`);
    ok(`${what}: ${status} ${String(e.message ?? e.error).slice(0, 80)}`);
    return e;
  }
  assert.fail(`${what}: no error`);
}

// OpenAI: completion, whole and streamed, same seed: same text
const prompt = 'The quick brown fox';
const whole = await openai.completions.create({ model, prompt, max_tokens: 12, seed: 42, temperature: 0.7 });
assert.ok(whole.usage.completion_tokens >= 1 && whole.usage.completion_tokens <= 12, JSON.stringify(whole.usage));
assert.ok(whole.usage.prompt_tokens >= 1, JSON.stringify(whole.usage));
let streamed = '';
for await (const chunk of await openai.completions.create({ model, prompt, max_tokens: 12, seed: 42, temperature: 0.7, stream: true })) {
  streamed += chunk.choices[0]?.text ?? '';
}
assert.equal(streamed, whole.choices[0].text);
ok(`openai completions whole = streamed (${JSON.stringify(streamed)})`);

// OpenAI: chat, whole and streamed, with logprobs
const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello' }];
const chat = await openai.chat.completions.create({ model, messages, max_tokens: 10, seed: 1, logprobs: true, top_logprobs: 2 });
assert.equal(chat.choices[0].message.role, 'assistant');
assert.equal(chat.choices[0].logprobs.content.length, chat.usage.completion_tokens);
assert.ok(chat.choices[0].logprobs.content[0].top_logprobs.length <= 2);
let chatStreamed = '';
for await (const chunk of await openai.chat.completions.create({ model, messages, max_tokens: 10, seed: 1, stream: true })) {
  chatStreamed += chunk.choices[0]?.delta?.content ?? '';
}
assert.equal(chatStreamed, chat.choices[0].message.content);
ok(`openai chat whole = streamed (${JSON.stringify(chatStreamed)})`);

// Tokens arrive before the generation ends: a generation of a billion tokens cannot have ended
// when the first chunks arrive; aborting after two chunks cancels it, and the model is free at once.
const cancelled = `vmmkit_request_finish_total{model="${endlessModel}",finish_reason="cancelled"}`;
const cancelledBefore = await metric(cancelled);
const endless = await openai.completions.create({ model: endlessModel, prompt: 'abc', max_tokens: 1000000000, stream: true });
let seen = 0;
for await (const chunk of endless) {
  if (++seen === 2) { endless.controller.abort(); break; }
}
const after = await openai.completions.create({ model: endlessModel, prompt: 'next', max_tokens: 3 });
assert.equal(after.choices[0].text, 'nex');
assert.equal(await metric(cancelled), cancelledBefore + 1);
ok('openai stream aborted after 2 chunks: engine cancelled, next request served');

// Ollama: generate and chat, streamed (the default) and whole
const gen = await ollama.generate({ model, prompt, stream: false, options: { num_predict: 12, seed: 42, temperature: 0.7 } });
let genStreamed = '';
let last;
for await (const part of await ollama.generate({ model, prompt, stream: true, options: { num_predict: 12, seed: 42, temperature: 0.7 } })) {
  genStreamed += part.response;
  last = part;
}
assert.equal(genStreamed, gen.response);
assert.equal(last.done, true);
assert.equal(last.eval_count, gen.eval_count);
assert.equal(gen.tokens.length, gen.eval_count); // vmmkit's extra field: token ids and log-probabilities
ok(`ollama generate whole = streamed (${JSON.stringify(genStreamed)})`);
const ochat = await ollama.chat({ model, messages, stream: false, options: { num_predict: 10, seed: 1 } });
let ochatStreamed = '';
for await (const part of await ollama.chat({ model, messages, stream: true, options: { num_predict: 10, seed: 1 } })) {
  ochatStreamed += part.message.content;
}
assert.equal(ochatStreamed, ochat.message.content);
ok(`ollama chat whole = streamed (${JSON.stringify(ochatStreamed)})`);
const tags = await ollama.list();
assert.ok(tags.models.some((m) => m.name === model));
const models = await openai.models.list();
assert.ok(models.data.some((m) => m.id === model));
ok('ollama list and openai models list the model');

// Bad input: each API's error shape and a 4xx; the server keeps serving
await expectStatus(openai.completions.create({ model: 'no-such-model', prompt: 'x' }), 404, 'openai unknown model');
await expectStatus(openai.completions.create({ model, prompt: 'x', max_tokens: -1 }), 400, 'openai negative max_tokens');
await expectStatus(openai.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'x' }] }), 400, 'openai unknown role');
await expectStatus(openai.completions.create({ model, prompt: 'x'.repeat(10 << 20), max_tokens: 1 }), 413, 'openai 10 MB prompt');
const malformed = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: '{"model":', headers: { 'content-type': 'application/json' } });
assert.equal(malformed.status, 400);
assert.equal(typeof (await malformed.json()).error.message, 'string');
ok('openai malformed JSON: 400 with error.message');
await expectStatus(ollama.generate({ model: 'no-such-model', prompt: 'x', stream: false }), 404, 'ollama unknown model');
await expectStatus(ollama.chat({ model, messages: [{ role: 'wizard', content: 'x' }], stream: false }), 400, 'ollama unknown role');
await expectStatus(ollama.generate({ model, prompt: 'x'.repeat(10 << 20), stream: false }), 413, 'ollama 10 MB prompt');
const still = await ollama.generate({ model, prompt: 'still here', stream: false, options: { num_predict: 4 } });
assert.equal(still.done, true);
ok('server still serves after the bad requests');
console.log(`all ${checks} checks passed`);
