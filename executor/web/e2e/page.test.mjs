// Drives the live page in headless Chromium: node page.test.mjs URL SCREENSHOT.
//
// The Go test that runs this serves the page from a source it controls. When
// this script prints "STATE name" it waits for "OK name" on stdin: by then the
// Go side has changed the source, and the page must show it without a reload.
import assert from "node:assert/strict";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [url, screenshot] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error("usage: node page.test.mjs URL SCREENSHOT");
  process.exit(2);
}
const timeout = 10_000;

const stdin = createInterface({ input: process.stdin });
const acks = stdin[Symbol.asyncIterator]();
async function state(name) {
  console.log(`STATE ${name}`);
  const { value, done } = await acks.next();
  assert.ok(!done && value === `OK ${name}`, `the test did not set state ${name}: ${value}`);
}

// The phases' fills, as the page's style sheet gives them.
const fills = {
  planned: "rgb(238, 240, 243)",
  dispatching: "rgb(254, 243, 199)",
  "in progress": "rgb(219, 234, 254)",
  reviewing: "rgb(237, 233, 254)",
  done: "rgb(220, 252, 231)",
  blocked: "rgb(254, 226, 226)",
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  // launch gives every run a new, empty profile (user data dir) of its own.
  args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  timeout,
});
const problems = [];
function watch(page, label) {
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`${label} console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`${label} page error: ${e.message}`));
  page.on("requestfailed", (r) => { if (!r.url().endsWith("/events")) problems.push(`${label} request failed: ${r.url()}`); });
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  watch(page, "live");
  await page.goto(url);

  // The page as loaded: every step, coloured by its phase, and the live stream up.
  await page.locator("#conn.live").waitFor();
  const phaseOf = async (id) => page.evaluate((id) => {
    const row = [...document.querySelectorAll("tr[data-step]")].find((r) => r.getAttribute("data-step") === id);
    return row && row.getAttribute("data-phase");
  }, id);
  const fillOf = async (id) => page.evaluate((id) => {
    const node = [...document.querySelectorAll("a.node")].find((a) => a.querySelector("text.id").textContent === id);
    return node && getComputedStyle(node.querySelector("rect")).fill;
  }, id);
  const want = { research: "done", outline: "reviewing", paper: "dispatching", review: "planned", gate: "blocked" };
  for (const [id, phase] of Object.entries(want)) {
    assert.equal(await phaseOf(id), phase, `step ${id}'s phase`);
    assert.equal(await fillOf(id), fills[phase], `step ${id}'s colour in the graph`);
  }
  // A hostile step id is text, and ran nothing.
  const evil = await page.evaluate(() => [...document.querySelectorAll("tr[data-step]")].map((r) => r.getAttribute("data-step")).find((id) => id.startsWith("<img")));
  assert.ok(evil, "the hostile step is on the page");
  assert.equal(await page.evaluate(() => window.pwned), undefined, "a step id ran script");

  // A reload would lose this mark, and the log the reader opened would close.
  await page.evaluate(() => { window.loadedOnce = true; });
  await page.locator('details.log[data-log="research"] > summary').click();

  await state("accepted");
  await page.waitForFunction(() => document.querySelector('tr[data-step="paper"]').getAttribute("data-phase") === "in progress");
  assert.equal(await fillOf("paper"), fills["in progress"]);
  assert.match(await page.locator('tr[data-step="paper"] td.report').innerText(), /on it/);

  await state("done");
  await page.waitForFunction(() => document.querySelector('tr[data-step="paper"]').getAttribute("data-phase") === "done");
  assert.equal(await fillOf("paper"), fills.done);
  assert.equal(await phaseOf("review"), "dispatching");
  await page.locator("table.notes tr[data-note]").filter({ hasText: "draft written" }).waitFor();
  assert.match(await page.title(), /^DONE · research-paper/);
  assert.equal(await page.evaluate(() => window.loadedOnce), true, "the page reloaded");
  assert.equal(await page.evaluate(() => document.querySelector('details.log[data-log="research"]').open), true,
    "the log the reader opened closed on an update");
  assert.equal(await page.evaluate(() => window.pwned), undefined, "a step id ran script after an update");
  await page.screenshot({ path: screenshot, fullPage: true });

  // Without JavaScript the same page is all there, as the server drew it.
  const still = await browser.newContext({ javaScriptEnabled: false });
  const plain = await still.newPage();
  plain.setDefaultTimeout(timeout);
  watch(plain, "no-js");
  await plain.goto(url);
  assert.match(await plain.locator("#conn").innerText(), /static/);
  for (const [id, phase] of Object.entries({ ...want, paper: "done", review: "dispatching" })) {
    const row = plain.locator(`tr[data-step="${id}"]`);
    assert.equal(await row.getAttribute("data-phase"), phase, `no-js: step ${id}'s phase`);
  }
  assert.equal(await plain.locator("svg a.node").count(), 6, "no-js: the graph's boxes");
  assert.match(await plain.locator("table.notes").innerText(), /draft written/);

  assert.deepEqual(problems, [], "console errors or failed requests");
  console.log("browser checks passed");
} finally {
  stdin.close();
  await browser.close();
}
