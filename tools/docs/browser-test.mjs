// make docs-test (scripts/docs-test.sh, under with-local-api.sh): local-api's /docs in headless Chromium via
// puppeteer-core. Fails, with a screenshot in SHOTS, unless every operation openapi.yaml states renders, no request leaves loopback,
// the page logs no error, and "Try it out" on updateModel with the token pasted into Authorize is 200 with the
// success envelope and an ETag (API_TOKEN) and the 403 envelope on another project's model (SAMPLE_TOKEN).
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const need = (name) => process.env[name] || (() => { throw new Error(`docs-test: ${name} is not set`); })();
const [apiUrl, allProjects, sampleProject, shots] = ["API_URL", "API_TOKEN", "SAMPLE_TOKEN", "SHOTS"].map(need);
const chromium = process.env.CHROMIUM || execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
mkdirSync(shots, { recursive: true });
// The sample records (local/src/samples.rs), which openapi.yaml's examples name.
const [SAMPLE_PROJECT, SAMPLE_MODEL] = ["8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d", "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"];
const [OTHER_PROJECT, OTHER_MODEL] = ["0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e", "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"];
const [API, BLOCK] = ["/api/agent-server", "#operations-default-updateModel"];
const loopback = (url, { protocol, hostname } = new URL(url)) =>
  ["data:", "blob:", "about:"].includes(protocol) || ["127.0.0.1", "localhost", "[::1]"].includes(hostname);
const failures = [];
const fail = (message) => failures.push(message) && console.error(`docs-test: FAIL: ${message}`);
const parse = (text) => { try { return JSON.parse(text); } catch { return fail(`the answer is not JSON: ${text}`); } };
const check = (ok, message) => (ok ? console.log(`docs-test: ok: ${message}`) : fail(message));

// --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; the rest stop Chromium's own traffic.
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-default-apps", "--disable-sync", "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter"],
});
let page;
try {
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.setDefaultTimeout(30_000);
  const requests = [];
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    requests.push(`${request.method()} ${request.url()}`);
    if (loopback(request.url())) return request.continue();
    fail(`a request left loopback: ${request.method()} ${request.url()}`);
    request.abort("blockedbyclient");
  });
  page.on("requestfailed", (r) => loopback(r.url()) && fail(`request failed: ${r.url()} (${r.failure()?.errorText})`));
  // Chromium logs every answer of 400 or more as an error; the API's own (the 403 below) are expected.
  page.on("console", (message) => {
    const api = (message.location()?.url ?? "").startsWith(`${apiUrl}${API}/`);
    if (message.type() === "error" && !api) fail(`the page logged an error: ${message.text()}`);
  });
  page.on("pageerror", (error) => fail(`the page threw: ${error.message}`));

  // Every operation the document states (the openapi.yaml local-api serves), as the page must render it.
  const spec = await (await fetch(`${apiUrl}/openapi.yaml`)).text();
  const [stated, ids] = [[], []];
  let path;
  for (const line of spec.split("\n")) {
    if (/^\S/.test(line)) path = undefined; // a top-level key ends `paths`
    const [, opened] = line.match(/^  (\/\S+):\s*$/) ?? [];
    if (opened) path = opened;
    const [, method] = line.match(/^    (get|put|post|patch|delete):\s*$/) ?? [];
    if (method && path) stated.push(`${method.toUpperCase()} ${path}`);
    const [, id] = line.match(/^      operationId: (\w+)\s*$/) ?? [];
    if (id) ids.push(id);
  }
  check(stated.length > 0 && stated.length === ids.length, `openapi.yaml states ${stated.length} operations`);
  const response = await page.goto(`${apiUrl}/docs`, { waitUntil: "networkidle0" });
  check(response?.status() === 200, `GET /docs is 200 (${response?.status()})`);
  for (const op of ids) await page.waitForSelector(`#operations-default-${op}`, { visible: true });
  const rendered = await page.$$eval(".opblock", (blocks) => blocks.map((block) => {
    const path = block.querySelector(".opblock-summary-path")?.getAttribute("data-path");
    return `${block.querySelector(".opblock-summary-method")?.textContent} ${path}`;
  }));
  check(rendered.sort().join() === stated.sort().join(), `every operation renders: ${rendered.join(", ")}`);
  const title = await page.$eval(".info .title", (node) => node.textContent);
  check(title.includes("Agent Server update API"), `the title renders: ${title}`);
  const server = await page.$eval(".servers select", (node) => node.value);
  check(server === "/", `the only server is this page's origin (${server})`);
  await page.screenshot({ path: join(shots, "docs.png"), fullPage: true });

  // Paste a token into the bearer dialog, as a person would; Swagger UI marks its Logout button only by its label.
  const authorize = async (token) => {
    await page.click(".auth-wrapper .btn.authorize");
    await page.waitForSelector(".modal-ux .auth-container", { visible: true });
    await (await page.$(".modal-ux .auth-btn-wrapper button::-p-text(Logout)"))?.click();
    await (await page.waitForSelector(".modal-ux .auth-container input", { visible: true })).type(token);
    await page.click(".modal-ux .auth-btn-wrapper button.authorize");
    await page.waitForSelector(".modal-ux .auth-btn-wrapper button::-p-text(Logout)", { visible: true });
    await page.click(".modal-ux .close-modal");
    await page.waitForSelector(".modal-ux", { hidden: true });
  };
  // Try it out on updateModel with these ids; the live answer's status, JSON body and headers.
  const tryModel = async (model, project) => {
    if (!(await page.$(`${BLOCK} .try-out__btn.cancel`))) await page.click(`${BLOCK} .try-out__btn`);
    for (const [name, value] of [["id", model], ["project_id", project]]) {
      const input = await page.waitForSelector(`${BLOCK} tr[data-param-name="${name}"] input`, { visible: true });
      await input.click({ clickCount: 3 });
      await input.press("Backspace");
      await input.type(value);
    }
    const body = await page.$eval(`${BLOCK} textarea.body-param__text`, (node) => node.value);
    check(body.includes("Anthropic"), `the request body is openapi.yaml's example: ${body.replace(/\s+/g, " ")}`);
    if (await page.$(`${BLOCK} .live-responses-table`)) await page.click(`${BLOCK} .btn-clear`);
    await page.click(`${BLOCK} button.execute`);
    const table = `${BLOCK} .live-responses-table`;
    await page.waitForSelector(`${table} tbody .response-col_status`, { visible: true });
    const status = await page.$eval(`${table} tbody .response-col_status`, (node) => node.textContent.trim());
    const text = await page.$eval(`${table} .response-col_description .highlight-code pre`, (node) => node.textContent);
    const headers = await page.$$eval(`${table} .headerline`, (ls) => ls.map((l) => l.textContent.trim()).join("; "));
    return { status, headers, envelope: parse(text) };
  };

  await page.click(`${BLOCK} .opblock-summary`);
  await authorize(allProjects);
  const ok = await tryModel(SAMPLE_MODEL, SAMPLE_PROJECT), e = ok.envelope;
  check(ok.status.startsWith("200"), `Try it out: PUT the sample model is 200 (${ok.status})`);
  check(e?.error === false && e.status === 200 && e.message === "Model updated successfully" &&
    e.data?.id === SAMPLE_MODEL && e.data?.provider_type === "Anthropic" && JSON.stringify(e.errorDetails) === "{}",
    `the success envelope: ${JSON.stringify(e)}`);
  check(/(^|; )etag: "[0-9]+"(;|$)/i.test(ok.headers), `the ETag header shows: ${ok.headers}`);
  const put = `PUT ${apiUrl}${API}/models/${SAMPLE_MODEL}?`;
  check(requests.some((r) => r.startsWith(put)), "the PUT went through the page itself");
  // From the request's parameters to the live answer: the page is several screens long by now.
  const clip = await page.$eval(BLOCK, (block) => {
    const top = block.querySelector(".opblock-summary").getBoundingClientRect().top;
    const bottom = block.querySelector(".live-responses-table").getBoundingClientRect().bottom;
    return { x: 0, y: top + window.scrollY, width: 1280, height: bottom - top + 16 };
  });
  await page.screenshot({ path: join(shots, "docs-try-it-out.png"), captureBeyondViewport: true, clip });

  await authorize(sampleProject);
  const forbidden = await tryModel(OTHER_MODEL, OTHER_PROJECT), f = forbidden.envelope;
  check(forbidden.status.startsWith("403"), `the sample-project token, another project: 403 (${forbidden.status})`);
  check(f?.error === true && f.status === 403 && f.errorDetails?.code === "forbidden",
    `the 403 envelope: ${JSON.stringify(f)}`);
} catch (error) {
  fail(`${error.stack || error}`);
} finally {
  if (page && failures.length)
    await page.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => 0);
  await browser.close();
}
if (failures.length > 0) console.error(`docs-test: ${failures.length} failure(s); screenshots in ${shots}`);
else console.log(`docs-test: the reference renders and sends requests; screenshots in ${shots}`);
process.exit(failures.length > 0 ? 1 : 0);
