// make docs-test: the API reference local-api serves at /docs, in headless
// Chromium (Debian's package, driven by puppeteer-core, which downloads no
// browser). Run by scripts/docs-test.sh inside scripts/with-local-api.sh:
//
//   API_URL        the local-api's base URL (loopback)
//   API_TOKEN      a development token granting every project
//   SAMPLE_TOKEN   a development token granting only the sample project
//   SHOTS          where the screenshots go (target/docs-test)
//   CHROMIUM       the browser (default: chromium on PATH)
//
// It fails, with a screenshot of the moment, unless: the page renders the
// six operations (PUT and PATCH on each path); no request leaves loopback (each is recorded, and one
// that would leave is aborted); the page logs no error (a blocked resource,
// a content-policy violation); "Try it out" with the all-projects token
// pasted into the Authorize dialog updates the sample model (200, the
// success envelope, an ETag); the same with the sample-project token on
// another project's model is the 403 envelope.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`docs-test: ${name} is not set`);
  return value;
};
const apiUrl = need("API_URL");
const allProjects = need("API_TOKEN");
const sampleProject = need("SAMPLE_TOKEN");
const shots = need("SHOTS");
const chromium =
  process.env.CHROMIUM || execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
mkdirSync(shots, { recursive: true });

// The sample records (local/src/samples.rs), which openapi.yaml's examples name.
const SAMPLE_PROJECT = "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d";
const SAMPLE_MODEL = "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f";
const OTHER_PROJECT = "0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e";
const OTHER_MODEL = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
const OPERATIONS = ["updateApiKey", "patchApiKey", "updateMcpServer", "patchMcpServer", "updateModel", "patchModel"];
const TIMEOUT = 30_000;

const loopback = (url) => {
  const { protocol, hostname } = new URL(url);
  if (protocol === "data:" || protocol === "blob:" || protocol === "about:") return true;
  return ["127.0.0.1", "localhost", "[::1]"].includes(hostname);
};

const failures = [];
const fail = (message) => {
  failures.push(message);
  console.error(`docs-test: FAIL: ${message}`);
};
const check = (ok, message) => {
  if (ok) console.log(`docs-test: ok: ${message}`);
  else fail(message);
};

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // --no-sandbox: CI runs this as root, where Chromium's sandbox refuses
  // to start. The rest keep Chromium's own background traffic (updates,
  // field trials, safe browsing) from starting at all.
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
    "--metrics-recording-only",
  ],
});
let page;
try {
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.setDefaultTimeout(TIMEOUT);
  const requests = [];
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    requests.push(request.url());
    if (loopback(request.url())) request.continue();
    else {
      fail(`a request left loopback: ${request.method()} ${request.url()}`);
      request.abort("blockedbyclient");
    }
  });
  page.on("requestfailed", (request) => {
    if (loopback(request.url())) fail(`request failed: ${request.url()} (${request.failure()?.errorText})`);
  });
  page.on("console", (message) => {
    // Chromium logs every answer of 400 or more as an error; the API's own
    // (the 403 tried below) are expected.
    const api = (message.location()?.url ?? "").startsWith(`${apiUrl}/api/agent-server/`);
    if (message.type() === "error" && !api) fail(`the page logged an error: ${message.text()}`);
  });
  page.on("pageerror", (error) => fail(`the page threw: ${error.message}`));

  // The page renders: every operation (PUT and PATCH on each of the three
  // paths), under its path.
  const response = await page.goto(`${apiUrl}/docs`, { waitUntil: "networkidle0" });
  check(response?.status() === 200, `GET /docs is 200 (${response?.status()})`);
  for (const operation of OPERATIONS) {
    await page.waitForSelector(`#operations-default-${operation}`, { visible: true });
  }
  const rendered = await page.$$eval(".opblock", (blocks) =>
    blocks.map(
      (block) =>
        `${block.querySelector(".opblock-summary-method")?.textContent} ` +
        `${block.querySelector(".opblock-summary-path")?.getAttribute("data-path")}`,
    ),
  );
  const expected = ["api-keys", "mcp-servers", "models"].flatMap((collection) =>
    ["PATCH", "PUT"].map((method) => `${method} /api/agent-server/${collection}/{id}`),
  );
  check(
    JSON.stringify(rendered.sort()) === JSON.stringify(expected.sort()),
    `the six operations render: ${rendered.join(", ")}`,
  );
  const title = await page.$eval(".info .title", (node) => node.textContent);
  check(title.includes("Agent Server update API"), `the title renders: ${title}`);
  const server = await page.$eval(".servers select", (node) => node.value);
  check(server === "/", `the only server is this page's origin (${server})`);
  await page.screenshot({ path: join(shots, "docs.png"), fullPage: true });

  // Authorize: paste a token into the bearer dialog, as a person would.
  const authorize = async (token) => {
    await page.click(".auth-wrapper .btn.authorize");
    await page.waitForSelector(".modal-ux .auth-container", { visible: true });
    // Swagger UI marks its Logout button only by its label.
    const logout = await page.$(".modal-ux .auth-btn-wrapper button::-p-text(Logout)");
    if (logout) await logout.click();
    const field = await page.waitForSelector(".modal-ux .auth-container input", { visible: true });
    await field.type(token);
    await page.click(".modal-ux .auth-btn-wrapper button.authorize");
    await page.waitForSelector(".modal-ux .auth-btn-wrapper button::-p-text(Logout)", { visible: true });
    await page.click(".modal-ux .close-modal");
    await page.waitForSelector(".modal-ux", { hidden: true });
  };
  // Try it out on updateModel, with these ids, and read the live answer.
  const tryModel = async (model, project) => {
    const block = "#operations-default-updateModel";
    if (!(await page.$(`${block} .try-out__btn.cancel`))) await page.click(`${block} .try-out__btn`);
    const fill = async (name, value) => {
      const input = await page.waitForSelector(`${block} tr[data-param-name="${name}"] input`, { visible: true });
      await input.click({ clickCount: 3 });
      await input.press("Backspace");
      await input.type(value);
    };
    await fill("id", model);
    await fill("project_id", project);
    const body = await page.$eval(`${block} textarea.body-param__text`, (node) => node.value);
    check(body.includes("Anthropic"), `the request body is openapi.yaml's example: ${body.replace(/\s+/g, " ")}`);
    const previous = await page.$(`${block} .live-responses-table`);
    if (previous) await page.click(`${block} .btn-clear`);
    await page.click(`${block} button.execute`);
    await page.waitForSelector(`${block} .live-responses-table tbody .response-col_status`, { visible: true });
    const status = await page.$eval(`${block} .live-responses-table tbody .response-col_status`, (node) =>
      node.textContent.trim(),
    );
    const text = await page.$eval(`${block} .live-responses-table .response-col_description .highlight-code pre`, (node) =>
      node.textContent,
    );
    const headers = (
      await page.$$eval(`${block} .live-responses-table .headerline`, (lines) => lines.map((line) => line.textContent.trim()))
    ).join("; ");
    let envelope = null;
    try {
      envelope = JSON.parse(text);
    } catch {
      fail(`the response body is not JSON: ${text}`);
    }
    return { status, envelope, headers };
  };

  await page.click("#operations-default-updateModel .opblock-summary");
  await authorize(allProjects);
  const ok = await tryModel(SAMPLE_MODEL, SAMPLE_PROJECT);
  check(ok.status.startsWith("200"), `Try it out: PUT the sample model is 200 (${ok.status})`);
  check(
    ok.envelope?.error === false &&
      ok.envelope?.status === 200 &&
      ok.envelope?.message === "Model updated successfully" &&
      ok.envelope?.data?.id === SAMPLE_MODEL &&
      ok.envelope?.data?.provider_type === "Anthropic" &&
      JSON.stringify(ok.envelope?.errorDetails) === "{}",
    `the success envelope, with the updated model: ${JSON.stringify(ok.envelope)}`,
  );
  check(/(^|; )etag: "[0-9]+"(;|$)/i.test(ok.headers), `the ETag header shows: ${ok.headers}`);
  // From the request's parameters to the live answer: the whole page is
  // several screens long by now.
  const region = await page.$eval("#operations-default-updateModel", (block) => {
    const top = block.querySelector(".opblock-summary").getBoundingClientRect().top;
    const bottom = block.querySelector(".live-responses-table").getBoundingClientRect().bottom;
    return { y: top + window.scrollY, height: bottom - top + 16 };
  });
  await page.screenshot({
    path: join(shots, "docs-try-it-out.png"),
    captureBeyondViewport: true,
    clip: { x: 0, y: region.y, width: 1280, height: region.height },
  });

  await authorize(sampleProject);
  const forbidden = await tryModel(OTHER_MODEL, OTHER_PROJECT);
  check(forbidden.status.startsWith("403"), `the sample-project token on another project is 403 (${forbidden.status})`);
  check(
    forbidden.envelope?.error === true &&
      forbidden.envelope?.status === 403 &&
      forbidden.envelope?.errorDetails?.code === "forbidden",
    `the 403 envelope: ${JSON.stringify(forbidden.envelope)}`,
  );

  const own = requests.filter(loopback);
  check(own.length > 0 && own.length === requests.length, `${requests.length} requests, every one to loopback`);
  check(
    requests.some((url) => url.includes("/api/agent-server/models/")),
    "the PUTs went through the page itself",
  );
} catch (error) {
  fail(`${error.stack || error}`);
} finally {
  if (page && failures.length > 0) {
    await page.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => {});
  }
  await browser.close();
}
if (failures.length > 0) {
  console.error(`docs-test: ${failures.length} failure(s); screenshots in ${shots}`);
  process.exit(1);
}
console.log(`docs-test: the reference renders and sends requests; screenshots in ${shots}`);
