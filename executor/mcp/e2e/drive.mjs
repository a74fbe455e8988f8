// A third-party MCP client (the TypeScript SDK) drives a pulled plan through
// stepseq: plan_submit, step_current, accepted, an invalid result, the corrected
// result, done; then the second step, until the plan is DONE.
//
//   node drive.mjs stdio STEPSEQ_BINARY WORKSPACE
//   node drive.mjs http URL [TOKEN]
//
// With a TOKEN, a client without it is refused first; then the client sends
// it as Authorization: Bearer.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = `agent: mcp
steps:
  - id: fetch
    title: Fetch
    instruction: Find the page and report its url
    result:
      type: object
      required: [url]
      properties:
        url: {type: string, pattern: "^https://"}
  - id: use
    title: Use
    instruction: Use the page
    when: steps.fetch.result.url != ""
`;

function fail(msg) {
  console.error("e2e: " + msg);
  process.exit(1);
}

const [mode, a, b] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: a, args: ["mcp", b], stderr: "inherit" });
} else if (mode === "http") {
  if (b) {
    const refused = new Client({ name: "node-e2e-no-token", version: "1.0.0" });
    let err;
    try {
      await refused.connect(new StreamableHTTPClientTransport(new URL(a)));
    } catch (e) {
      err = e;
    }
    if (!err || err.code !== 401 || !String(err).includes("no token") || !String(err).includes('"code":"unauthorized"')) {
      fail(`a client without the token was not refused with 401 and the code unauthorized: ${err} (code ${err && err.code})`);
    }
  }
  const requestInit = b ? { headers: { Authorization: `Bearer ${b}` } } : undefined;
  transport = new StreamableHTTPClientTransport(new URL(a), { requestInit });
} else {
  fail("usage: drive.mjs stdio BINARY DIR | http URL [TOKEN]");
}

const client = new Client({ name: "node-e2e", version: "1.0.0" });
await client.connect(transport);

async function call(name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) {
    fail(`${name}: ${res.content.map((c) => c.text).join(" ")}`);
  }
  return res.structuredContent;
}

// refused calls a tool that must refuse with code, and returns its structured content.
async function refused(name, args, code) {
  const res = await client.callTool({ name, arguments: args });
  if (!res.isError || !res.structuredContent || res.structuredContent.code !== code) {
    fail(`${name}: want a refusal with code ${code}, got ${JSON.stringify(res)}`);
  }
  return res.structuredContent;
}

async function until(name, args, cond, what) {
  const deadline = Date.now() + 15000;
  for (;;) {
    const out = await call(name, args);
    if (cond(out)) return out;
    if (Date.now() > deadline) fail(`${what}: last ${JSON.stringify(out)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function report(token, status, result) {
  const r = { token, status, summary: `${status} the step`, evidence: "opened the page", risk: "none", next: "none" };
  if (result !== undefined) r.result = result;
  return r;
}

const tools = (await client.listTools()).tools.map((t) => t.name).sort();
for (const want of ["logs", "notifications", "plan_submit", "plan_validate", "retry", "status", "step_current", "step_report", "trigger"]) {
  if (!tools.includes(want)) fail(`tool ${want} missing from ${tools}`);
}

const submitted = await call("plan_submit", { name: "e2e", yaml: plan });
if (submitted.status !== "active") fail(`plan_submit: ${JSON.stringify(submitted)}`);

let cur = (await until("step_current", {}, (o) => o.step, "no step offered")).step;
if (cur.id !== "fetch" || cur.try !== 1 || !cur.result) fail(`step_current: ${JSON.stringify(cur)}`);

let v = await call("step_report", report(cur.token, "accepted"));
if (!v.accepted) fail(`accepted refused: ${JSON.stringify(v)}`);

v = await refused("step_report", report(cur.token, "done", { url: "ftp://example.org" }), "invalid_result");
if (v.accepted || !v.reasons.some((r) => r.startsWith("/url: "))) fail(`invalid result: ${JSON.stringify(v)}`);
await refused("logs", { step: null }, "invalid_params");
await refused("retry", { step: "nope" }, "not_found");

v = await call("step_report", report(cur.token, "done", { url: "https://example.org" }));
if (!v.accepted) fail(`corrected result refused: ${JSON.stringify(v)}`);

cur = (await until("step_current", {}, (o) => o.step && o.step.id === "use", "second step never offered")).step;
await call("step_report", report(cur.token, "accepted"));
v = await call("step_report", report(cur.token, "done"));
if (!v.accepted) fail(`done refused: ${JSON.stringify(v)}`);

const st = await until("status", {}, (o) => o.status === "DONE", "plan never DONE");
if (st.steps.length !== 2) fail(`status: ${JSON.stringify(st)}`);

// Runs: the plan submitted is listed, and a run of it starts beside the
// workspace's own; the tools that touch a run take it.
const listed = await call("plan_list");
const e2e = listed.plans.find((p) => p.name === "e2e");
if (!e2e || !e2e.valid || e2e.steps.map((s) => s.title).join(",") !== "Fetch,Use") fail(`plan_list: ${JSON.stringify(listed)}`);
const started = await call("run_start", { plan: "e2e", run: "side" });
if (started.run.name !== "side" || started.run.state !== "state.side.json") fail(`run_start: ${JSON.stringify(started)}`);
await refused("run_start", { plan: "e2e", run: "side" }, "busy");
const runs = await call("run_list", { filter: "side" });
if (runs.runs.length !== 1 || runs.runs[0].name !== "side") fail(`run_list: ${JSON.stringify(runs)}`);
const side = await call("status", { run: "side" });
if (side.plan !== "e2e" || side.steps.length !== 2) fail(`status of a run: ${JSON.stringify(side)}`);
await call("logs", { run: "side", step: "fetch" });
await refused("status", { run: "nope" }, "not_found");

// The run's pulled steps, with run; its tokens name the run.
cur = (await until("step_current", { run: "side" }, (o) => o.step, "the run's step never offered")).step;
if (cur.id !== "fetch" || !cur.token.startsWith("side:")) fail(`step_current of the run: ${JSON.stringify(cur)}`);
await call("step_report", report(cur.token, "accepted"));
await refused("step_report", report(cur.token, "done", { url: "ftp://example.org" }), "invalid_result");
v = await call("step_report", report(cur.token, "done", { url: "https://example.org" }));
if (!v.accepted) fail(`the run's done refused: ${JSON.stringify(v)}`);
cur = (await until("step_current", { run: "side" }, (o) => o.step && o.step.id === "use", "the run's second step never offered")).step;
await call("step_report", { ...report(cur.token, "accepted"), run: "side" });
await call("step_report", report(cur.token, "done"));
await until("status", { run: "side" }, (o) => o.status === "DONE", "the run never DONE");
await refused("run_close", { run: "nope" }, "not_found");
await client.close();
console.log(`e2e ${mode}: ok`);
