/**
 * Schema of the inference-server keys: `model.backend` and `model.server` (where rollouts are sampled:
 * on this machine or on vLLM / SGLang servers, docs/serving.md) and the `serve` section of
 * `deno task serve` (our engine behind the same HTTP API). See schema.ts.
 */
import { choice, float, int, listOf, str } from "../fields.ts";

export const BACKENDS = ["local", "vllm", "sglang"] as const;

/** Keys added to the `model` section. */
export const modelBackend = {
  backend: choice({
    choices: BACKENDS,
    default: "local",
    doc: "where rollouts are sampled: local (this machine) | vllm | sglang (model.server.urls)",
  }),
  server: {
    urls: listOf<string>({
      item: { kind: "string" },
      default: [],
      unique: true,
      doc: "base URLs of the inference servers (http://host:port); each episode sticks to one",
    }),
    model_name: str({
      default: null,
      nullable: true,
      doc: "name the servers give the base model; null = the first model /v1/models lists",
    }),
    api_key: str({
      default: null,
      nullable: true,
      doc: "Bearer key sent to the servers; null = none",
    }),
    request_timeout_s: float({
      default: 600,
      min: 0,
      minOpen: true,
      doc: "longest wait for one HTTP request (one turn) before it is retried",
    }),
    retries: int({
      default: 3,
      min: 0,
      max: 100,
      doc: "retries of a request that failed on the network, timed out, or got 429 / 5xx",
    }),
    backoff_s: float({
      default: 0.5,
      min: 0,
      doc: "wait before the first retry; doubled at each further retry",
    }),
    health_timeout_s: float({
      default: 60,
      min: 0,
      doc: "how long to wait at start for every server's /health to answer 200",
    }),
    adapter_name: str({
      default: "policy",
      doc: "adapters load on the servers as <adapter_name>@<hash of the adapter>",
    }),
    adapter_dir: str({
      default: null,
      nullable: true,
      doc: "directory the servers can read (shared storage) to copy adapters into; null = send our path",
    }),
  },
};

/** The `serve` section (`deno task serve`). */
export const serve = {
  host: str({
    default: "127.0.0.1",
    doc: "address to bind; anything but loopback requires an API key",
  }),
  port: int({ default: 8000, min: 0, max: 65535, doc: "TCP port; 0 = any free port" }),
  api_key: str({
    default: null,
    nullable: true,
    doc: "Bearer key every request but /health must carry; null = none (loopback only)",
  }),
  adapter_root: str({
    default: "runs",
    doc: "adapters load only from directories below this one",
  }),
  model_name: str({
    default: null,
    nullable: true,
    doc: "name of the base model in /v1/models and requests; null = the model directory's name",
  }),
  max_model_len: int({
    default: 2048,
    min: 2,
    max: 131072,
    doc: "most tokens of one request (prompt + completion); every slot's KV cache holds this many",
  }),
  max_sequences: int({
    default: 8,
    min: 1,
    max: 4096,
    doc: "requests decoded together (continuous-batching slots); more wait for a free slot",
  }),
  max_body_bytes: int({
    default: 4_194_304,
    min: 1024,
    doc: "largest request body; a larger one gets 413",
  }),
};
