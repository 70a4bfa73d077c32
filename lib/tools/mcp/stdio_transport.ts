/**
 * The MCP SDK's `Transport` over a `ServerProcess`: one JSON-RPC message per line each way, as MCP's
 * stdio transport frames them. Ours rather than the SDK's `StdioClientTransport` because the process
 * is started our way: a clean environment, inside bubblewrap or its own process group, killed whole.
 *
 * A stdout line that is not a JSON-RPC message (a server logging to stdout) is reported through
 * `onerror` and skipped; the connection closes (`onclose`) when the process's stdout ends, or when a
 * message cannot be written because its stdin is gone (a server that died between two calls: the write
 * can fail before its stdout's end or its exit has been seen, and must count as the same loss).
 *
 * @module
 */

import type { ServerProcess } from "./process.ts";
import type { JSONRPCMessage, StdioCodec, Transport } from "./sdk.ts";

/** How long a server may take to exit after its stdin closes before it is killed. */
export const STOP_GRACE_MS = 200;

export class ProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly process: ServerProcess;
  readonly #codec: StdioCodec;
  #closed = false;

  constructor(process: ServerProcess, codec: StdioCodec) {
    this.process = process;
    this.#codec = codec;
  }

  start(): Promise<void> {
    void this.process.readLines((line) => this.#receive(line)).then(() => this.#finish());
    return Promise.resolve();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) throw new Error("the server's connection is closed");
    try {
      await this.process.write(this.#codec.serializeMessage(message));
    } catch (error) {
      this.#finish();
      throw error;
    }
  }

  async close(): Promise<void> {
    await this.process.stop(STOP_GRACE_MS);
    this.#finish();
  }

  #receive(line: string): void {
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = this.#codec.deserializeMessage(line);
    } catch (error) {
      this.onerror?.(new Error(`not a JSON-RPC message on stdout: ${line.slice(0, 200)}`, { cause: error }));
      return;
    }
    this.onmessage?.(message);
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.onclose?.();
  }
}
