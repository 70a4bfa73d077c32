/**
 * A file's path comes from its URL through `fileURLToPath`, never the URL's `pathname`, which keeps the
 * URL's percent-encoding: in a checkout under a directory with a space or a non-ASCII letter, the demo's
 * config URL's pathname is `…/my%20dir/configs/demo.yaml`, a file that does not exist (`deno task demo`
 * failed there at its first step).
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

Deno.test("no module takes a file path from import.meta.url's pathname (percent-encoded)", async () => {
  const listed = await new Deno.Command("git", { args: ["ls-files", "*.ts"], cwd: ROOT }).output();
  assert.ok(listed.success, "git ls-files ran");
  const files = new TextDecoder().decode(listed.stdout).split("\n").filter(Boolean);
  const offenders: string[] = [];
  for (const file of files) {
    const text = await Deno.readTextFile(`${ROOT}/${file}`);
    if (/import\.meta\.url\)\.pathname/.test(text)) offenders.push(file);
  }
  assert.deepEqual(offenders, [], "use fileURLToPath(new URL(…, import.meta.url))");
  // Why: the pathname keeps the encoding, fileURLToPath decodes it.
  const url = new URL("file:///tmp/my%20dir/x.yaml");
  assert.equal(url.pathname, "/tmp/my%20dir/x.yaml");
  assert.equal(fileURLToPath(url), "/tmp/my dir/x.yaml");
});
