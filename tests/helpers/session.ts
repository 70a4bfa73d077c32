/**
 * A Session over the default configuration with some sections replaced, for tests of the stage
 * functions: nothing opens until a stage asks for it, so score and mask tests load no model.
 */
import { type Config, defaultConfig } from "../../lib/config/mod.ts";
import { openSession, type Session } from "../../lib/pipeline/mod.ts";

export function testSession(sections: Partial<Config> = {}, configHash = "test"): Session {
  return openSession({ ...defaultConfig(), ...sections }, configHash, { showProgress: false });
}
