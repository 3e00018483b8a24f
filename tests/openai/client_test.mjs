// `plainllama serve` through the official openai npm client (4.104.0): models, chat completions plain and
// streamed, text completions, and the errors the client maps to its typed exceptions.
//
//   PLAINLLAMA_API_KEY=KEY node tests/openai/client_test.mjs http://127.0.0.1:PORT/v1
//
// The base URL comes from argv[2] or PLAINLLAMA_BASE_URL, the key from PLAINLLAMA_API_KEY. The expected model id is
// PLAINLLAMA_MODEL_ID, or the basename of the model folder PLAINLLAMA_MODEL; without either, the one model the
// server lists. One line per check; the first failure ends the run with exit status 1. Run by tests/test_server.py
// after `npm install` in tests/openai.
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";

const baseURL = process.argv[2] || process.env.PLAINLLAMA_BASE_URL;
const apiKey = process.env.PLAINLLAMA_API_KEY || "no-key";
if (!baseURL) {
  console.error("usage: node client_test.mjs BASE_URL (or PLAINLLAMA_BASE_URL), e.g. http://127.0.0.1:8080/v1");
  process.exit(2);
}
const expectedId = process.env.PLAINLLAMA_MODEL_ID ||
  (process.env.PLAINLLAMA_MODEL ? path.basename(path.resolve(process.env.PLAINLLAMA_MODEL)) : null);

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const show = (x) => JSON.stringify(x);

async function check(name, fn) {
  try {
    const note = await fn();
    console.log(`ok - ${name}${note ? `: ${note}` : ""}`);
  } catch (e) {
    console.log(`not ok - ${name}`);
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  }
}

async function expectError(promise, ErrorClass, status) {
  try {
    const r = await promise;
    assert.fail(`expected ${ErrorClass.name} (${status}), got a response: ${show(r).slice(0, 300)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    const got = e && e.constructor && e.constructor.name;
    assert.ok(e instanceof ErrorClass, `expected ${ErrorClass.name}, got ${got}: ${e}`);
    assert.equal(e.status, status);
    assert.equal(typeof e.message, "string");
    return `${e.status} ${e.message}`;
  }
}

let model = expectedId;
await check("models.list", async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1, show(page.data));
  const m = page.data[0];
  if (expectedId) assert.equal(m.id, expectedId);
  assert.equal(m.object, "model");
  model = m.id;
  return m.id;
});

const request = { model, messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8, temperature: 0 };
let plain;
await check("chat.completions.create", async () => {
  const r = await client.chat.completions.create(request);
  const c = r.choices[0];
  assert.equal(typeof c.message.content, "string");
  assert.ok(c.message.content.length > 0, "empty content");
  assert.equal(c.message.role, "assistant");
  assert.equal(c.finish_reason, "length");
  assert.equal(r.object, "chat.completion");
  assert.equal(r.usage.completion_tokens, 8, show(r.usage));
  assert.ok(r.usage.prompt_tokens > 0, show(r.usage));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, show(r.usage));
  plain = c.message.content;
  return show(plain);
});

await check("chat.completions.create stream", async () => {
  const stream = await client.chat.completions.create({
    ...request, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 2, `${chunks.length} chunks`);
  assert.equal(chunks[0].choices[0].delta.role, "assistant", show(chunks[0]));
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  assert.equal(text, plain);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, [], show(last));
  assert.equal(last.usage?.completion_tokens, 8, show(last));
  const reasons = chunks.map((c) => c.choices[0]?.finish_reason).filter((x) => x);
  assert.deepEqual(reasons, ["length"]);
  return `${chunks.length} chunks`;
});

await check("completions.create", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
  assert.equal(typeof r.choices[0].text, "string");
  assert.ok(r.choices[0].text.length > 0, "empty text");
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 8, show(r.usage));
  return show(r.choices[0].text);
});

await check("n: 2 is a BadRequestError", () =>
  expectError(client.chat.completions.create({ ...request, n: 2 }), OpenAI.BadRequestError, 400));

await check("a wrong key is an AuthenticationError", async () => {
  const wrong = new OpenAI({ baseURL, apiKey: `${apiKey}-wrong`, maxRetries: 0, timeout: 30000 });
  await expectError(wrong.chat.completions.create(request), OpenAI.AuthenticationError, 401);
  return expectError(wrong.models.list(), OpenAI.AuthenticationError, 401);
});
