// Drive the page in headless Chromium (playwright-core, the system's Chromium) and print what it reports.
//
//   node drive.mjs JOBS.json
//
// JOBS.json: {"chromium": "/usr/bin/chromium", "userDataDir": "/tmp/empty-dir", "jobs": [
//   {"url": "http://127.0.0.1:8000/?mode=random&fps=0&episodes=20", "until": "done", "timeoutMs": 15000,
//    "screenshot": "/tmp/random.png"}, ...]}
// until: "done" (window.gymloopStats.done), "error" (the page shows an error) or "ready" (the game runs).
// steps (optional, after `until`): [{"press": "ArrowUp"}, {"waitFor": "<JS expression>"}, {"snapshot": true}]:
// keys pressed on the page, conditions waited for (timeoutMs each), copies of window.gymloopStats taken.
// Prints one JSON line: {"results": [{url, stats, snapshots, errorText, console, screenshot, timedOut}]};
// exits 1 when Chromium cannot start.

import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const args = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const context = await chromium.launchPersistentContext(spec.userDataDir, {
  executablePath: spec.chromium || "/usr/bin/chromium",
  headless: true,
  args,
  viewport: { width: 1000, height: 700 },
});
const results = [];
try {
  for (const job of spec.jobs) {
    const page = await context.newPage();
    const consoleLines = [];
    page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => consoleLines.push(`pageerror: ${e.message}`));
    const result = { url: job.url, stats: null, snapshots: [], errorText: null, console: consoleLines, timedOut: false };
    try {
      await page.goto(job.url, { waitUntil: "load", timeout: job.timeoutMs });
      const condition = {
        error: "window.gymloopStats && window.gymloopStats.error !== null",
        ready: "window.gymloopStats && (window.gymloopStats.ready || window.gymloopStats.error !== null)",
      }[job.until] ?? "window.gymloopStats && (window.gymloopStats.done || window.gymloopStats.error !== null)";
      await page.waitForFunction(condition, null, { timeout: job.timeoutMs, polling: 50 });
      for (const step of job.steps ?? []) {
        if (step.press) await page.keyboard.press(step.press);
        if (step.waitFor) await page.waitForFunction(step.waitFor, null, { timeout: job.timeoutMs, polling: 20 });
        if (step.snapshot) result.snapshots.push(await page.evaluate(() => structuredClone(window.gymloopStats)));
      }
    } catch (e) {
      result.timedOut = true;
      consoleLines.push(`driver: ${e.message.split("\n")[0]}`);
    }
    result.stats = await page.evaluate(() => window.gymloopStats ?? null).catch(() => null);
    result.errorText = await page.evaluate(() => {
      const box = document.getElementById("error");
      return box && !box.hidden ? box.textContent : null;
    }).catch(() => null);
    if (job.screenshot) {
      await page.locator("#board").screenshot({ path: job.screenshot });
      result.screenshot = job.screenshot;
    }
    results.push(result);
    await page.close();
  }
} finally {
  await context.close();
}
process.stdout.write(`${JSON.stringify({ results })}\n`);
