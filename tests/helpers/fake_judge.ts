/**
 * A fake OpenAI-compatible judge on loopback for the judge reward's tests: `reply` decides each chat
 * completion's content (or returns a whole Response: an error status), and every request is recorded
 * (body and headers) so a test can count them. `countingProxy` forwards to a real server and counts what
 * passes through.
 *
 * @module
 */

/** One request the fake received. */
export interface SeenRequest {
  path: string;
  // deno-lint-ignore no-explicit-any
  body: any;
  authorization: string | null;
  /** The proxy only: what the server answered. */
  answer?: { status: number; text: string };
}

export interface FakeServer {
  url: string;
  requests: SeenRequest[];
  close(): Promise<void>;
}

/** The user message of a chat request (where the episode text sits). */
// deno-lint-ignore no-explicit-any
export function userText(body: any): string {
  return body.messages.find((m: { role: string }) => m.role === "user").content;
}

/** A chat-completions server whose answers come from `reply`. */
export function fakeJudge(
  // deno-lint-ignore no-explicit-any
  reply: (body: any, seen: SeenRequest) => string | Response,
): FakeServer {
  const requests: SeenRequest[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.json().catch(() => null);
    const seen = { path: new URL(req.url).pathname, body, authorization: req.headers.get("authorization") };
    requests.push(seen);
    const answer = reply(body, seen);
    if (answer instanceof Response) return answer;
    return Response.json({
      id: "chatcmpl-fake",
      object: "chat.completion",
      model: body?.model,
      choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    close: () => server.shutdown(),
  };
}

/** A loopback proxy to `target` that counts the requests passing through. */
export function countingProxy(target: string): FakeServer {
  const requests: SeenRequest[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const text = await req.text();
    const seen: SeenRequest = {
      path: url.pathname,
      body: text,
      authorization: req.headers.get("authorization"),
    };
    requests.push(seen);
    const answer = await fetch(target + url.pathname, {
      method: req.method,
      headers: { "content-type": "application/json" },
      body: req.method === "GET" ? undefined : text,
    });
    seen.answer = { status: answer.status, text: await answer.text() };
    return new Response(seen.answer.text, { status: answer.status, headers: answer.headers });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    close: () => server.shutdown(),
  };
}

/** A loopback URL where nothing listens (a port bound once, then released). */
export function deadUrl(): string {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return `http://127.0.0.1:${port}`;
}
