#!/usr/bin/python3
"""`plainllama serve`: structured outputs, log-probabilities and the rest of OpenAI's sampling fields.

Checked on stories260K (a tiny model that never writes JSON on its own): response_format json_schema, one schema per
supported feature, sampled with several seeds, replies that parse and validate (the validator of
test_structured_output.py) and keep the schema's property order, streamed and not; json_object always parses; a 400
naming each unsupported schema keyword; the `grammar` field on both endpoints, its end ("stop") and max_tokens first
("length"); /v1/completions echo + logprobs + max_tokens 0 equal to `plainllama perplexity` on the same text; chat
top_logprobs (probabilities summing to at most 1, holding the sampled token, streamed equal to whole); n choices;
frequency/presence penalties checked against the unpenalized log-probabilities of the same tokens; logit_bias; a 400
naming the field for every bad value. The AI SDK's generateObject/streamObject and LangChain
(tests/clients/clients_test.mjs) on every shared model, skipped without node or tests/clients/node_modules.
Last line: "N passed, N failed".
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import unittest_summary
from server_util import (BINARY, HAS_SERVE, MODEL, SHARED_DIR, SOURCE_DIR, Server, ServerTest, chat_body,
                         completion_body, sse_payloads)
from test_structured_output import SCHEMAS, Invalid, validate

CLIENTS_DIR = os.path.join(SOURCE_DIR, "tests", "clients")
# Every shared model: the folders (F32, BF16, F16) and the GGUF files llama.cpp wrote (quantized ones too).
MODELS = [os.path.join(SHARED_DIR, "models", m)
          for m in ("stories260K", "stories260K-bf16", "stories260K-f16", "tinystories3M",
                    "gguf/stories260K-F32.gguf", "gguf/tinystories3M-Q8_0.gguf", "gguf/tinystories3M-Q4_K_M.gguf")]

# One schema per supported feature.
FEATURES = {
    "properties_required": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                            "required": ["a"]},
    "additional_false": {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"],
                         "additionalProperties": False},
    "array_bounds": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2,
                     "maxItems": 4},
    "string_enum": {"type": "string", "enum": ["red", "green", "blue"]},
    "const": {"const": {"v": 1}},
    "pattern": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    "format_date": {"type": "string", "format": "date"},
    "number_bounds": {"type": "number", "minimum": -1.5, "maximum": 2.25},
    "integer_exclusive": {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 20},
    "string_length": {"type": "string", "minLength": 2, "maxLength": 5},
    "boolean": {"type": "boolean"},
    "null": {"type": "null"},
    "any_of": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 4}]},
    "one_of": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                         {"type": "object", "properties": {"kind": {"const": "b"}, "n": {"type": "integer"}},
                          "required": ["kind", "n"]}]},
    "ref_defs": {"type": "object", "properties": {"p": {"$ref": "#/$defs/point"}}, "required": ["p"],
                 "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}},
                                     "required": ["x"]}}},
    "nullable_list": {"type": ["string", "null"], "maxLength": 6},
}
# Keywords a schema may hold that the server cannot honour: a 400 naming each.
UNSUPPORTED = {
    "multipleOf": {"type": "integer", "multipleOf": 3},
    "uniqueItems": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    "prefixItems": {"type": "array", "prefixItems": [{"type": "integer"}]},
    "contains": {"type": "array", "contains": {"type": "integer"}},
    "patternProperties": {"type": "object", "patternProperties": {"^a": {"type": "integer"}}},
    "propertyNames": {"type": "object", "propertyNames": {"maxLength": 3}},
    "minProperties": {"type": "object", "minProperties": 1},
    "maxProperties": {"type": "object", "maxProperties": 1},
    "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
    "not": {"not": {"type": "string"}},
    "if": {"if": {"type": "string"}, "then": {"maxLength": 3}},
    "email": {"type": "string", "format": "email"},
}


def schema_format(schema, name="out"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Structured(ServerTest):
    server_args = ("--parallel", "4")

    def reply(self, body, chat=True):
        return self.assertOk(self.server.post("/v1/chat/completions" if chat else "/v1/completions", body))

    def streamed(self, body, chat=True):
        r = self.server.post("/v1/chat/completions" if chat else "/v1/completions", dict(body, stream=True))
        self.assertEqual(r.status, 200, str(r))
        chunks = [json.loads(p) for p in sse_payloads(r)[:-1]]
        key = "delta" if chat else None
        text = "".join((c["choices"][0][key].get("content") or "") if chat else c["choices"][0]["text"]
                       for c in chunks if c["choices"])
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
        return text, finish, chunks

    def check(self, text, schema, what):
        try:
            value = json.loads(text)
            validate(value, schema, schema)
        except (json.JSONDecodeError, Invalid) as e:
            self.fail(f"{what}: {e}: {text!r}")
        return value

    def test_every_schema_feature(self):
        for name, schema in FEATURES.items():
            for seed in (1, 2):
                body = chat_body("Write it:", 300, temperature=1.0, seed=seed, response_format=schema_format(schema))
                out = self.reply(body)
                self.assertEqual(out["choices"][0]["finish_reason"], "stop", f"{name} seed {seed}: {out}")
                self.check(out["choices"][0]["message"]["content"], schema, f"{name} seed {seed}")
            text, finish, _ = self.streamed(body)
            self.assertEqual(finish, ["stop"], name)
            self.check(text, schema, f"{name} streamed")
            self.assertEqual(text, out["choices"][0]["message"]["content"], f"{name}: streamed differs from whole")

    def test_every_shared_schema_on_completions(self):
        for name, schema in SCHEMAS.items():
            out = self.reply(completion_body("Once upon a time", 400, temperature=0.8, seed=3,
                                             response_format=schema_format(schema)), chat=False)
            self.check(out["choices"][0]["text"], schema, name)

    def test_property_order_is_the_schema_s(self):
        names = ["zeta", "alpha", "mid", "beta"]
        schema = {"type": "object", "properties": {n: {"type": "integer", "minimum": 0, "maximum": 9} for n in names},
                  "required": names, "additionalProperties": False}
        out = self.reply(chat_body("x", 200, response_format=schema_format(schema)))
        pairs = json.loads(out["choices"][0]["message"]["content"], object_pairs_hook=lambda p: p)
        self.assertEqual([k for k, _ in pairs], names)

    def test_unsupported_schema_keywords(self):
        for keyword, schema in UNSUPPORTED.items():
            for path, body in (("/v1/chat/completions", chat_body("x", 4, response_format=schema_format(schema))),
                               ("/v1/completions", completion_body("x", 4, response_format=schema_format(schema)))):
                self.assertError(self.server.post(path, body), 400, mentions=keyword,
                                 param="response_format.json_schema.schema")

    def test_json_object_always_parses(self):
        for seed in range(6):
            body = chat_body("Hi", 400, temperature=1.2, seed=seed, top_k=0, top_p=1, min_p=0,
                             response_format={"type": "json_object"})
            out = self.reply(body)
            self.assertEqual(out["choices"][0]["finish_reason"], "stop", out)
            self.assertIsInstance(json.loads(out["choices"][0]["message"]["content"]), dict)
        text, finish, _ = self.streamed(body)
        self.assertIsInstance(json.loads(text), dict)
        # "text" is the default: free text, as without the field
        plain = self.reply(chat_body("Hi", 20))["choices"][0]["message"]["content"]
        self.assertEqual(self.reply(chat_body("Hi", 20, response_format={"type": "text"}))["choices"][0]["message"]
                         ["content"], plain)

    def test_a_reply_near_its_limit_is_completed(self):
        # sampled freely, the model would still be inside a string at the limit; the closing text is written in time
        for max_tokens in (6, 15, 40):
            for seed in range(3):
                body = chat_body("Hi", max_tokens, temperature=1.2, seed=seed, top_k=0, top_p=1, min_p=0,
                                 response_format={"type": "json_object"})
                out = self.reply(body)
                c = out["choices"][0]
                self.assertEqual(c["finish_reason"], "stop", out)
                self.assertLessEqual(out["usage"]["completion_tokens"], max_tokens)
                self.assertIsInstance(json.loads(c["message"]["content"]), dict, out)
        schema = FEATURES["ref_defs"]
        for seed in range(3):
            out = self.reply(chat_body("Hi", 24, temperature=1.2, seed=seed, response_format=schema_format(schema)))
            self.assertEqual(out["choices"][0]["finish_reason"], "stop", out)
            self.check(out["choices"][0]["message"]["content"], schema, f"seed {seed}")
        # the context's end too: a prompt that leaves few positions
        prompt = "Once upon a time " * 120
        body = completion_body(prompt, None, temperature=1.2, seed=1, response_format={"type": "json_object"})
        out = self.reply(body, chat=False)
        self.assertEqual(out["choices"][0]["finish_reason"], "stop", out)
        self.assertIsInstance(json.loads(out["choices"][0]["text"]), dict)

    def test_grammar_field_its_end_and_length(self):
        grammar = 'root ::= (" yes" | " no") "!"'
        for chat in (True, False):
            make = chat_body if chat else completion_body
            key = (lambda o: o["choices"][0]["message"]["content"]) if chat else (lambda o: o["choices"][0]["text"])
            for seed in range(3):
                out = self.reply(make("Is it?", 20, temperature=1, seed=seed, grammar=grammar), chat)
                self.assertIn(key(out), (" yes!", " no!"))
                self.assertEqual(out["choices"][0]["finish_reason"], "stop")
            text, finish, _ = self.streamed(make("Is it?", 20, grammar=grammar), chat)
            self.assertIn(text, (" yes!", " no!"))
            self.assertEqual(finish, ["stop"])
            out = self.reply(make("Is it?", 3, grammar='root ::= "a"{40}'), chat)
            self.assertEqual(out["choices"][0]["finish_reason"], "length")
            self.assertEqual(out["usage"]["completion_tokens"], 3)
            self.assertTrue(set(key(out)) <= {"a"} and key(out), out)
            self.assertError(self.server.post("/v1/chat/completions" if chat else "/v1/completions",
                                              make("x", 4, grammar='root ::= "a" [b-')), 400, param="grammar")

    def test_echo_logprobs_equal_perplexity(self):
        text = ("Once upon a time, there was a little girl named Lily. She liked to play with her ball in the park. "
                "One day, she saw a big dog.")
        out = self.reply(completion_body(text, 0, echo=True, logprobs=3), chat=False)
        c = out["choices"][0]
        self.assertEqual(c["text"], text)
        self.assertEqual(c["finish_reason"], "length")
        lp = c["logprobs"]
        n = out["usage"]["prompt_tokens"]
        self.assertEqual(len(lp["tokens"]), n)
        self.assertEqual(len(lp["token_logprobs"]), n)
        self.assertIsNone(lp["token_logprobs"][0])
        for i in range(1, n):
            top = lp["top_logprobs"][i]
            self.assertEqual(len(top), 3, top)
            self.assertLessEqual(sum(math.exp(v) for v in top.values()), 1 + 1e-9)
            self.assertGreaterEqual(max(top.values()) + 1e-12, lp["token_logprobs"][i])
        self.assertEqual(lp["text_offset"], sorted(lp["text_offset"]))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "text.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            r = subprocess.run([BINARY, "perplexity", "-m", MODEL, "-f", path, "--ctx", str(n), "--stride", str(n),
                                "--json", "-t", "1", "--cache-type", "f32"],  # the server's cache
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            ppl = json.loads(r.stdout)
        self.assertEqual(ppl["n_scored"], n - 1, ppl)
        mean_nll = -sum(lp["token_logprobs"][1:]) / (n - 1)
        self.assertAlmostEqual(mean_nll, ppl["mean_nll"], delta=1e-9 * max(1, abs(mean_nll)))
        # the same through a prompt that shares a cached prefix, and streamed
        again = self.reply(completion_body(text, 0, echo=True, logprobs=3), chat=False)
        self.assertEqual(again["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"])
        _, _, chunks = self.streamed(completion_body(text, 0, echo=True, logprobs=3), chat=False)
        self.assertEqual(chunks[0]["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"])
        # echo with generated tokens after the prompt's
        gen = self.reply(completion_body(text, 5, echo=True, logprobs=1), chat=False)["choices"][0]
        self.assertEqual(len(gen["logprobs"]["tokens"]), n + 5)
        self.assertEqual(gen["logprobs"]["token_logprobs"][:n], lp["token_logprobs"])
        self.assertTrue(gen["text"].startswith(text))

    def test_chat_top_logprobs(self):
        for temp, seed in ((0, 0), (1.0, 4)):
            out = self.reply(chat_body("Once upon a time", 24, temperature=temp, seed=seed, logprobs=True,
                                       top_logprobs=5))
            c = out["choices"][0]
            content = c["logprobs"]["content"]
            self.assertEqual(len(content), out["usage"]["completion_tokens"])
            self.assertEqual(bytes(b for e in content for b in e["bytes"]).decode().lstrip(),
                             c["message"]["content"].lstrip())
            for e in content:
                top = e["top_logprobs"]
                self.assertEqual(len(top), 5)
                self.assertLessEqual(sum(math.exp(t["logprob"]) for t in top), 1 + 1e-9)
                self.assertEqual([t["logprob"] for t in top], sorted((t["logprob"] for t in top), reverse=True))
                if temp == 0:  # the sampled token is the most likely one, with the same value
                    self.assertEqual((top[0]["token"], top[0]["logprob"]), (e["token"], e["logprob"]), e)
                else:
                    self.assertGreaterEqual(top[0]["logprob"], e["logprob"])
                    if e["logprob"] >= top[-1]["logprob"]:
                        self.assertIn(e["token"], [t["token"] for t in top])
            body = chat_body("Once upon a time", 24, temperature=temp, seed=seed, logprobs=True, top_logprobs=5)
            _, _, chunks = self.streamed(body)
            streamed = [e for ch in chunks if ch["choices"] and ch["choices"][0]["logprobs"]
                        for e in ch["choices"][0]["logprobs"]["content"]]
            self.assertEqual(streamed, content)
        # logprobs without top_logprobs: empty lists; none without logprobs
        out = self.reply(chat_body("Once upon a time", 4, logprobs=True))
        self.assertTrue(all(e["top_logprobs"] == [] for e in out["choices"][0]["logprobs"]["content"]))
        self.assertIsNone(self.reply(chat_body("Once upon a time", 4))["choices"][0]["logprobs"])

    def test_logprobs_under_a_grammar_are_over_the_allowed_tokens(self):
        out = self.reply(chat_body("x", 20, logprobs=True, top_logprobs=20, grammar='root ::= " yes" | " no"'))
        for e in out["choices"][0]["logprobs"]["content"]:
            self.assertLessEqual(sum(math.exp(t["logprob"]) for t in e["top_logprobs"]), 1 + 1e-9)
            self.assertEqual(e["top_logprobs"][0]["token"], e["token"])
        self.assertAlmostEqual(sum(math.exp(t["logprob"]) for t in
                                   out["choices"][0]["logprobs"]["content"][0]["top_logprobs"]), 1, delta=1e-6)

    def test_n_choices(self):
        body = chat_body("Once upon a time", 16, temperature=1.2, seed=9, n=3)
        out = self.reply(body)
        self.assertEqual([c["index"] for c in out["choices"]], [0, 1, 2])
        texts = [c["message"]["content"] for c in out["choices"]]
        self.assertGreater(len(set(texts)), 1, texts)
        self.assertEqual(out["usage"]["completion_tokens"], 48)
        # choice i is the request with seed + i
        for i in range(3):
            alone = self.reply(chat_body("Once upon a time", 16, temperature=1.2, seed=9 + i))
            self.assertEqual(alone["choices"][0]["message"]["content"], texts[i])
        _, finish, chunks = self.streamed(body)
        per = {}
        for ch in chunks:
            for c in ch["choices"]:
                per.setdefault(c["index"], []).append(c)
        self.assertEqual(sorted(per), [0, 1, 2])
        for i, cs in per.items():
            self.assertEqual("".join(c["delta"].get("content") or "" for c in cs), texts[i])
            self.assertEqual([c["finish_reason"] for c in cs if c["finish_reason"]], ["length"])
        out = self.reply(completion_body("Once upon a time", 8, temperature=1.2, seed=9, n=2), chat=False)
        self.assertEqual(len(out["choices"]), 2)
        self.assertError(self.server.post("/v1/chat/completions", chat_body("x", 4, n=5)), 400, mentions="--parallel",
                         param="n")

    def test_penalties_follow_openai_definition(self):
        # generated with penalties at temperature 0, then the same text scored by echo: at each step, the
        # difference of two tokens' log-probabilities moves by the difference of their penalties
        prompt = "Once upon a time"
        for freq, pres in ((1.5, 0), (0, 1.5), (0.7, -0.4)):
            out = self.reply(completion_body(prompt, 24, logprobs=20, frequency_penalty=freq, presence_penalty=pres),
                             chat=False)["choices"][0]
            gen = out["logprobs"]
            raw = self.reply(completion_body(prompt + out["text"], 0, echo=True, logprobs=20), chat=False)["choices"][0]
            n_prompt = len(raw["logprobs"]["tokens"]) - len(gen["tokens"])
            self.assertEqual(raw["logprobs"]["tokens"][n_prompt:], gen["tokens"], "the text tokenized otherwise")
            counts, checked = {}, 0
            for j, tok in enumerate(gen["tokens"]):
                pen_top, raw_top = gen["top_logprobs"][j], raw["logprobs"]["top_logprobs"][n_prompt + j]

                def penalty(t):
                    c = counts.get(t, 0)
                    return c * freq + (c > 0) * pres

                both = [t for t in pen_top if t in raw_top and t != tok]
                for t in both:
                    want = (raw_top[tok] - raw_top[t]) - (penalty(tok) - penalty(t))
                    self.assertAlmostEqual(pen_top[tok] - pen_top[t], want, delta=1e-4, msg=f"step {j} {tok!r} {t!r}")
                    checked += 1 if penalty(tok) != penalty(t) else 0
                counts[tok] = counts.get(tok, 0) + 1
            self.assertGreater(checked, 5, "no step where the penalties differed: the test shows nothing")
        greedy = self.reply(chat_body(prompt, 32))["choices"][0]["message"]["content"]
        self.assertNotEqual(self.reply(chat_body(prompt, 32, frequency_penalty=2))["choices"][0]["message"]["content"],
                            greedy)

    def test_logit_bias(self):
        out = self.reply(completion_body("Once upon a time", 6, logprobs=1), chat=False)["choices"][0]
        first = out["logprobs"]["tokens"][0]
        # the ids written as the greedy first token (a piece and a byte token may be the same text): those whose
        # +100 bias gives it; +100 forces such a token at every step, and -100 on all of them bans the text
        ids = []
        for i in range(512):
            o = self.reply(completion_body("Once upon a time", 1, logprobs=0, logit_bias={str(i): 100}),
                           chat=False)["choices"][0]
            if o["logprobs"]["tokens"] == [first]:  # (an end-of-text token ends the reply with none)
                ids.append(i)
        self.assertTrue(ids, first)
        forced = self.reply(completion_body("Once upon a time", 5, logprobs=0, logit_bias={str(ids[0]): 100}),
                            chat=False)["choices"][0]["logprobs"]["tokens"]
        self.assertEqual(forced, [first] * 5)
        banned = self.reply(completion_body("Once upon a time", 12, logprobs=0,
                                            logit_bias={str(i): -100 for i in ids}),
                            chat=False)["choices"][0]["logprobs"]["tokens"]
        self.assertNotIn(first, banned)
        self.assertEqual(len(banned), 12)
        # a bias short of -100 only lowers it
        lowered = self.reply(completion_body("Once upon a time", 1, logprobs=0, logit_bias={str(i): -1 for i in ids}),
                             chat=False)["choices"][0]["logprobs"]["tokens"]
        self.assertEqual(lowered, [first])

    def test_bad_fields_name_themselves(self):
        chat_cases = [
            ({"logprobs": "yes"}, "logprobs"), ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
            ({"top_logprobs": 2}, "top_logprobs"), ({"frequency_penalty": 3}, "frequency_penalty"),
            ({"presence_penalty": "x"}, "presence_penalty"), ({"logit_bias": []}, "logit_bias"),
            ({"logit_bias": {"-1": 1}}, "logit_bias"), ({"logit_bias": {"512": 1}}, "logit_bias"),
            ({"logit_bias": {"3": 101}}, "logit_bias"), ({"logit_bias": {"x3": 1}}, "logit_bias"),
            ({"n": 0}, "n"), ({"n": 1.5}, "n"), ({"response_format": "json"}, "response_format"),
            ({"response_format": {"type": "xml"}}, "response_format.type"),
            ({"response_format": {}}, "response_format.type"),
            ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
             "response_format.json_schema.schema"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}}},
             "response_format.json_schema.strict"),
            ({"grammar": 3}, "grammar"), ({"grammar": 'root ::= "a" [b-'}, "grammar"),
            ({"grammar": "x ::= [a]"}, "grammar"),
            ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "grammar"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ]
        for extra, name in chat_cases:
            self.assertError(self.server.post("/v1/chat/completions", chat_body("x", 4, **extra)), 400, param=name)
        for extra, name in (({"logprobs": True}, "logprobs"), ({"logprobs": 21}, "logprobs"), ({"echo": 1}, "echo"),
                            ({"best_of": 2}, "best_of"), ({"suffix": "x"}, "suffix"), ({"n": 9}, "n")):
            self.assertError(self.server.post("/v1/completions", completion_body("x", 4, **extra)), 400, param=name)


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Clients(unittest.TestCase):
    """The AI SDK and LangChain, clients we did not write, on every shared model."""

    @unittest.skipUnless(shutil.which("node"), "machine: node is not installed")
    @unittest.skipUnless(os.path.isdir(os.path.join(CLIENTS_DIR, "node_modules", "ai")),
                         "machine: tests/clients/node_modules is not installed (scripts/setup.sh runs npm install)")
    def test_ai_sdk_and_langchain(self):
        for model in MODELS:
            server = Server("--parallel", "2", model=model)
            try:
                r = subprocess.run(["node", os.path.join(CLIENTS_DIR, "clients_test.mjs")], capture_output=True,
                                   text=True, timeout=300,
                                   env=dict(os.environ, PLAINLLAMA_URL=f"http://127.0.0.1:{server.port}/v1"))
                if r.returncode != 0:
                    self.fail(f"{os.path.basename(model)}: node tests/clients/clients_test.mjs: exit status "
                              f"{r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}\n"
                              f"server:\n{server.log[-3000:]}")
                self.assertIn("ok", r.stdout)
            finally:
                server.kill()


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
