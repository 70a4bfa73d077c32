/**
 * The two Python programs of the code_exec harness, and how the host reads the tests' verdict.
 *
 * Model code and the verdict never share a process. Each program runs in its own bubblewrap jail
 * (own pid, user, network, IPC and mount namespaces, own tmpfs), and the host relays lines between
 * them (lib/score/code_exec.ts):
 *
 * - `SERVER_PY`, the solution's process, is a function server. It moves the host's pipes off fds 0
 *   and 1 (the solution's prints go to stderr), runs `solution.py`, then answers each request line:
 *   `{"op": "names"}` with what the tests' names are in the solution (function, standard module, or
 *   plain value), `{"op": "call"}` with the function's return value as plain data (code_codec.ts),
 *   its exception (class name and message), or `unsupported` for any other return value. It holds no
 *   expected value and no verdict; nothing it does is trusted.
 * - `TESTER_PY`, the tests' process, compiles setup code and test lines, asks the server which of
 *   the names the tests use the solution defines (builtin names are never asked: a solution cannot
 *   shadow `len` or `set`), binds each function to a `SolutionFunction` proxy, each standard module
 *   of the same name (`math`, `re`) to its own import and each plain value to its decoded copy,
 *   then runs setup and tests (so the setup redefines any helper the solution defined). A proxy
 *   call sends the arguments and returns the decoded reply or raises the solution's exception: the
 *   builtin class of that name (so a test's `except ValueError` works), else `SolutionException`;
 *   StopIteration is never re-raised as itself (it would end an `all(map(f, xs))` early as true).
 *   A reply that is not a plain value raises `SolutionBrokeProtocol` (a BaseException) and is
 *   recorded, so even a test that catches everything ends `solution_error`. Its verdict line is
 *   the last thing it writes: `passed`, `failed` (AssertionError), `test_error` (another
 *   exception) or `solution_error`.
 *
 * The host takes the verdict from the tests' process only. Whatever the solution's process writes
 * (a fake verdict, a forged reply, no reply, an early exit) is at most a wrong reply, and an
 * exit or a timeout ends the scoring with a 0.
 *
 * @module
 */

import { CODEC_PY } from "./code_codec.ts";

/** What the tests' process can conclude. */
export const VERDICTS = ["passed", "failed", "test_error", "solution_error"] as const;
export type Verdict = typeof VERDICTS[number];

/** The file names the two programs read (bound read-only beside them). */
export const SOLUTION_FILE = "solution.py";
export const TESTS_FILE = "tests.json";

/** The verdict a line of the tests' process holds, or undefined when it is a request to relay. */
export function verdictOf(line: Uint8Array): Verdict | undefined {
  let message: unknown;
  try {
    message = JSON.parse(new TextDecoder().decode(line));
  } catch {
    return undefined;
  }
  const verdict = (message as { verdict?: unknown } | null)?.verdict;
  return VERDICTS.find((v) => v === verdict);
}

/** The solution's process: runs solution.py, then answers name and call requests. */
export const SERVER_PY = CODEC_PY + String.raw`
import builtins as _builtins, sys as _sys, types as _types


def _open_channel():
    """Moves the host's pipes off fds 0 and 1: the solution's print() goes to stderr and input()
    reads /dev/null, so nothing it writes by accident is read as a reply."""
    requests = _os.fdopen(_os.dup(0), "rb")
    replies = _os.dup(1)
    null = _os.open(_os.devnull, _os.O_RDONLY)
    _os.dup2(null, 0)
    _os.close(null)
    _os.dup2(2, 1)
    return requests, replies


def _describe(e):
    try:
        return [str(type(e).__name__), str(e)[:1000]]
    except BaseException:
        return ["Exception", ""]


def _load():
    ns = {"__name__": "__main__", "__builtins__": _builtins}
    try:
        with open("solution.py", encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, "<solution>", "exec"), ns)
    except BaseException as e:
        return ns, _describe(e)
    return ns, None


def _names(ns, wanted):
    found = {}
    for name in wanted:
        if name not in ns:
            continue
        v = ns[name]
        if isinstance(v, _types.ModuleType):
            found[name] = {"module": v.__name__}
        elif callable(v):
            found[name] = {"function": True}
        else:
            try:
                found[name] = {"value": _enc(v)}
            except BaseException:
                pass
    return found


def _call(ns, req):
    def deref(name):
        if not callable(ns.get(name)):
            raise Unsupported("no function " + name)
        return ns[name]

    try:
        fn = ns[req["name"]]
        args = [_dec(a, 0, deref) for a in req["args"]]
        kwargs = {k: _dec(a, 0, deref) for k, a in req["kwargs"].items()}
        result = fn(*args, **kwargs)
    except BaseException as e:
        return {"raise": _describe(e)}
    try:
        return {"value": _enc(result)}
    except BaseException as e:
        return {"unsupported": _describe(e)[1]}


def _serve():
    requests, replies = _open_channel()
    ns, load_error = _load()
    for line in requests:
        req = _json.loads(line)
        if req["op"] == "names":
            reply = {"load_error": load_error} if load_error else {"names": _names(ns, req["names"])}
        else:
            reply = _call(ns, req)
        _send(replies, reply)
    _os._exit(0)


_serve()
`;

/** The tests' process: runs setup and tests against proxies of the solution's names. */
export const TESTER_PY = CODEC_PY + String.raw`
import builtins as _builtins, importlib as _importlib, sys as _sys, types as _types


class SolutionBrokeProtocol(BaseException):
    """The solution's process answered with something other than a plain value or an exception.
    A BaseException, so that a test's except Exception cannot swallow it; and recorded, so that
    even a bare except: cannot."""


class SolutionException(Exception):
    """An exception the solution raised whose class is not a builtin one."""


_broken = []
_UNRAISABLE = ("StopIteration", "StopAsyncIteration")


def _broke(why):
    _broken.append(why)
    raise SolutionBrokeProtocol(why)


class _Channel:
    def __init__(self):
        self.replies = _os.fdopen(_os.dup(0), "rb")
        self.requests = _os.dup(1)
        null = _os.open(_os.devnull, _os.O_RDONLY)
        _os.dup2(null, 0)
        _os.close(null)
        _os.dup2(2, 1)

    def ask(self, message):
        _send(self.requests, message)
        line = self.replies.readline()
        try:
            reply = _json.loads(line)
        except BaseException:
            reply = None
        if type(reply) is not dict or len(reply) != 1:
            _broke("a reply that is not a message")
        return reply

    def verdict(self, outcome):
        if _broken:
            outcome = "solution_error"
        _send(self.requests, {"verdict": outcome})
        _os._exit(0)


def _exception(described):
    if type(described) is not list or len(described) != 2 or not all(type(s) is str for s in described):
        _broke("a malformed exception")
    name, message = described
    cls = _builtins.__dict__.get(name)
    if isinstance(cls, type) and issubclass(cls, Exception) and name not in _UNRAISABLE:
        try:
            return cls(message)
        except BaseException:
            pass
    return SolutionException("%s: %s" % (name, message))


class SolutionFunction:
    """Stands for a function of the solution: a call sends its arguments as plain data to the
    solution's process and returns the plain value that comes back, or raises its exception."""

    __slots__ = ("_name", "_channel")

    def __init__(self, name, channel):
        self._name, self._channel = name, channel

    def __repr__(self):
        return "<solution function %s>" % self._name

    @property
    def __name__(self):
        return self._name

    def __call__(self, *args, **kwargs):
        ref = lambda v: v._name if type(v) is SolutionFunction else None
        try:
            args = [_enc(a, 0, ref) for a in args]
            kwargs = {k: _enc(a, 0, ref) for k, a in kwargs.items()}
        except Unsupported as e:
            raise TypeError("%s(): %s; only plain data reaches the solution" % (self._name, e)) from None
        reply = self._channel.ask({"op": "call", "name": self._name, "args": args, "kwargs": kwargs})
        if "raise" in reply:
            raise _exception(reply["raise"])
        if "value" not in reply:
            _broke("a value that is not plain data")
        try:
            return _dec(reply["value"])
        except BaseException:
            _broke("a malformed value")


def _names_in(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, _types.CodeType):
            names |= _names_in(const)
    return names


def _bind(ns, names, wanted, channel):
    """Binds in the tests' namespace each wanted name the solution defined: a function as a
    SolutionFunction, a standard module imported here, plain data decoded here."""
    if type(names) is not dict:
        _broke("a malformed list of names")
    for name, entry in names.items():
        if name not in wanted or type(entry) is not dict or len(entry) != 1:
            _broke("a malformed list of names")
        if "function" in entry:
            ns[name] = SolutionFunction(name, channel)
        elif "module" in entry and type(entry["module"]) is str:
            # Only the standard module the tests name: the solution cannot pick what gets imported.
            module = entry["module"]
            if module.partition(".")[0] in _sys.stdlib_module_names and module.rpartition(".")[2] == name:
                ns[name] = _importlib.import_module(module)
        elif "value" in entry:
            ns[name] = _dec(entry["value"])
        else:
            _broke("a malformed list of names")


def _main():
    channel = _Channel()
    with open("tests.json", encoding="utf-8") as f:
        spec = _json.load(f)
    try:
        code = compile(spec["setup"] + "\n" + "\n".join(spec["tests"]) + "\n", "<tests>", "exec")
    except BaseException:
        channel.verdict("test_error")
    wanted = sorted(n for n in _names_in(code) if n not in _builtins.__dict__)
    reply = channel.ask({"op": "names", "names": wanted})
    if "load_error" in reply:
        channel.verdict("solution_error")
    ns = {"__name__": "__main__", "__builtins__": _builtins}
    try:
        _bind(ns, reply.get("names"), set(wanted), channel)
    except BaseException:
        channel.verdict("solution_error")
    try:
        exec(code, ns)
    except SolutionBrokeProtocol:
        channel.verdict("solution_error")
    except AssertionError:
        channel.verdict("failed")
    except BaseException:
        channel.verdict("test_error")
    channel.verdict("passed")


_main()
`;
