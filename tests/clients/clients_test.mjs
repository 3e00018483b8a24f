// `plainllama serve`'s structured outputs through two clients we did not write: Vercel's AI SDK (generateObject and
// streamObject with a zod schema, over @ai-sdk/openai-compatible) and LangChain's @langchain/openai
// (withStructuredOutput, a plain call with log-probabilities). Whatever the model, the objects must validate.
//
//   PLAINLLAMA_URL=http://127.0.0.1:PORT/v1 node tests/clients/clients_test.mjs
//
// One line per check; the first failure ends the run with exit status 1. Run by tests/test_server_structured.py
// after `npm install` in tests/clients (scripts/setup.sh).
import assert from "node:assert/strict";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject, generateText, streamObject } from "ai";
import { z } from "zod";

const baseURL = process.env.PLAINLLAMA_URL;
if (!baseURL) {
  console.error("usage: PLAINLLAMA_URL=http://127.0.0.1:PORT/v1 node clients_test.mjs");
  process.exit(2);
}

async function check(name, fn) {
  try {
    const note = await fn();
    console.log(`ok - ${name}${note ? `: ${note}` : ""}`);
  } catch (e) {
    console.log(`not ok - ${name}`);
    console.error(e && e.stack ? e.stack : e);
    if (e && e.cause) console.error("cause:", e.cause);
    if (e && e.text !== undefined) console.error("text:", JSON.stringify(e.text));
    process.exit(1);
  }
}

// Nested objects, arrays, enums, integers and bounded numbers.
const person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  role: z.enum(["admin", "user", "guest"]),
  address: z.object({ city: z.string().max(10), zip: z.number().int().min(10000).max(99999) }),
  tags: z.array(z.string().max(8)).max(3),
  score: z.number().min(0).max(1),
  pets: z.array(z.object({ kind: z.enum(["cat", "dog"]), age: z.number().int().min(0).max(30) })).max(2),
});

const provider = createOpenAICompatible({ name: "plainllama", baseURL, supportsStructuredOutputs: true });
const model = provider.chatModel("plainllama");
const settings = { model, maxOutputTokens: 600, maxRetries: 0 };

for (const [temperature, seed] of [[0, 1], [0.8, 2], [1.2, 3]]) {
  await check(`AI SDK generateObject, temperature ${temperature}`, async () => {
    const { object, finishReason } = await generateObject({
      ...settings, schema: person, prompt: "A person:", temperature, seed,
    });
    assert.equal(finishReason, "stop");
    person.parse(object);
    return JSON.stringify(object);
  });
}

await check("AI SDK streamObject", async () => {
  const res = streamObject({ ...settings, schema: person, prompt: "Tell me about a person.", temperature: 0.9, seed: 4 });
  let partials = 0;
  for await (const _ of res.partialObjectStream) partials++;
  const object = await res.object;
  person.parse(object);
  assert.ok(partials > 1, `${partials} partial objects`);
  return `${partials} partial objects`;
});

await check("AI SDK json_object mode (no schema)", async () => {
  for (const seed of [5, 6, 7]) {
    const { object } = await generateObject({
      ...settings, output: "no-schema", prompt: "Some JSON:", temperature: 1.1, seed,
    });
    assert.equal(typeof object, "object");
    assert.ok(object !== null && !Array.isArray(object), JSON.stringify(object));
  }
});

await check("AI SDK enum output", async () => {
  const { object } = await generateObject({
    ...settings, output: "enum", enum: ["happy", "sad", "angry"], prompt: "Mood:", temperature: 1, seed: 8,
  });
  assert.ok(["happy", "sad", "angry"].includes(object), object);
  return object;
});

await check("AI SDK generateText (free text still works)", async () => {
  const { text } = await generateText({ model, prompt: "Once upon a time", maxOutputTokens: 16, temperature: 0 });
  assert.equal(typeof text, "string");
});

const llm = new ChatOpenAI({
  model: "plainllama", apiKey: "no-key", configuration: { baseURL }, temperature: 0.8, maxTokens: 600, maxRetries: 0,
});

await check("LangChain withStructuredOutput (json_schema)", async () => {
  const structured = llm.withStructuredOutput(person, { method: "jsonSchema", name: "person" });
  const object = await structured.invoke("A person:");
  person.parse(object);
  return JSON.stringify(object);
});

await check("LangChain logprobs", async () => {
  const res = await new ChatOpenAI({
    model: "plainllama", apiKey: "no-key", configuration: { baseURL }, temperature: 0, maxTokens: 8, maxRetries: 0,
    logprobs: true, topLogprobs: 3,
  }).invoke("Once upon a time");
  const content = res.response_metadata.logprobs.content;
  assert.ok(content.length > 0);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].token, t.token);
  }
});

console.log("ok");
