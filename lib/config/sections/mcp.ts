/**
 * `rollout.tools.mcp`: the MCP servers whose tools the model is offered (docs/mcp.md). Each entry is a
 * stdio server we start (`command`, `args`, `env`, inside bubblewrap or as you) or a streamable-HTTP
 * server already running (`url`). The checks that need more than one key of an entry run in
 * `checkMcpServers`, with the other cross-field rules, before anything starts.
 *
 * @module
 */

import { UserError } from "../../errors.ts";
import { bool, choice, float, int, listOf, mapOf, type RecordOf, records, str } from "../fields.ts";

export const MCP_SANDBOXES = ["bwrap", "none"] as const;

/** A server's name: it appears in messages and, through `name_prefix`, nowhere else. */
export const MCP_SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const fields = {
  name: str({ default: "", doc: "the server's name in messages (letters, digits, _ or -), unique" }),
  command: str({
    default: null,
    nullable: true,
    doc: "stdio server: the program to start (found on PATH), e.g. node",
  }),
  args: listOf<string>({
    item: { kind: "string", allowEmpty: true },
    default: [],
    doc: "stdio server: its arguments; relative paths resolve against the working directory",
  }),
  env: mapOf<string>({
    value: { kind: "string", allowEmpty: true },
    default: {},
    doc: "stdio server: environment variables it gets (beside PATH, HOME and LANG; nothing else is passed)",
  }),
  url: str({
    default: null,
    nullable: true,
    doc: "streamable-HTTP server already running: its URL, e.g. http://127.0.0.1:3001/mcp",
  }),
  headers: mapOf<string>({
    value: { kind: "string", allowEmpty: true },
    default: {},
    doc: "HTTP server: headers sent with every request (kept in the run's config snapshot)",
  }),
  sandbox: choice({
    choices: MCP_SANDBOXES,
    default: "bwrap",
    doc: "stdio server: bwrap (bubblewrap: no network, only the declared paths) | none (runs as you)",
  }),
  read_only: listOf<string>({
    item: { kind: "string" },
    default: [],
    doc: "bwrap: host paths the server may read (its package files, data), at the same path inside",
  }),
  read_write: listOf<string>({
    item: { kind: "string" },
    default: [],
    doc: "bwrap: host paths the server may write, at the same path inside",
  }),
  memory_mb: int({
    default: 2048,
    min: 64,
    max: 1048576,
    doc: "stdio server: its data-segment limit in MiB (RLIMIT_DATA; Node needs ~100, Deno ~600 more)",
  }),
  per_episode: bool({
    default: false,
    doc: "start one server per episode (stateful servers) instead of one shared by all episodes",
  }),
  name_prefix: str({
    default: "",
    allowEmpty: true,
    doc: "put before each of its tool names, to tell servers apart or avoid a taken name",
  }),
  tools: listOf<string>({
    item: { kind: "string" },
    default: [],
    unique: true,
    doc: "offer only these of its tools (their names on the server); empty = all",
  }),
  startup_timeout_s: float({
    default: 30,
    min: 0,
    minOpen: true,
    max: 600,
    doc: "seconds the server may take to start and list its tools",
  }),
};

export const mcp = records({
  fields,
  required: ["name"],
  default: [],
  doc: "MCP servers whose tools are offered beside the built-ins (see docs/mcp.md)",
});

/** One entry of `rollout.tools.mcp`, resolved. */
export type McpServerConfig = RecordOf<typeof fields>;

/** Throws a one-line UserError for the first entry that is not a usable server. */
export function checkMcpServers(servers: readonly McpServerConfig[]): void {
  const seen = new Set<string>();
  servers.forEach((server, i) => {
    const key = (name: string) => `config key rollout.tools.mcp[${i}].${name}`;
    if (!MCP_SERVER_NAME.test(server.name)) {
      throw new UserError(key("name"), {
        value: server.name,
        why: "a server name is 1 to 64 letters, digits, _ or -",
        fix: "rename the server, e.g. name: files",
      });
    }
    if (seen.has(server.name)) {
      throw new UserError(key("name"), {
        value: server.name,
        why: "another server in rollout.tools.mcp has this name",
        fix: "give every server its own name",
      });
    }
    seen.add(server.name);
    checkTransport(server, key);
  });
}

/** Exactly one of command and url; the keys of the other kind left at their defaults. */
function checkTransport(server: McpServerConfig, key: (name: string) => string): void {
  if ((server.command === null) === (server.url === null)) {
    throw new UserError(key(server.command === null ? "command" : "url"), {
      why: `server ${server.name} needs exactly one of command (a stdio server we start) and url ` +
        "(a streamable-HTTP server already running)",
      fix: "set command (with args) or url, not both",
    });
  }
  if (server.url !== null) {
    if (!isHttpUrl(server.url)) {
      throw new UserError(key("url"), {
        value: server.url,
        why: "not an http:// or https:// URL",
        fix: "give the server's streamable-HTTP endpoint, e.g. http://127.0.0.1:3001/mcp",
      });
    }
    const stdioOnly = (["args", "read_only", "read_write"] as const).find((k) => server[k].length > 0) ??
      (Object.keys(server.env).length > 0 ? "env" : undefined);
    if (stdioOnly !== undefined) {
      throw new UserError(key(stdioOnly), {
        why: `server ${server.name} is an HTTP server (url), and ${stdioOnly} applies only to a stdio ` +
          "server started here",
        fix: `remove ${stdioOnly} from it`,
      });
    }
  } else if (Object.keys(server.headers).length > 0) {
    throw new UserError(key("headers"), {
      why: `server ${server.name} is a stdio server (command); headers apply only to an HTTP server (url)`,
      fix: "remove headers from it",
    });
  } else if (server.sandbox === "none" && server.read_only.length + server.read_write.length > 0) {
    throw new UserError(key(server.read_only.length > 0 ? "read_only" : "read_write"), {
      why: `server ${server.name} has sandbox none: it runs as you and reaches every file you can, so ` +
        "declared paths would promise a limit that is not there",
      fix: "remove read_only and read_write, or set sandbox: bwrap",
    });
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}
