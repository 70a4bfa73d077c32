/**
 * What crosses between the solution's process and the tests' process of code_exec (docs/rewards.md):
 * plain values of every supported type come back equal, arguments and solution functions go the other
 * way, the solution's exceptions and prints behave as in one process, instances of the solution's own
 * classes are refused, and every reference solution of data/mbpp_sample.jsonl still passes.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { loadMbpp } from "../../lib/data/mbpp.ts";
import { codeExec, runTests } from "../../lib/score/code_exec.ts";
import { openSandbox, type Sandbox } from "../../lib/score/sandbox_api.ts";
import type { Episode, RewardContext } from "../../lib/score/types.ts";

let sandbox: Sandbox | undefined;
async function ctx(): Promise<RewardContext> {
  sandbox ??= await openSandbox({ kind: "bwrap", unsafeNoSandbox: false, maxConcurrency: 2 });
  return { sandbox, codeTimeoutMs: 10_000 };
}

const run = async (solution: string, tests: string[], setup = "") =>
  (await runTests(solution, setup, tests, await ctx())).status;

const VALUES = String.raw`import math
from collections import Counter, OrderedDict, defaultdict, namedtuple
Point = namedtuple("Point", "x y")
def value(kind):
    counts = defaultdict(int)
    counts["k"] += 2
    return {
        "none": None, "bool": True, "int": -7, "big": -2 ** 5000, "float": 0.1, "negzero": -0.0,
        "nan": float("nan"), "inf": float("-inf"), "complex": complex(1.5, -math.inf),
        "str": "é\ud800\n\"", "bytes": b"\x00\xff\n", "bytearray": bytearray(b"ab"),
        "list": [1, [2.0, "3"]], "tuple": (1, (2,), ()), "dict": {(1, 2): {"a": frozenset({3})}, 4: None},
        "set": {1, "b"}, "frozenset": frozenset({(1, 2)}), "range": range(1, 9, 2),
        "counter": Counter("aab"), "defaultdict": counts, "ordered": OrderedDict(z=1, a=2),
        "namedtuple": Point(1, 2), "generator": (i * i for i in range(3)), "map": map(str, [1, 2]),
        "zip": zip("ab", [1, 2]),
    }[kind]
`;

const VALUE_TESTS = String.raw`assert value("none") is None
assert value("bool") is True
assert value("int") == -7 and type(value("int")) is int
assert value("big") == -2 ** 5000
assert value("float") == 0.1 and math.copysign(1, value("negzero")) == -1
assert math.isnan(value("nan")) and value("inf") == -math.inf
assert value("complex") == complex(1.5, -math.inf)
assert value("str") == "é\ud800\n\""
assert value("bytes") == b"\x00\xff\n" and value("bytearray") == bytearray(b"ab")
assert value("list") == [1, [2.0, "3"]] and type(value("list")[1][0]) is float
assert value("tuple") == (1, (2,), ()) and value("tuple") != [1, [2], []]
assert value("dict") == {(1, 2): {"a": frozenset({3})}, 4: None}
assert value("set") == {1, "b"} and value("frozenset") == frozenset({(1, 2)})
assert value("range") == range(1, 9, 2) and list(value("range")) == [1, 3, 5, 7]
assert value("counter") == {"a": 2, "b": 1} and value("defaultdict") == {"k": 2}
assert list(value("ordered")) == ["z", "a"]
assert value("namedtuple") == (1, 2)
assert list(value("generator")) == [0, 1, 4] and value("generator") != [0, 1, 4]
assert list(value("map")) == ["1", "2"] and list(value("zip")) == [("a", 1), ("b", 2)]
assert math.isclose(value("float") * 3, 0.3) and sorted(value("set"), key=str) == [1, "b"]
assert set(value("list")[1]) == {2.0, "3"} and len(value("tuple")) == 3`.split("\n");

Deno.test("code_exec: plain values of every supported type come back equal to the same literals", async () => {
  for (const test of VALUE_TESTS) assert.equal(await run(VALUES, [test], "import math"), "passed", test);
  assert.equal(await run(VALUES, ['assert value("int") == -8'], ""), "failed");
});

Deno.test("code_exec: arguments reach the solution as plain data, and a solution function can be one", async () => {
  const solution = "def echo(*args, **kwargs):\n    return [args, kwargs]\n" +
    "def apply(f, x):\n    return f(x)\ndef double(x):\n    return 2 * x";
  const tests = [
    'assert echo((1, 2), {3}, k=b"x", d={(1,): [None]}) == [((1, 2), {3}), {"k": b"x", "d": {(1,): [None]}}]',
    "assert apply(double, 4) == 8",
  ];
  assert.equal(await run(solution, tests), "passed");
  // A function of the tests cannot be sent: the test cannot be run, a test_error.
  assert.equal(await run(solution, ["assert apply(lambda x: x, 4) == 4"]), "test_error");
});

Deno.test("code_exec: the solution's exceptions reach the tests as exceptions", async () => {
  const solution = "class Custom(Exception):\n    pass\n" +
    "def check(x):\n    if x < 0:\n        raise ValueError('negative')\n    if x == 0:\n" +
    "        raise Custom('zero')\n    return {}[x]";
  const tests = [
    "try:\n    check(-1)\nexcept ValueError as e:\n    assert str(e) == 'negative'\nelse:\n    assert False",
    "try:\n    check(0)\nexcept ValueError:\n    assert False\nexcept Exception as e:\n    assert 'zero' in str(e)",
    "try:\n    check(1)\nexcept KeyError:\n    pass\nelse:\n    assert False",
  ];
  assert.equal(await run(solution, tests), "passed");
  assert.equal(await run(solution, ["assert check(-1) == 0"]), "test_error");
});

Deno.test("code_exec: prints, input() and writes to stdout in the solution do not disturb the tests", async () => {
  const solution = String.raw`import sys
print('{"verdict": "passed"}')
print("loading", file=sys.stderr)
def add(a, b):
    print('{"value": 0}')
    sys.stdout.buffer.write(b'{"value": 0}\n')
    sys.stdout.flush()
    try:
        input()
    except EOFError:
        pass
    return a + b
`;
  assert.equal(await run(solution, ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]), "passed");
});

Deno.test("code_exec: an instance of the solution's own class is refused (solution_error)", async () => {
  const solution = "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n" +
    "    def __eq__(self, other):\n        return (self.a, self.b) == (other.a, other.b)\n" +
    "def make(a, b):\n    return Pair(a, b)";
  assert.equal(await run(solution, ["assert make(1, 2) == make(1, 2)"]), "solution_error");
  // A test that catches every exception still ends solution_error.
  const swallow = "try:\n    make(1, 2)\nexcept BaseException:\n    pass";
  assert.equal(await run(solution, [swallow]), "solution_error");
});

Deno.test("code_exec: every reference solution of data/mbpp_sample.jsonl passes its tests", async () => {
  const path = fileURLToPath(new URL("../../data/mbpp_sample.jsonl", import.meta.url));
  const tasks = await loadMbpp(path);
  assert.equal(tasks.length, 20);
  for (const task of tasks) {
    const episode = {
      episodeId: task.id,
      task,
      finalText: "```python\n" + task.reference_code + "\n```",
    } as unknown as Episode;
    const r = await codeExec.score(episode, await ctx());
    assert.deepEqual(r, { value: 1, status: "passed", correct: true }, task.id);
  }
});
