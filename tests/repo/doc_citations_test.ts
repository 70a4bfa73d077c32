/**
 * Every file a doc names (`lib/…`, `tests/…`, `stages/…`, …) exists, and every test a doc cites as
 * `tests/x_test.ts` ("name", "name…") is a test of that file: a name is matched from its start, up to
 * a "…" where the doc shortens it, against the file's `Deno.test` and `t.step` names (a `${…}` in a
 * template name stands for any text). Docs are README.md and docs/*.md.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DOCS = [
  "README.md",
  ...[...Deno.readDirSync(join(ROOT, "docs"))].filter((e) => e.name.endsWith(".md")).map((e) =>
    `docs/${e.name}`
  ),
];
const CITED_FILE =
  /`((?:lib|tests|stages|scripts|bench|examples|configs|data|docs|notebooks)\/[\w./-]+\.\w+)`/g;
const squash = (text: string) => text.replace(/\s+/g, " ").trim();

/** The text inside the parentheses that open right after `at` (nested ones kept), or "". */
function parenthesesAfter(text: string, at: number): string {
  const open = /^\s*\(/.exec(text.slice(at));
  if (!open) return "";
  let depth = 0;
  for (let i = at + open[0].length - 1; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0) return text.slice(at + open[0].length, i);
  }
  return "";
}

/**
 * The test names of a test file's source, as written (a template keeps its `${…}`): `Deno.test`, `t.step`
 * and the helpers that wrap `Deno.test` (`webgpuTest`, tests/helpers/webgpu.ts).
 */
function testNames(source: string): string[] {
  const found = source.matchAll(
    /(?:Deno\.test|\.step|webgpuTest)\(\s*(?:\{[^}]*?name:\s*)?(["`])((?:\\.|(?!\1)[\s\S])*?)\1/g,
  );
  return [...found].map((m) => squash(m[2]));
}

/**
 * Whether `cited` is the start of a name: for a template name, of the name with any text for each
 * `${…}` (a doc shortens a name anywhere, so every cut of the template is tried, except a cut right after
 * a leading `${…}`: that would match any citation at all).
 */
function startsName(cited: string, name: string): boolean {
  const parts = name.split(/(\$\{[^}]*\})/);
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  let before = "";
  let literal = false; // some literal text of the name is in `before`
  for (const part of parts) {
    if (part.startsWith("${")) {
      before += ".+?";
      if (literal && new RegExp(`^${before}$`).test(cited)) return true;
      continue;
    }
    literal ||= part.length > 0;
    for (let i = 1; i <= part.length; i++) {
      if (new RegExp(`^${before}${escape(part.slice(0, i))}$`).test(cited)) return true;
    }
    before += escape(part);
  }
  return false;
}

Deno.test("every file and test name a doc cites exists", async () => {
  const missing: string[] = [];
  for (const doc of DOCS) {
    const text = await Deno.readTextFile(join(ROOT, doc));
    for (const m of text.matchAll(CITED_FILE)) {
      if (!(await Deno.stat(join(ROOT, m[1])).then(() => true, () => false))) {
        missing.push(`${doc}: no file ${m[1]}`);
      }
    }
    for (const m of text.matchAll(/`(tests\/[\w/]+_test\.ts)`/g)) {
      const source = await Deno.readTextFile(join(ROOT, m[1])).catch(() => null);
      if (source === null) continue; // reported above
      const names = testNames(source);
      const plain = squash(source);
      for (const q of parenthesesAfter(text, m.index! + m[0].length).matchAll(/"([^"]+)"/g)) {
        const cited = squash(q[1].replaceAll("`", "")).split(/\s*(?:…|\.\.\.)\s*/)[0];
        // A name in a table of cases is in the source as text; any other is a test's own name.
        if (cited.length >= 8 && !plain.includes(cited) && !names.some((n) => startsName(cited, n))) {
          missing.push(`${doc}: ${m[1]} has no test named "${cited}…"`);
        }
      }
    }
  }
  assert.deepEqual(missing, []);
});
