// The chat page in headless Chromium, as a person uses it: typing, clicking, reloading. Run by
// tests/test_webui_browser.py against `plainllama serve` on the slow model (a reply of " the" repeated, about a
// hundred tokens a second) with --parallel 1 and --api-key.
//   node webui_browser.mjs URL KEY OUTPUT_FOLDER
// Screenshots go to OUTPUT_FOLDER; each check prints a line, a failed one throws (exit status 1).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [url, key, out] = process.argv.slice(2);
const TIMEOUT = 30000;
fs.mkdirSync(out, { recursive: true });

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "plainllama-chromium-"));
const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  userDataDir: profile,
  // without the background-networking flags Chromium reaches out to the network, which this machine refuses
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const problems = [];
let step = "start";

async function metrics() {
  const res = await fetch(new URL("metrics", url), { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200, "GET /metrics with the key");
  const text = await res.text();
  const value = (name) => Number(text.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1]);
  return { busy: value("plainllama_slots_busy") };
}

async function waitFor(what, fn, ...args) {
  try {
    await page.waitForFunction(fn, { timeout: TIMEOUT, polling: 20 }, ...args);
  } catch (e) {
    throw new Error(`${step}: waited ${TIMEOUT / 1000} s for ${what}: ${e.message}`);
  }
}

async function replace(selector, text) {  // select a field's text and type over it
  await page.click(selector, { clickCount: 3 });
  await page.keyboard.press("Backspace");
  await page.type(selector, text);
}

const lastReply = () => page.$eval(".msg.assistant:last-of-type .body", (el) => el.textContent).catch(() => "");
const texts = () => page.$$eval(".msg .body", (els) => els.map((e) => e.textContent));
const shot = (name) => page.screenshot({ path: path.join(out, name) });
const ok = (what) => console.log(`ok: ${what}`);

const page = await browser.newPage();
page.on("pageerror", (e) => problems.push(`${step}: page error: ${e.message}`));
page.on("console", (m) => {
  // a refused request is logged by Chromium itself ("Failed to load resource: ... 401"): expected where keys are wrong
  if (m.type() === "error" && !m.text().startsWith("Failed to load resource"))
    problems.push(`${step}: console error: ${m.text()}`);
});

try {
  step = "no key";
  await page.setViewport({ width: 1000, height: 680 });
  const res = await page.goto(url);
  assert.equal(res.status(), 200, "the page is served without the key");
  await waitFor("the banner asking for a key", () => !document.getElementById("banner").hidden);
  assert.match(await page.$eval("#banner", (e) => e.textContent), /needs an API key \(401\)/);
  await shot("01-no-key.png");
  ok("without a key the page says the server needs one");

  step = "key";
  await page.type("#api-key", key);
  await page.keyboard.press("Tab");
  await waitFor("the model's name", () => document.getElementById("model").textContent === "slow");
  assert.equal(await page.$eval("#banner", (e) => e.hidden), true, "the banner is gone with the right key");
  ok("with the key the page shows the model");

  step = "streamed reply";
  await replace("#max-tokens", "48");
  await page.evaluate(() => {
    // every text the last reply shows, as the page changes it
    window.seen = [];
    new MutationObserver(() => {
      const body = document.querySelector(".msg.assistant:last-of-type .body");
      const text = body ? body.textContent : "";
      if (text && window.seen.at(-1) !== text) window.seen.push(text);
    }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
  });
  await page.type("#input", "Hello there");
  await page.keyboard.press("Enter");
  await waitFor("the reply's end", () => document.querySelector(".msg.assistant .regenerate"));
  const seen = await page.evaluate(() => window.seen);
  const reply = await lastReply();
  assert.equal(reply, Array(48).fill("the").join(" "), "the whole reply");
  assert.ok(seen.length >= 4, `the reply came in ${seen.length} updates: ${JSON.stringify(seen)}`);
  for (let i = 1; i < seen.length; ++i)
    assert.ok(seen[i].startsWith(seen[i - 1]) && seen[i].length > seen[i - 1].length, "each update adds text");
  const stats = await page.$eval(".msg.assistant:last-of-type .stats", (e) => e.textContent);
  assert.match(stats, /^48 tokens · [0-9.]+ tok\/s · prompt \d+/, "the reply's token counts and speed");
  assert.equal(await page.$eval("#input", (e) => e.value), "", "the input is emptied");
  await shot("02-streamed-reply.png");
  ok(`the reply streamed in ${seen.length} updates; stats "${stats}"`);

  step = "stop";
  await replace("#max-tokens", "4000");
  await page.type("#input", "Tell me more");
  await page.keyboard.press("Enter");
  await waitFor("text of the second reply", () => {
    const all = document.querySelectorAll(".msg.assistant .body");
    return all.length === 2 && all[1].textContent.length > 40;
  });
  assert.equal((await metrics()).busy, 1, "a slot is busy while the reply streams");
  const ready = await fetch(new URL("ready", url));
  assert.equal(ready.status, 503, "/ready: no slot free");
  assert.equal(ready.headers.get("retry-after"), "1");
  await page.click("#stop");
  await waitFor("the reply marked stopped", () => {
    const s = document.querySelector(".msg.assistant:last-of-type .stats");
    return s && s.textContent.includes("stopped");
  });
  const t0 = Date.now();
  while ((await metrics()).busy !== 0) {
    assert.ok(Date.now() - t0 < TIMEOUT, "the slot is freed after Stop");
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal((await fetch(new URL("ready", url))).status, 200, "/ready: a slot is free again");
  const stopped = await lastReply();
  assert.ok(stopped.length > 40 && stopped.length < 4000 * 4, "the stopped reply keeps its text");
  assert.equal(await page.$eval("#send", (e) => e.hidden), false, "Send is back");
  await shot("03-stopped.png");
  ok(`Stop ended the stream after ${stopped.split(" ").length} words and the server freed the slot`);

  step = "regenerate";
  await replace("#max-tokens", "16");
  await page.click(".msg.assistant:last-of-type .regenerate");
  await waitFor("the regenerated reply", () => {
    const s = document.querySelector(".msg.assistant:last-of-type .stats");
    return s && s.textContent.startsWith("16 tokens");
  });
  assert.equal(await lastReply(), Array(16).fill("the").join(" "));
  assert.equal((await texts()).length, 4, "Regenerate replaced the reply");
  ok("Regenerate replaced the last reply");

  step = "reload";
  const before = await texts();
  await page.reload();
  await waitFor("the conversation", (n) => document.querySelectorAll(".msg").length === n, before.length);
  assert.deepEqual(await texts(), before, "the conversation after a reload");
  assert.equal(await page.$eval("#max-tokens", (e) => e.value), "16", "the settings after a reload");
  ok("a reload brings the conversation and the settings back");

  step = "markdown";
  await page.evaluate(() => localStorage.setItem("plainllama.chat", JSON.stringify({ messages: [
    { role: "user", content: "Show me <b>HTML</b> and code" },
    { role: "assistant", content: "Here:\n```html\n<img src=x onerror=\"window.hacked=1\">\n```\n" +
      "Inline `<script>window.hacked=2</script>` and **bold <i>text</i>**." },
  ] })));
  await page.reload();
  await waitFor("the stored conversation", () => document.querySelectorAll(".msg").length === 2);
  const md = await page.evaluate(() => {
    const box = document.getElementById("messages");
    return {
      elements: [...box.querySelectorAll("b, i, img, script")].length,
      pre: box.querySelector("pre code")?.textContent,
      lang: box.querySelector("pre .lang")?.textContent,
      code: box.querySelector(".body > code")?.textContent,
      strong: box.querySelector("strong")?.textContent,
      hacked: typeof window.hacked,
    };
  });
  assert.deepEqual(md, { elements: 0, pre: "<img src=x onerror=\"window.hacked=1\">", lang: "html",
                         code: "<script>window.hacked=2</script>", strong: "bold <i>text</i>", hacked: "undefined" });
  await shot("04-markdown.png");
  ok("code blocks, inline code and bold render; HTML in messages stays text");

  step = "wrong key";
  await replace("#api-key", "wrong-key");
  await page.keyboard.press("Tab");
  await waitFor("the banner about the key", () => !document.getElementById("banner").hidden);
  assert.match(await page.$eval("#banner", (e) => e.textContent), /refused the API key \(401: wrong API key\)/);
  await page.type("#input", "Are you there?");
  await page.keyboard.press("Enter");
  await waitFor("the question back in the input box",
                () => document.getElementById("input").value === "Are you there?" &&
                      document.getElementById("stop").hidden);
  assert.equal((await texts()).length, 2, "the refused question is not in the conversation");
  assert.match(await page.$eval("#banner", (e) => e.textContent), /refused the API key/);
  await shot("05-wrong-key.png");
  ok("a wrong key gets a clear message and the question back");

  step = "new chat";
  await replace("#api-key", key);
  await page.keyboard.press("Tab");
  await page.click("#new-chat");
  await waitFor("an empty conversation", () => document.querySelectorAll(".msg").length === 0);
  assert.deepEqual(await page.evaluate(() => JSON.parse(localStorage.getItem("plainllama.chat"))), { messages: [] });
  ok("New chat empties the conversation");

  step = "phone";
  await page.setViewport({ width: 390, height: 760, isMobile: true, hasTouch: true });
  await page.reload();
  await page.type("#input", "Hi from a phone");
  await page.click("#send");
  await waitFor("the reply", () => document.querySelector(".msg.assistant .regenerate"));
  const layout = await page.evaluate(() => {
    const r = (id) => document.getElementById(id).getBoundingClientRect();
    return { scroll: document.documentElement.scrollWidth, send: r("send").right, input: r("input").width,
             settings: getComputedStyle(document.getElementById("settings")).display };
  });
  assert.ok(layout.scroll <= 390, `no sideways scrolling at phone width (${layout.scroll} px)`);
  assert.ok(layout.send <= 390 && layout.input > 200, `the composer fits (${JSON.stringify(layout)})`);
  assert.equal(layout.settings, "none", "the settings fold away at phone width");
  await shot("06-phone.png");
  await page.click("#settings-toggle");
  assert.notEqual(await page.$eval("#settings", (e) => getComputedStyle(e).display), "none");
  await shot("07-phone-settings.png");
  ok("at phone width the page fits and the settings open from their button");

  assert.deepEqual(problems, [], "no page errors, no console errors");
} catch (e) {
  await page.screenshot({ path: path.join(out, "failed.png") }).catch(() => {});
  console.error(`FAILED at ${step}: ${e.message}`);
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
