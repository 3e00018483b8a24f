#!/usr/bin/python3
"""`generate --json-schema` and `--grammar` end to end: on every shared model (tiny models that never write JSON on
their own), greedy and sampled with several seeds, the continuation parses as JSON and validates against the schema
(a validator for the supported subset, written here); the grammar's end stops generation; bad files and flags give
one clear line.
Last line: "N passed, N failed".
"""
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import uuid

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
MODELS = [os.path.join(SHARED_DIR, "models", m) for m in ("stories260K", "stories260K-f16", "tinystories3M")]


class Invalid(Exception):
    pass


def validate(v, s, root, path="$"):
    """Raises Invalid when v does not validate against schema s (the subset json_schema.h supports)."""
    if s is True or s == {}:
        return
    if "$ref" in s:
        target = root
        for part in s["$ref"][2:].split("/") if s["$ref"] != "#" else []:
            target = target[part.replace("~1", "/").replace("~0", "~")]
        return validate(v, target, root, path)
    if s.get("nullable") and v is None:
        return
    if "anyOf" in s or "oneOf" in s:
        key = "anyOf" if "anyOf" in s else "oneOf"
        ok = 0
        for sub in s[key]:
            try:
                validate(v, sub, root, path)
                ok += 1
            except Invalid:
                pass
        if ok == 0 or (key == "oneOf" and ok != 1):
            raise Invalid(f"{path}: {ok} of {key} match")
        return
    if "allOf" in s:
        for sub in s["allOf"]:
            validate(v, sub, root, path)
        return
    if "const" in s and v != s["const"]:
        raise Invalid(f"{path}: {v!r} is not the const")
    if "enum" in s and not any(v == e and type(v) is type(e) for e in s["enum"]):
        raise Invalid(f"{path}: {v!r} not in the enum")
    types = s.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}

        def is_type(t):
            if t == "integer":
                return isinstance(v, int) and not isinstance(v, bool)
            if t == "number":
                return isinstance(v, (int, float)) and not isinstance(v, bool)
            return isinstance(v, kinds[t])
        if not any(is_type(t) for t in types):
            raise Invalid(f"{path}: {v!r} is not of type {types}")
    if isinstance(v, dict):
        props = s.get("properties", {})
        for k in s.get("required", []):
            if k not in v:
                raise Invalid(f"{path}: no required property {k}")
        for k, x in v.items():
            if k in props:
                validate(x, props[k], root, f"{path}.{k}")
            elif s.get("additionalProperties", True) is False:
                raise Invalid(f"{path}: property {k} is not allowed")
            elif isinstance(s.get("additionalProperties"), dict):
                validate(x, s["additionalProperties"], root, f"{path}.{k}")
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", len(v)):
            raise Invalid(f"{path}: {len(v)} items")
        for i, x in enumerate(v):
            validate(x, s.get("items", True), root, f"{path}[{i}]")
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", len(v)):
            raise Invalid(f"{path}: length {len(v)}")
        if "pattern" in s and not re.search(s["pattern"], v):
            raise Invalid(f"{path}: {v!r} does not match {s['pattern']}")
        fmt = s.get("format")
        try:
            if fmt == "date":
                if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
                    raise ValueError
                datetime.date.fromisoformat(v)
            elif fmt == "uuid":
                uuid.UUID(v)
        except ValueError:
            raise Invalid(f"{path}: {v!r} is not a {fmt}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"] or "maximum" in s and v > s["maximum"]:
            raise Invalid(f"{path}: {v} out of bounds")
        if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"] or \
                "exclusiveMaximum" in s and v >= s["exclusiveMaximum"]:
            raise Invalid(f"{path}: {v} out of exclusive bounds")


# Small enough to finish within tinystories3M's context of 256 tokens.
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "color": {"enum": ["red", "green", "blue"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 2},
        },
        "required": ["name", "age", "color", "tags"],
        "additionalProperties": False,
    },
    "nested": {
        "$defs": {"pt": {"type": "object",
                         "properties": {"x": {"type": "number", "minimum": -10, "maximum": 10},
                                        "y": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}},
                         "required": ["x", "y"], "additionalProperties": False}},
        "type": "object",
        "properties": {
            "pos": {"$ref": "#/$defs/pt"},
            "ok": {"type": "boolean"},
            "note": {"type": ["string", "null"], "maxLength": 8},
            "when": {"type": "string", "format": "date"},
        },
        "required": ["pos", "ok", "note"],
        "additionalProperties": False,
    },
    "unions": {
        "type": "object",
        "properties": {
            "v": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"const": "none"}]},
            "w": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["v", "w", "code", "id"],
    },
    "list": {"type": "array", "items": {"enum": [1, 2.5, "x", None, True, {"k": [0]}]}, "minItems": 2, "maxItems": 4},
}


def generate(model, args, n=240):
    r = subprocess.run([BINARY, "generate", "-m", model, "-p", "Once upon a time", "-n", str(n), "-t", "1", "--json",
                        "--quiet"] + args, capture_output=True, timeout=300)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


@unittest.skipUnless(os.path.exists(BINARY), "no plainllama binary (set PLAINLLAMA_BINARY)")
class StructuredOutput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_the_validator_can_fail(self):
        s = SCHEMAS["person"]
        validate({"name": "a", "age": 3, "color": "red", "tags": ["x"]}, s, s)
        for bad in ({"name": "a", "age": 3, "color": "red"}, {"name": "a", "age": 300, "color": "red", "tags": ["x"]},
                    {"name": "a", "age": 3, "color": "pink", "tags": ["x"]},
                    {"name": "a", "age": 3, "color": "red", "tags": ["x"], "z": 1},
                    {"name": "", "age": 3, "color": "red", "tags": ["x"]},
                    {"name": "a", "age": 3.5, "color": "red", "tags": ["x"]}):
            with self.assertRaises(Invalid, msg=bad):
                validate(bad, s, s)
        n = SCHEMAS["nested"]
        for bad in ({"pos": {"x": 0, "y": 1}, "ok": True, "note": None},
                    {"pos": {"x": 0, "y": 0.5}, "ok": True, "note": None, "when": "2023-02-29"}):
            with self.assertRaises(Invalid, msg=bad):
                validate(bad, n, n)
        u = SCHEMAS["unions"]
        with self.assertRaises(Invalid):
            validate({"v": "none", "w": None, "code": "AB-12", "id": "123e4567-e89b-12d3-a456-426614174000"}, u, u)

    def test_every_model_every_schema_greedy_and_sampled(self):
        for model in MODELS:
            for name, schema in SCHEMAS.items():
                path = self.write(name + ".json", json.dumps(schema))
                for args in (["--temp", "0"], ["--temp", "0.8", "--seed", "1"], ["--temp", "1.0", "--seed", "2"],
                             ["--temp", "1.2", "--seed", "3", "--top-k", "0", "--top-p", "1", "--min-p", "0"]):
                    what = f"{os.path.basename(model)} {name} {' '.join(args)}"
                    status, out, err = generate(model, ["--json-schema", path] + args)
                    self.assertEqual(status, 0, what + ": " + err)
                    j = json.loads(out)
                    self.assertIn(j["stop"], ("grammar", "eos"), what + ": " + j["text"])
                    try:
                        value = json.loads(j["text"])
                    except json.JSONDecodeError as e:
                        self.fail(f"{what}: {e}: {j['text']!r}")
                    try:
                        validate(value, schema, schema)
                    except Invalid as e:
                        self.fail(f"{what}: {e}: {j['text']!r}")

    def test_sampled_outputs_differ(self):
        # Constrained, not fixed: different seeds give different objects.
        path = self.write("person.json", json.dumps(SCHEMAS["person"]))
        texts = {json.loads(generate(MODELS[0], ["--json-schema", path, "--temp", "1", "--seed", str(s)])[1])["text"]
                 for s in range(4)}
        self.assertGreater(len(texts), 2)

    def test_grammar_file_and_its_end(self):
        path = self.write("yn.gbnf", '# an answer\nroot ::= ("yes" | "no") "!"\n')
        for seed in range(3):
            status, out, err = generate(MODELS[2], ["--grammar", path, "--temp", "1", "--seed", str(seed)])
            self.assertEqual(status, 0, err)
            j = json.loads(out)
            self.assertIn(j["text"], ("yes!", "no!"))
            self.assertEqual(j["stop"], "grammar")  # complete and nothing may follow
        # Cut short by -n: the stop says so, and stderr too.
        path = self.write("long.gbnf", 'root ::= "a"{50}\n')
        r = subprocess.run([BINARY, "generate", "-m", MODELS[0], "-p", "x", "-n", "3", "--temp", "0", "--json",
                            "--grammar", path], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["stop"], "n_predict")
        self.assertIn(b"stopped before the grammar was complete", r.stderr)

    def test_bad_files_and_flags(self):
        bad_schema = self.write("bad.json", '{"type": "integer", "multipleOf": 3}')
        bad_json = self.write("bad2.json", '{"type": ')
        bad_grammar = self.write("bad.gbnf", 'root ::= item\nitem ::= "a" [b-\n')
        missing = os.path.join(self.dir.name, "missing.json")
        for args, status, line in (
                (["--json-schema", bad_schema], 1,
                 f'plainllama: error: {bad_schema}: schema: unsupported keyword "multipleOf"'),
                (["--json-schema", bad_json], 1, f"plainllama: error: {bad_json}: schema: not valid JSON: "),
                (["--grammar", bad_grammar], 1,
                 f"plainllama: error: {bad_grammar}: line 2, column 14: the character class is not closed with ']'"),
                (["--json-schema", missing], 1, f"plainllama: error: {missing}: "),
                (["--json-schema", bad_schema, "--grammar", bad_grammar], 2,
                 "plainllama: error: --json-schema excludes --grammar"),
        ):
            r = subprocess.run([BINARY, "generate", "-m", MODELS[0], "-p", "x", "-n", "3"] + args, capture_output=True,
                               timeout=60)
            err = r.stderr.decode()
            self.assertEqual(r.returncode, status, err)
            self.assertTrue(err.startswith(line), err)
            self.assertEqual(err.count("\n"), 1, err)  # one line
            self.assertEqual(r.stdout, b"")


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
