/**
 * The one sha256 helper: file manifests, tokenizer and chat-template hashes, adapter ids, config hashes.
 *
 * @module
 */

/** Hex sha256 of `bytes`. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}
