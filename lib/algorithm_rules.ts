/**
 * What an algorithm record's config rules see: the few keys that decide an algorithm, as a structural view
 * of the resolved configuration. The records (lib/losses/, lib/advantages/) declare their rules against it
 * without importing lib/config/, which reads the records (a folder may not import the one that imports
 * it); `lib/config/cross.ts` runs them with the whole configuration.
 *
 * @module
 */

/** The keys an algorithm's rules may read. */
export interface AlgorithmConfigView {
  rollout: { group_size: number };
  mask: { estimator: string };
  train: {
    num_iterations: number;
    ppo_epochs: number;
    /** `train.loss`: the objective, the aggregation and every loss scalar by its key. */
    loss: { objective: string; aggregation: string } & Readonly<Record<string, unknown>>;
  };
}

/** A rule across keys: throws a one-line `UserError` (lib/errors.ts) naming the key to change. */
export type ConfigRule = (config: AlgorithmConfigView) => void;
