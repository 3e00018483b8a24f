#!/usr/bin/python3
"""The chat page (GET /) in a real browser: Debian's headless Chromium driven by puppeteer-core
(tests/web/webui_browser.mjs, one browser launch for every check), against `plainllama serve --api-key` on the slow
model of server_util (a reply of " the" repeated, some hundred tokens a second: a reply streams over many frames,
and a long one is still streaming when Stop is pressed). Checked as a person would use the page: without the key the
page says it needs one; with it a typed message gets a reply that streams in (several DOM updates, each adding
text) with its token counts and speed; Stop ends the stream and the server frees the slot (/metrics, /ready);
Regenerate; a reload brings the conversation back; code blocks render and HTML in messages stays text; a wrong key
gets a clear message; New chat; a phone-width screen. Screenshots go to build/tests/output/test_webui_browser/.

Needs /usr/bin/chromium and tests/web/node_modules (scripts/setup.sh installs both). Not run under the sanitizers.
Last line: "N passed, N failed".
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import unittest_summary
from server_util import BINARY, HAS_SERVE, KEY, SOURCE_DIR, Server, make_slow_model

WEB_DIR = os.path.join(SOURCE_DIR, "tests", "web")
OUTPUT = os.path.join(os.environ.get("PLAINLLAMA_TEST_OUTPUT") or tempfile.gettempdir(), "test_webui_browser")


@unittest.skipUnless(HAS_SERVE, f"{BINARY} has no serve subcommand")
class Browser(unittest.TestCase):
    def test_chat_page(self):
        self.assertTrue(os.access("/usr/bin/chromium", os.X_OK), "no /usr/bin/chromium: scripts/setup.sh installs it")
        self.assertTrue(os.path.isdir(os.path.join(WEB_DIR, "node_modules", "puppeteer-core")),
                        "no tests/web/node_modules/puppeteer-core: scripts/setup.sh installs it")
        folder = tempfile.mkdtemp(prefix="plainllama-webui-")
        server = None
        try:
            model = make_slow_model(os.path.join(folder, "slow"))
            server = Server("--parallel", "1", "--api-key", KEY, model=model)
            shutil.rmtree(OUTPUT, ignore_errors=True)
            r = subprocess.run(["node", os.path.join(WEB_DIR, "webui_browser.mjs"), f"http://127.0.0.1:{server.port}/",
                                KEY, OUTPUT], capture_output=True, text=True, timeout=300, cwd=WEB_DIR)
            sys.stderr.write(r.stdout)
            if r.returncode != 0:
                self.fail(f"node tests/web/webui_browser.mjs: exit status {r.returncode}\n{r.stdout}\n{r.stderr}\n"
                          f"screenshots in {OUTPUT}\nserver stderr (end):\n{server.log[-3000:]}")
            # the server saw the page's requests: Stop's hang-up cancelled the long reply
            self.assertRegex(server.log, r"finish cancelled \(client gone\)")
        finally:
            if server:
                server.kill()
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(unittest_summary.run(__name__))
