#!/usr/bin/python3
"""models/fetch.sh against a fake Hugging Face hub on loopback (HF_ENDPOINT): a repo with tokenizer.json and no
tokenizer.model is fetched with its tokenizer_config.json and generation_config.json, and `plainllama tokenize`
runs on the result; a repo with neither tokenizer file is refused before any weights are downloaded; a repo with
both gets tokenizer.model only; --file NAME.gguf brings one GGUF file (every part of a split one) and the model
runs from it.

Run by ctest with PLAINLLAMA_BINARY, PLAINLLAMA_SHARED_DIR and PLAINLLAMA_SOURCE_DIR. Last line: "N passed, N failed".
"""
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import unittest_summary

SOURCE_DIR = os.environ.get("PLAINLLAMA_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("PLAINLLAMA_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
BINARY = os.environ.get("PLAINLLAMA_BINARY") or os.path.join(SOURCE_DIR, "build", "plainllama")
LLAMA3 = os.path.join(SHARED_DIR, "tokenizers", "llama3.1")
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 128256, "rms_norm_eps": 1e-5}


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Fetch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.hub = os.path.join(cls.tmp.name, "hub")

        def repo(name, files):
            d = os.path.join(cls.hub, name, "resolve", "main")
            os.makedirs(d)
            for f, src in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, f)), exist_ok=True)
                if isinstance(src, str) and os.path.isfile(src):
                    shutil.copyfile(src, os.path.join(d, f))
                else:
                    with open(os.path.join(d, f), "w") as out:
                        out.write(src if isinstance(src, str) else json.dumps(src))

        weights = "not really weights"
        repo("meta/llama3-tiny", {"config.json": CONFIG, "tokenizer.json": os.path.join(LLAMA3, "tokenizer.json"),
                                  "tokenizer_config.json": os.path.join(LLAMA3, "tokenizer_config.json"),
                                  "generation_config.json": {"eos_token_id": [128001, 128008, 128009]},
                                  "model.safetensors": weights})
        repo("meta/no-tokenizer", {"config.json": CONFIG, "model.safetensors": weights})
        repo("meta/both", {"config.json": CONFIG, "tokenizer.model": "sp", "tokenizer.json": "{}",
                           "model.safetensors": weights})
        stories = os.path.join(SHARED_DIR, "models", "gguf", "stories260K-F32.gguf")
        repo("someone/stories-GGUF", {"stories-F32.gguf": stories, "Q8/stories-Q8.gguf": stories,
                                      "split-00001-of-00002.gguf": "part 1", "split-00002-of-00002.gguf": "part 2",
                                      "README.md": "not a model"})
        handler = functools.partial(Quiet, directory=cls.hub)
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.endpoint = f"http://127.0.0.1:{cls.server.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.tmp.cleanup()

    def fetch(self, repo, *extra):
        """Runs a copy of models/fetch.sh in a fresh project folder; returns (result, its models folder)."""
        root = tempfile.mkdtemp(dir=self.tmp.name)
        models = os.path.join(root, "models")
        os.makedirs(models)
        shutil.copy(os.path.join(SOURCE_DIR, "models", "fetch.sh"), models)
        env = dict(os.environ, HF_ENDPOINT=self.endpoint, PLAINLLAMA_SHARED_DIR=os.path.join(root, "none"))
        env.pop("HF_TOKEN", None)
        r = subprocess.run([os.path.join(models, "fetch.sh"), repo, *extra], capture_output=True, text=True, env=env,
                           timeout=120)
        return r, models

    def test_tokenizer_json_repo(self):
        r, models = self.fetch("meta/llama3-tiny")
        self.assertEqual(r.returncode, 0, r.stderr)
        dest = os.path.join(models, "llama3-tiny")
        self.assertEqual(sorted(os.listdir(dest)), ["config.json", "generation_config.json", "model.safetensors",
                                                     "tokenizer.json", "tokenizer_config.json"])
        self.assertEqual(os.readlink(os.path.join(models, "default")), "llama3-tiny")
        t = subprocess.run([BINARY, "tokenize", "-m", dest, "-p", "Hello world"], capture_output=True, text=True)
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertEqual(t.stdout, "128000 9906 1917\n")

    def test_no_tokenizer_refused_before_the_weights(self):
        r, models = self.fetch("meta/no-tokenizer")
        self.assertEqual(r.returncode, 1)
        self.assertIn("neither tokenizer.model (SentencePiece) nor tokenizer.json", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(models, "no-tokenizer", "model.safetensors")))
        self.assertFalse(os.path.lexists(os.path.join(models, "default")))

    def test_dot_parts_refused(self):
        for repo in ("owner/..", "owner/.", "../x", "./x"):
            r, models = self.fetch(repo)
            self.assertEqual(r.returncode, 1, repo)
            self.assertIn("'.' and '..' are not repo names", r.stderr)
            self.assertEqual(sorted(os.listdir(os.path.dirname(models))), ["models"])  # nothing written beside it

    def test_sentencepiece_preferred(self):
        r, models = self.fetch("meta/both")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(models, "both"))),
                         ["config.json", "model.safetensors", "tokenizer.model"])

    def test_one_gguf_file(self):
        for file in ("stories-F32.gguf", "Q8/stories-Q8.gguf"):
            r, models = self.fetch("someone/stories-GGUF", "--file", file)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.readlink(os.path.join(models, "default")), "stories-GGUF/" + file)
            self.assertFalse(os.path.exists(os.path.join(models, "stories-GGUF", "README.md")))
            g = subprocess.run([BINARY, "generate", "-m", os.path.join(models, "default"), "-p", "Once upon a time",
                                "-n", "8", "--temp", "0", "--quiet"], capture_output=True, text=True)
            self.assertEqual(g.returncode, 0, g.stderr)
            self.assertTrue(g.stdout.startswith("Once upon a time"), g.stdout)

    def test_split_gguf_brings_every_part(self):
        r, models = self.fetch("someone/stories-GGUF", "--file", "split-00001-of-00002.gguf")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(models, "stories-GGUF"))),
                         ["split-00001-of-00002.gguf", "split-00002-of-00002.gguf"])

    def test_gguf_file_refused_when_missing_or_not_a_plain_path(self):
        r, models = self.fetch("someone/stories-GGUF", "--file", "nope.gguf")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no nope.gguf on 127.0.0.1", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(models, "stories-GGUF")))
        for bad in ("../x.gguf", "a/../../x.gguf", "/etc/x.gguf", "model.bin", "a b.gguf"):
            r, models = self.fetch("someone/stories-GGUF", "--file", bad)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn("--file", r.stderr)
            self.assertEqual(sorted(os.listdir(models)), ["fetch.sh"], bad)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
