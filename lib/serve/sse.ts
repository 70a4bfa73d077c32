/**
 * Server-sent events as OpenAI and vLLM frame a streamed answer: one `data: <JSON>\n\n` event per
 * chunk, then `data: [DONE]\n\n`. A failure after the answer has started (its status is already sent)
 * becomes an event holding the error body, then `[DONE]`. A client that disconnects cancels the stream,
 * which aborts the signal the producer samples with.
 *
 * @module
 */

import { isAbortError } from "../engine/abort.ts";
import { errorBody, HttpError } from "./limits.ts";

type Json = Record<string, unknown>;

/** A 200 streaming `produce`'s chunks; `signal` fires when the client hangs up. */
export function sseResponse(
  signal: AbortSignal,
  produce: (send: (chunk: Json) => void, signal: AbortSignal) => Promise<void>,
): Response {
  const cancelled = new AbortController();
  const both = AbortSignal.any([signal, cancelled.signal]);
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const write = (text: string) => {
        if (!both.aborted) controller.enqueue(encoder.encode(text));
      };
      try {
        await produce((chunk) => write(`data: ${JSON.stringify(chunk)}\n\n`), both);
      } catch (error) {
        if (!isAbortError(error)) write(`data: ${JSON.stringify(errorBody(asHttpError(error)))}\n\n`);
      }
      write("data: [DONE]\n\n");
      if (!both.aborted) controller.close();
    },
    cancel() {
      cancelled.abort();
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
  });
}

function asHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof RangeError) return new HttpError(400, error.message);
  console.error("serve: a streamed answer failed:", error);
  return new HttpError(500, `internal error: ${(error as Error)?.message ?? error}`, "InternalServerError");
}
