/**
 * safetensors: header-only reads, tensor reads, a streaming atomic writer, sharded checkpoints.
 *
 * @module
 */

export * from "./dtypes.ts";
export * from "./header.ts";
export * from "./read.ts";
export * from "./write.ts";
export * from "./sharded.ts";
export { writeFileAtomic, writeTextAtomic } from "../fs/atomic.ts";
