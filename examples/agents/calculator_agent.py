#!/usr/bin/env python3
"""The demo's calculator agent in Python, for `rollout.environment.command` (docs/agents.md).

The same tool loop as openai_agent.ts, with nothing but the standard library: the gateway's address and the
episode come from the environment (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, AGENT_SEED, AGENT_HEADERS),
the task as one line of JSON on stdin; the last stdout line is {"reward": ...}. With the official `openai`
package the loop is the same: `OpenAI(default_headers=json.loads(os.environ["AGENT_HEADERS"]))` reads the rest
of the environment itself.

    rollout:
      environment: { kind: agent, command: [python3, examples/agents/calculator_agent.py] }
"""

import ast
import json
import operator
import os
import re
import sys
import urllib.request

# The demo's system prompt and the rollout's calculator spec (examples/agents/calculator.ts): with them the
# first prompt renders as the rollout stage's own, which the demo's warm start trained on.
SYSTEM_PROMPT = "Use the calculator. End with: Final answer: <answer>"
CALCULATOR = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression with + - * / ^ and parentheses, e.g. (12.5 + 3) * 4^2.",
    "parameters": {
        "type": "object",
        "properties": {
            "expression": {"type": "string", "description": "the expression, e.g. 4821 * 37 - 1290 / 5"}
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
}
MAX_STEPS = 6
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Pow: operator.pow}


def evaluate(node):
    """+ - * / ^ and parentheses over numbers; anything else is refused."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    raise ValueError("only numbers, + - * / ^ and parentheses")


def calculate(arguments):
    """The calculator's answer, or the error the model reads."""
    try:
        expression = str(json.loads(arguments)["expression"]).replace("^", "**")
        value = evaluate(ast.parse(expression, mode="eval").body)
    except Exception as error:  # the model reads what went wrong, as with the TypeScript calculator
        return f"Error: {error}"
    if float(value).is_integer() and abs(value) <= 2**53 - 1:
        return str(int(value))
    return repr(float(f"{value:.15g}"))


def ask(messages):
    """One chat completion through the gateway, with the episode's headers and seed."""
    body = {"model": os.environ["OPENAI_MODEL"], "messages": messages, "seed": int(os.environ["AGENT_SEED"]),
            "tools": [{"type": "function", "function": CALCULATOR}]}
    headers = {"authorization": f"Bearer {os.environ['OPENAI_API_KEY']}", "content-type": "application/json",
               **json.loads(os.environ["AGENT_HEADERS"])}
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request) as response:
        return json.load(response)["choices"][0]["message"]


def main():
    task = json.loads(sys.stdin.readline())
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task["prompt"]}]
    reply = ""
    for _ in range(MAX_STEPS):
        message = ask(messages)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            reply = message.get("content") or ""
            break
        for call in calls:
            name = call["function"]["name"]
            output = calculate(call["function"]["arguments"]) if name == "calculator" else f"Error: no tool {name}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    answer = task.get("answer")
    numbers = re.findall(r"-?\d+(?:\.\d+)?", reply)
    reward = None if answer is None else int(bool(numbers) and float(numbers[-1]) == float(answer))
    print(json.dumps({"reward": reward}))


if __name__ == "__main__":
    main()
