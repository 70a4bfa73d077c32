/**
 * The building blocks of the configuration schema: one typed `Field` per key, grouped into nested
 * `Section`s. A field carries everything the toolkit knows about a key — type, default, range or
 * choices, and a one-line doc — so that validation (check.ts), the `Config` type (`Infer`) and the
 * `--help` listing (help.ts) all come from the one declaration in schema.ts.
 */

/** Brand that tells a field from a section at run time (a section may not have a key named like it). */
export const FIELD = Symbol("config field");

/** What a value must look like, without its default and doc; also used for list items. */
export type FieldSpec =
  | { readonly kind: "int"; readonly min?: number; readonly max?: number }
  | {
    readonly kind: "float";
    readonly min?: number;
    readonly max?: number;
    /** The bound itself is excluded (`(0, 1]`). */
    readonly minOpen?: boolean;
    readonly maxOpen?: boolean;
  }
  | { readonly kind: "bool" }
  | { readonly kind: "string"; readonly allowEmpty?: boolean }
  | {
    readonly kind: "choice";
    readonly choices: readonly string[];
    /** Values that were once valid, each with the one-line fix that replaces it (refused at load). */
    readonly retired?: Readonly<Record<string, string>>;
  }
  | {
    readonly kind: "list";
    readonly item: FieldSpec;
    readonly minItems?: number;
    readonly maxItems?: number;
    readonly unique?: boolean;
  }
  | {
    /** A mapping from names (a closed set) to float weights, e.g. reward name → weight. */
    readonly kind: "weights";
    readonly names: readonly string[];
    readonly minEntries?: number;
  }
  | {
    /** A mapping from any names to values of one spec (environment variables → strings). */
    readonly kind: "map";
    readonly value: FieldSpec;
  }
  | {
    /**
     * A list of mappings, each with the keys of `fields` (absent keys take their defaults; the keys in
     * `required` must be given), e.g. the MCP servers of `rollout.tools.mcp`.
     */
    readonly kind: "records";
    readonly fields: Readonly<Record<string, Field<unknown>>>;
    readonly required: readonly string[];
  };

/** A configuration key: its spec plus default, doc and whether `null` is allowed. `T` is the value type. */
export type Field<T> = FieldSpec & {
  readonly [FIELD]: true;
  readonly default: T;
  readonly doc: string;
  readonly nullable: boolean;
};

/** A group of keys (`model`, `rollout.tools`, ...). */
export interface Section {
  readonly [key: string]: Field<unknown> | Section;
}

/** The value type a schema describes: `Infer<typeof SCHEMA>` is `Config`. */
export type Infer<S> = S extends Field<infer T> ? T : { -readonly [K in keyof S]: Infer<S[K]> };

/** True for a field, false for a section. */
export function isField(node: Field<unknown> | Section): node is Field<unknown> {
  return (node as Record<symbol, unknown>)[FIELD] === true;
}

/** `null` joins the value type only for fields declared `nullable: true`. */
type Null<N> = N extends true ? null : never;

interface Common<T, N extends boolean> {
  default: T | Null<N>;
  doc: string;
  nullable?: N;
}

function make<T>(spec: FieldSpec, common: { default: unknown; doc: string; nullable?: boolean }): Field<T> {
  return {
    ...spec,
    [FIELD]: true,
    default: common.default as T,
    doc: common.doc,
    nullable: common.nullable ?? false,
  };
}

/** An integer key, optionally bounded (inclusive). */
export function int<N extends boolean = false>(
  o: Common<number, N> & { min?: number; max?: number },
): Field<number | Null<N>> {
  return make({ kind: "int", min: o.min, max: o.max }, o);
}

/** A finite number; bounds are inclusive unless `minOpen` / `maxOpen`. */
export function float<N extends boolean = false>(
  o: Common<number, N> & { min?: number; max?: number; minOpen?: boolean; maxOpen?: boolean },
): Field<number | Null<N>> {
  return make({ kind: "float", min: o.min, max: o.max, minOpen: o.minOpen, maxOpen: o.maxOpen }, o);
}

/** `true` or `false` (YAML's `yes` / `no` are strings in YAML 1.2 and are rejected). */
export function bool(o: Common<boolean, false>): Field<boolean> {
  return make({ kind: "bool" }, o);
}

/** A string; empty strings are rejected unless `allowEmpty`. */
export function str<N extends boolean = false>(
  o: Common<string, N> & { allowEmpty?: boolean },
): Field<string | Null<N>> {
  return make({ kind: "string", allowEmpty: o.allowEmpty }, o);
}

/** One of a closed set of strings; `retired` values are refused with their own fix. */
export function choice<const C extends readonly string[], N extends boolean = false>(
  o: Common<NoInfer<C[number]>, N> & { choices: C; retired?: Readonly<Record<string, string>> },
): Field<C[number] | Null<N>> {
  return make({ kind: "choice", choices: o.choices, retired: o.retired }, o);
}

/** A list of distinct names from a closed set (YAML flow `[q, v]` on the command line). */
export function subset<const C extends readonly string[]>(
  o: Common<NoInfer<C[number]>[], false> & { choices: C; minItems?: number },
): Field<C[number][]> {
  const item: FieldSpec = { kind: "choice", choices: o.choices };
  return make({ kind: "list", item, unique: true, minItems: o.minItems }, o);
}

/** A list whose items follow `item` (an int, float or string spec). */
export function listOf<T>(
  o: Common<T[], false> & { item: FieldSpec; minItems?: number; maxItems?: number; unique?: boolean },
): Field<T[]> {
  return make(
    { kind: "list", item: o.item, minItems: o.minItems, maxItems: o.maxItems, unique: o.unique },
    o,
  );
}

/** A mapping from names in a closed set to float weights. */
export function weights<const C extends readonly string[]>(
  o: Common<Partial<Record<NoInfer<C[number]>, number>>, false> & { names: C; minEntries?: number },
): Field<Partial<Record<C[number], number>>> {
  return make({ kind: "weights", names: o.names, minEntries: o.minEntries }, o);
}

/** A mapping from any names to values of `value` (e.g. environment variables to strings). */
export function mapOf<T>(
  o: Common<Record<string, T>, false> & { value: FieldSpec },
): Field<Record<string, T>> {
  return make({ kind: "map", value: o.value }, o);
}

/** The value of one record of `records`: each key's field type. */
export type RecordOf<F extends Record<string, Field<unknown>>> = {
  -readonly [K in keyof F]: F[K] extends Field<infer T> ? T : never;
};

/** A list of mappings whose keys are `fields` (the `required` ones must be given; others default). */
export function records<const F extends Record<string, Field<unknown>>>(
  o: Common<RecordOf<F>[], false> & { fields: F; required: readonly (keyof F & string)[] },
): Field<RecordOf<F>[]> {
  return make({ kind: "records", fields: o.fields, required: o.required }, o);
}
