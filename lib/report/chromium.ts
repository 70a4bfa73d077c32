/**
 * Headless Chromium over the DevTools protocol, with Deno's own WebSocket (no npm dependency): open
 * a page, collect its console errors, uncaught exceptions and browser-log errors (CSP violations,
 * failed loads), evaluate expressions, take a full-page screenshot. Used by the report's browser test
 * and `scripts/screenshot.ts`.
 *
 * Chromium runs with a fresh profile in a temporary folder, no sandbox (containers lack the user
 * namespaces it needs), no GPU and no background networking, and is killed on `close()`.
 *
 * @module
 */

import { UserError } from "../errors.ts";

/** Where Debian's `chromium` package installs the browser. */
export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--no-default-browser-check",
  "--remote-debugging-port=0",
];

type Message = { id?: number; method?: string; params?: Record<string, unknown>; sessionId?: string };
type Reply = { result?: Record<string, unknown>; error?: { message: string } };

/** A running headless Chromium. */
export class Chromium {
  #next = 1;
  #pending = new Map<number, (reply: Reply) => void>();
  #listeners: Array<(m: Message) => void> = [];

  private constructor(
    readonly process: Deno.ChildProcess,
    readonly socket: WebSocket,
    readonly profile: string,
  ) {
    socket.onmessage = (event) => {
      const m = JSON.parse(String(event.data)) as Message & Reply;
      if (m.id !== undefined) {
        this.#pending.get(m.id)?.(m);
        this.#pending.delete(m.id);
      } else this.#listeners.forEach((l) => l(m));
    };
  }

  /** Starts Chromium and connects to it; a UserError when the executable is missing. */
  static async launch(executable = DEFAULT_CHROMIUM, timeoutMs = 30_000): Promise<Chromium> {
    const profile = await Deno.makeTempDir({ prefix: "chromium-profile-" });
    let process: Deno.ChildProcess;
    try {
      process = new Deno.Command(executable, {
        args: [...FLAGS, `--user-data-dir=${profile}`, "about:blank"],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
    } catch (e) {
      await Deno.remove(profile, { recursive: true }).catch(() => {});
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      throw new UserError(`chromium ${executable}`, {
        why: "it is not installed",
        fix: "install Debian's chromium package (apt-get install chromium) or pass its path",
      });
    }
    const url = await devtoolsUrl(process, timeoutMs);
    const socket = new WebSocket(url);
    await new Promise((ok, fail) => {
      socket.onopen = ok;
      socket.onerror = () => fail(new Error(`cannot connect to Chromium's DevTools at ${url}`));
    });
    return new Chromium(process, socket, profile);
  }

  /** Sends one DevTools command (to a page when `sessionId` is given) and returns its result. */
  send(
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
  ): Promise<Record<string, unknown>> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, (reply) => {
        if (reply.error) reject(new Error(`${method}: ${reply.error.message}`));
        else resolve(reply.result ?? {});
      });
      this.socket.send(JSON.stringify({ id, method, params, sessionId }));
    });
  }

  /** Opens `url` in a new tab of `width` × `height` pixels and waits for its load event. */
  async open(url: string, width = 1280, height = 900): Promise<Page> {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this, String(sessionId));
    this.#listeners.push((m) => m.sessionId === sessionId && page.observe(m));
    for (const domain of ["Runtime", "Log", "Page"]) await this.send(`${domain}.enable`, {}, page.sessionId);
    await this.send("Emulation.setDeviceMetricsOverride", {
      width,
      height,
      deviceScaleFactor: 1,
      mobile: false,
    }, page.sessionId);
    const loaded = page.waitFor("Page.loadEventFired");
    await this.send("Page.navigate", { url }, page.sessionId);
    await loaded;
    return page;
  }

  /** Closes the browser and removes its profile. */
  async close(): Promise<void> {
    try {
      this.socket.close();
      this.process.kill("SIGKILL");
    } catch {
      // already gone
    }
    await this.process.status;
    await Deno.remove(this.profile, { recursive: true }).catch(() => {});
  }
}

/** One open tab. */
export class Page {
  /** Console errors, uncaught exceptions and browser-log errors, in order. */
  readonly errors: string[] = [];
  #waiters: Array<{ method: string; done: () => void }> = [];

  constructor(readonly browser: Chromium, readonly sessionId: string) {}

  /** Records errors and wakes waiters (called for every event of this tab). */
  observe(m: Message): void {
    const p = m.params ?? {};
    if (m.method === "Runtime.consoleAPICalled" && (p.type === "error" || p.type === "assert")) {
      const args = (p.args as Array<{ value?: unknown; description?: string }>) ?? [];
      this.errors.push(`console.${p.type}: ${args.map((a) => a.value ?? a.description).join(" ")}`);
    }
    if (m.method === "Runtime.exceptionThrown") {
      const d = p.exceptionDetails as { text?: string; exception?: { description?: string } };
      this.errors.push(`exception: ${d.exception?.description ?? d.text}`);
    }
    if (m.method === "Log.entryAdded") {
      const entry = p.entry as { level: string; text: string; url?: string };
      if (entry.level === "error") {
        this.errors.push(`log: ${entry.text}${entry.url ? ` (${entry.url})` : ""}`);
      }
    }
    this.#waiters = this.#waiters.filter((w) => (w.method === m.method ? (w.done(), false) : true));
  }

  /** Resolves at the next event named `method`. */
  waitFor(method: string): Promise<void> {
    return new Promise((done) => this.#waiters.push({ method, done }));
  }

  /** The value of a JavaScript expression evaluated in the page (JSON-serializable results). */
  async evaluate<T>(expression: string): Promise<T> {
    const out = await this.browser.send(
      "Runtime.evaluate",
      { expression, returnByValue: true },
      this.sessionId,
    );
    const details = out.exceptionDetails as { text?: string } | undefined;
    if (details) throw new Error(`evaluating ${expression}: ${details.text}`);
    return (out.result as { value: T }).value;
  }

  /** A PNG of the whole page (not only the viewport). */
  async screenshot(): Promise<Uint8Array> {
    const out = await this.browser.send("Page.captureScreenshot", {
      format: "png",
      captureBeyondViewport: true,
    }, this.sessionId);
    return Uint8Array.from(atob(String(out.data)), (c) => c.charCodeAt(0));
  }
}

/** Reads Chromium's stderr until it prints the browser's DevTools WebSocket address. */
async function devtoolsUrl(process: Deno.ChildProcess, timeoutMs: number): Promise<string> {
  const reader = process.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  const timer = setTimeout(() => process.kill("SIGKILL"), timeoutMs);
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(seen);
      if (m) {
        drain(reader);
        return m[1];
      }
    }
  } finally {
    clearTimeout(timer);
  }
  throw new Error(`chromium exited before opening DevTools; its output:\n${seen.slice(-2000)}`);
}

/** Keeps reading Chromium's stderr so it never blocks on a full pipe. */
function drain(reader: ReadableStreamDefaultReader<string>): void {
  (async () => {
    while (!(await reader.read()).done) { /* discard */ }
  })().catch(() => {});
}
