/**
 * Cancelled work: a sequence opened with an `AbortSignal` (`SequenceOptions.signal`) whose signal fires
 * ends its turn in progress, or its wait for a slot, with the `AbortError` made here. `deno task serve`
 * passes the request's signal, so a client that hangs up stops costing decode steps.
 *
 * @module
 */

/** The error a cancelled turn or wait rejects with (a DOMException named AbortError, as `fetch` uses). */
export function abortError(what: string): DOMException {
  return new DOMException(`${what} was cancelled`, "AbortError");
}

/** Whether `error` is a cancellation (ours, or an aborted `fetch`). */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}
