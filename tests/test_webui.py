#!/usr/bin/python3
"""`plainllama serve`'s chat page over HTTP (its behaviour in a browser: test_webui_browser.py): GET / and the
page's files are served as they are in src/serve/webui/ (compiled in), with their types and a Content-Security-Policy
that allows the page's own files only; without the API key while the API asks for it; HEAD without a body;
--no-webui turns them into 404s. And the page's script never hands text to the HTML parser (no innerHTML and the
like): model text reaches the page as text only.

Last line: "N passed, N failed".
"""
import os
import re
import sys
import unittest

import unittest_summary
from server_util import BINARY, HAS_SERVE, KEY, SOURCE_DIR, Server, ServerTest

WEBUI = os.path.join(SOURCE_DIR, "src", "serve", "webui")
FILES = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript; charset=utf-8"),
         "/style.css": ("style.css", "text/css; charset=utf-8")}


def source(name):
    with open(os.path.join(WEBUI, name), "rb") as f:
        return f.read()


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Page(ServerTest):
    server_args = ("--api-key", KEY)

    def test_files_as_in_the_tree(self):
        for path, (name, kind) in FILES.items():
            r = self.server.request("GET", path)  # no key: the page loads, then asks for one
            self.assertEqual(r.status, 200, str(r))
            self.assertEqual(r.headers.get("content-type"), kind, str(r))
            self.assertEqual(r.body, source(name), f"{path} is not src/serve/webui/{name}")
            self.assertEqual(r.headers.get("x-content-type-options"), "nosniff", str(r))
            csp = r.headers.get("content-security-policy", "")
            self.assertIn("default-src 'self'", csp, str(r))
            self.assertNotIn("unsafe", csp, str(r))
        self.assertEqual(self.server.request("GET", "/v1/models").status, 401, "the API still asks for the key")
        r = self.server.request("HEAD", "/")
        self.assertEqual((r.status, r.body), (200, b""), str(r))
        self.assertEqual(r.headers.get("content-length"), str(len(source("index.html"))), str(r))

    def test_the_page_uses_its_own_files_only(self):
        html = source("index.html").decode()
        refs = re.findall(r'(?:src|href)="([^"]*)"', html)
        self.assertEqual(sorted(refs), ["app.js", "data:,", "style.css"], "the page loads nothing from elsewhere")
        self.assertNotRegex(html, r"<script>|<style>|\son[a-z]+=", "inline script or style (the CSP refuses them)")

    def test_no_html_from_text(self):
        js = source("app.js").decode()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            self.assertNotIn(sink, js, f"app.js uses {sink}: model text must reach the page as text")


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class NoWebUi(ServerTest):
    server_args = ("--no-webui",)

    def test_no_page(self):
        for path in FILES:
            self.assertError(self.server.request("GET", path), 404, "no endpoint")
        self.assertEqual(self.server.request("GET", "/health").status, 200)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
