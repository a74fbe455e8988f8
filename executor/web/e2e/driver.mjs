// Drives headless Chromium for Go tests (package webtest), one request a line.
//
// Each line on stdin is a JSON request {id, op, ...}; each answer is a line on
// stdout {id, ok, value} or {id, ok: false, error}. The browser closes when
// stdin does. Functions come as JavaScript source and run in the page as an
// expression evaluated through the DevTools protocol, which the page's content
// security policy does not stop.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const timeout = Number(process.env.WEBTEST_TIMEOUT_MS || 10_000);
// launch starts Chromium on a new, empty profile (user data dir) of its own,
// removed when it closes.
const browser = await chromium.launch({
  executablePath: process.env.WEBTEST_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  timeout,
});
const pages = [];
const problems = [];

function watch(page, label) {
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(`${label}: console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`${label}: ${e.message}`));
  page.on("requestfailed", (r) => {
    // An event stream is cut when its page closes; that is no fault.
    if (!r.url().endsWith("/events")) problems.push(`${label}: request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
}

const call = (fn, arg) => `(${fn})(${JSON.stringify(arg ?? null)})`;

const ops = {
  async open({ url, javascript }) {
    const context = await browser.newContext({ javaScriptEnabled: javascript, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(timeout);
    const label = `page ${pages.length}${javascript ? "" : " (no JavaScript)"}`;
    watch(page, label);
    pages.push(page);
    await page.goto(url);
    return pages.length - 1;
  },
  async eval({ page, fn, arg }) {
    return pages[page].evaluate(call(fn, arg));
  },
  // waitFor polls rather than use waitForFunction, whose predicate the page's
  // content security policy stops (it is evaluated with eval in the page).
  async waitFor({ page, fn, arg }) {
    const end = Date.now() + timeout;
    for (;;) {
      if (await pages[page].evaluate(call(fn, arg))) return true;
      if (Date.now() > end) throw new Error(`not so after ${timeout} ms`);
      await new Promise((r) => setTimeout(r, 25));
    }
  },
  async click({ page, selector }) {
    await pages[page].locator(selector).first().click();
    return true;
  },
  async screenshot({ page, path }) {
    await pages[page].screenshot({ path, fullPage: true });
    return path;
  },
  async problems() {
    return problems;
  },
};

const answer = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
try {
  answer({ id: 0, ok: true, value: "ready" });
  for await (const line of createInterface({ input: process.stdin })) {
    let req;
    try {
      req = JSON.parse(line);
      const op = ops[req.op];
      if (!op) throw new Error(`unknown op ${req.op}`);
      answer({ id: req.id, ok: true, value: (await op(req)) ?? null });
    } catch (e) {
      answer({ id: req?.id ?? -1, ok: false, error: String(e?.message ?? e) });
    }
  }
} finally {
  await browser.close();
}
