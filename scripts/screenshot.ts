/**
 * `deno run -A scripts/screenshot.ts RUN_OR_HTML OUT.png [--width 1280]`: a full-page PNG of a run's
 * report in headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM). RUN_OR_HTML is a run
 * directory (its report is rendered first, into a temporary file) or an HTML file. Fails, listing
 * them, when the page logs errors.
 */
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "@std/cli";
import { Chromium, DEFAULT_CHROMIUM } from "../lib/report/chromium.ts";
import { renderReport } from "../lib/report/mod.ts";

async function htmlFileOf(target: string): Promise<string> {
  if (!(await Deno.stat(target)).isDirectory) return resolve(target);
  const file = join(await Deno.makeTempDir({ prefix: "report-" }), "report.html");
  await Deno.writeTextFile(file, await renderReport(target));
  return file;
}

if (import.meta.main) {
  const args = parseArgs(Deno.args, { string: ["width"] });
  const [target, out] = args.positionals;
  if (!target || !out) {
    console.error("usage: deno run -A scripts/screenshot.ts RUN_OR_HTML OUT.png [--width 1280]");
    Deno.exit(2);
  }
  const browser = await Chromium.launch(Deno.env.get("CHROMIUM") ?? DEFAULT_CHROMIUM);
  try {
    const page = await browser.open(
      pathToFileURL(await htmlFileOf(target)).href,
      Number(args.values.width ?? 1280),
    );
    if (page.errors.length) throw new Error(`the page logged errors:\n${page.errors.join("\n")}`);
    await Deno.writeFile(out, await page.screenshot());
    console.log(`screenshot: wrote ${out}`);
  } finally {
    await browser.close();
  }
}
