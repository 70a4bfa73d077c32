/**
 * Reading files that may be absent.
 *
 * @module
 */

/** The text of `path`, or null when there is no such file (other errors propagate). */
export async function readTextIfExists(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
