/**
 * What `deno task serve` refuses before any work, each with a 4xx and a message, the server staying up:
 * a missing or wrong API key (401), a body over the size limit (413, counted while reading, so a
 * client that lies in Content-Length or sends none is cut off too), malformed JSON or a body that is
 * not an object (400), token ids outside the vocabulary (400), and adapter paths outside the adapter
 * root (404, the same whether the path exists or not). Errors use vLLM's body shape,
 * `{"error": {"message", "type", "code"}}`.
 *
 * @module
 */

import { basename, dirname, join, resolve, sep } from "node:path";

/** An answer with a 4xx / 5xx status and a message. */
export class HttpError extends Error {
  readonly status: number;
  readonly type: string;
  /** The request parameter at fault, when one is. */
  readonly param: string | null;

  constructor(status: number, message: string, type = "BadRequestError", param: string | null = null) {
    super(message);
    this.status = status;
    this.type = type;
    this.param = param;
  }
}

/** The error body in vLLM's shape (also sent as a stream's last event). */
export function errorBody(error: HttpError): Record<string, unknown> {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.status } };
}

/** The error as a response in vLLM's shape. */
export function errorResponse(error: HttpError): Response {
  return Response.json(errorBody(error), { status: error.status });
}

/** Addresses that only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Throws 401 unless `request` carries `Authorization: Bearer <apiKey>` (no key configured: open). */
export function checkApiKey(request: Request, apiKey: string | null): void {
  if (!apiKey) return;
  const header = request.headers.get("authorization") ?? "";
  const given = header.startsWith("Bearer ") ? header.slice(7) : "";
  if (!constantTimeEqual(given, apiKey)) {
    throw new HttpError(
      401,
      "missing or wrong API key: send the header Authorization: Bearer <key>",
      "AuthenticationError",
    );
  }
}

function constantTimeEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** Reads a JSON object body of at most `maxBytes`; 413 above it, 400 for bad JSON or a non-object. */
export async function readJsonBody(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const tooLarge = () =>
    new HttpError(413, `request body is larger than ${maxBytes} bytes (serve.max_body_bytes)`);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > maxBytes) {
    await request.body?.cancel();
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body) {
    for await (const chunk of request.body) {
      size += chunk.byteLength;
      if (size > maxBytes) throw tooLarge(); // leaving the loop cancels the stream
      chunks.push(chunk);
    }
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw new HttpError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new HttpError(400, "request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/** Checks that `ids` is a non-empty list of token ids inside the vocabulary. */
export function checkTokenIds(ids: unknown, vocab: number, field: string): number[] {
  if (!Array.isArray(ids) || ids.length === 0) {
    throw new HttpError(400, `${field} must be a non-empty list of token ids`);
  }
  for (const [i, t] of ids.entries()) {
    if (!Number.isInteger(t) || t < 0 || t >= vocab) {
      throw new HttpError(
        400,
        `${field}[${i}] = ${JSON.stringify(t)} is not a token id of this model (0..${vocab - 1})`,
      );
    }
  }
  return ids as number[];
}

/**
 * The real path of `path` when it lies strictly below `root` (symbolic links resolved, relative paths
 * taken from `root`). Every path outside gets the same 404, whether it exists or not, so that clients
 * cannot probe which paths exist on the host; a path below the root that does not exist gets 400 (the
 * root is the server's own).
 */
export async function pathBelow(path: unknown, root: string, field: string): Promise<string> {
  if (typeof path !== "string" || path.length === 0 || path.length > 4096 || path.includes("\0")) {
    throw new HttpError(400, `${field} must be a directory path`);
  }
  let realRoot: string;
  try {
    realRoot = await Deno.realPath(root);
  } catch { // the default root, not made yet (serve.ts checkAdapterRoot): nothing is below it
    throw new HttpError(
      404,
      `${field} ${JSON.stringify(path)} is not below serve.adapter_root: ${root} does not exist yet`,
      "NotFoundError",
    );
  }
  const { real, exists } = await realPathOfAny(resolve(realRoot, path));
  if (!real.startsWith(realRoot + sep)) {
    throw new HttpError(
      404,
      `${field} ${JSON.stringify(path)} is not below serve.adapter_root`,
      "NotFoundError",
    );
  }
  if (!exists) {
    throw new HttpError(400, `${field} ${JSON.stringify(path)} does not exist below serve.adapter_root`);
  }
  return real;
}

/**
 * Where `path` (absolute, normalized) lies once symbolic links are resolved, whether or not it exists:
 * the real path of its deepest existing ancestor with the rest appended; a dangling link is followed
 * to where it points (at most 40 links, as the kernel does). Deciding "outside the root" on this, never
 * on existence, makes the answer the same for existing and missing paths.
 */
async function realPathOfAny(path: string, hops = 40): Promise<{ real: string; exists: boolean }> {
  const rest: string[] = [];
  for (let at = path;; at = dirname(at)) {
    try {
      return { real: join(await Deno.realPath(at), ...rest), exists: rest.length === 0 };
    } catch {
      const target = await linkTarget(at);
      if (target !== null && hops > 0) {
        const beyond = await realPathOfAny(resolve(dirname(at), target), hops - 1);
        return { real: join(beyond.real, ...rest), exists: false };
      }
      if (dirname(at) === at) return { real: path, exists: false }; // not even the filesystem root
      rest.unshift(basename(at));
    }
  }
}

/** The target of the symbolic link at `path`, or null when it is not one. */
async function linkTarget(path: string): Promise<string | null> {
  try {
    return (await Deno.lstat(path)).isSymlink ? await Deno.readLink(path) : null;
  } catch {
    return null;
  }
}
