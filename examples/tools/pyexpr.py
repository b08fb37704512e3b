#!/usr/bin/env python3
"""pyexpr: an rl-env tool in Python (standard library only) that evaluates a small, safe subset
of Python expressions. It shows how to plug in a tool of your own in another language: read one
JSON object per line on stdin, write one JSON object per line on stdout, flush, stay alive.

    rl-env serve --bind tcp://127.0.0.1:5570 --tool py="python3 examples/tools/pyexpr.py"
    rl-env call --endpoint tcp://127.0.0.1:5570 py '"2**10 + max(3, 4)"'     # {"output":"1028"}

Request: {"name": "py", "arguments": "EXPRESSION"}, or arguments as an object
{"expression": "x * y", "variables": {"x": 3, "y": 4}}. Reply: {"output": "<value>"} or
{"error": "<why>"}; every request gets exactly one reply line, errors included.

Allowed: int, float and bool literals; + - * / // % ** and unary - + not; comparisons (chains too);
and, or; x if c else y; min, max, abs, round; names from "variables" or bound inside the
expression with := ("(n := 12) * n"). Everything else (attributes, subscripts, strings, lambdas,
comprehensions, other calls) is refused: the expression is walked by this file, never given to
eval(). Sizes are bounded so that "9**9**9" is an error, not an hour of CPU.
"""
import ast
import json
import math
import operator
import sys

MAX_SOURCE = 10000          # characters of one expression
MAX_INT_BITS = 10000        # about 3000 decimal digits
MAX_EXPONENT = 10000

BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
FUNCTIONS = {"min": min, "max": max, "abs": abs, "round": round}


class Refused(Exception):
    """An expression outside the subset, or one whose value would be too large."""


def checked(value):
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise Refused("number too large (over %d bits)" % MAX_INT_BITS)
    if isinstance(value, float) and not math.isfinite(value):
        raise Refused("overflow")
    return value


def number(value, what):
    if not isinstance(value, (int, float)):
        raise Refused("%s needs numbers" % what)
    return value


def evaluate(node, names):
    """Walks the tree; anything not handled here is refused."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body, names)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return checked(node.value)
        raise Refused("only numbers and booleans are allowed as literals")
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        if node.id in ("True", "False"):
            return node.id == "True"
        raise Refused("unknown name '%s'" % node.id)
    if isinstance(node, ast.NamedExpr):  # (x := 3): a let-style binding
        names[node.target.id] = evaluate(node.value, names)
        return names[node.target.id]
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left = number(evaluate(node.left, names), "arithmetic")
        right = number(evaluate(node.right, names), "arithmetic")
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise Refused("exponent too large (over %d)" % MAX_EXPONENT)
        if isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and right > 0:
            if left.bit_length() * right > MAX_INT_BITS:
                raise Refused("number too large (over %d bits)" % MAX_INT_BITS)
        return checked(BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return checked(UNARY[type(node.op)](evaluate(node.operand, names)))
    if isinstance(node, ast.BoolOp):
        value = None
        for operand in node.values:  # short-circuits as Python does
            value = evaluate(operand, names)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value
    if isinstance(node, ast.Compare) and all(type(op) in COMPARE for op in node.ops):
        left = evaluate(node.left, names)
        for op, comparator in zip(node.ops, node.comparators):
            right = evaluate(comparator, names)
            if not COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return evaluate(node.body if evaluate(node.test, names) else node.orelse, names)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
            and not node.keywords):
        args = [number(evaluate(a, names), node.func.id) for a in node.args]
        if not args or (node.func.id in ("abs",) and len(args) != 1) or (node.func.id == "round" and len(args) > 2):
            raise Refused("wrong number of arguments to %s" % node.func.id)
        if node.func.id in ("min", "max") and len(args) == 1:
            raise Refused("%s wants at least two arguments" % node.func.id)
        if node.func.id == "round" and len(args) == 2 and (not isinstance(args[1], int) or abs(args[1]) > 10000):
            raise Refused("round's digits must be an integer within 10000")  # round(1, -10**9) runs for ages
        return checked(FUNCTIONS[node.func.id](*args))
    raise Refused("not allowed: %s" % type(node).__name__)


def answer(line):
    """The reply object for one request line."""
    try:
        request = json.loads(line)
    except ValueError:
        return {"error": "the request is not JSON"}
    if not isinstance(request, dict):
        return {"error": "the request is not a JSON object"}
    arguments = request.get("arguments")
    names = {}
    if isinstance(arguments, dict):
        variables = arguments.get("variables", {})
        if not isinstance(variables, dict) or not all(isinstance(v, (int, float)) for v in variables.values()):
            return {"error": "variables must map names to numbers"}
        names.update(variables)
        arguments = arguments.get("expression")
    if not isinstance(arguments, str):
        return {"error": "pyexpr wants its arguments as a string or {\"expression\": string, \"variables\": {...}}"}
    if len(arguments) > MAX_SOURCE:
        return {"error": "expression longer than %d characters" % MAX_SOURCE}
    try:
        tree = ast.parse(arguments.strip(), mode="eval")
    except SyntaxError as e:
        return {"error": "cannot parse: %s" % e.msg}
    except (ValueError, RecursionError, MemoryError):
        return {"error": "cannot parse: the expression is too deeply nested or not text"}
    try:
        return {"output": str(evaluate(tree, names))}
    except Refused as e:
        return {"error": str(e)}
    except ZeroDivisionError:
        return {"error": "division by zero"}
    except OverflowError:
        return {"error": "overflow"}
    except (TypeError, ValueError) as e:
        return {"error": str(e)}
    except RecursionError:
        return {"error": "the expression is too deeply nested"}


def main():
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        sys.stdout.write(json.dumps(answer(line)) + "\n")
        sys.stdout.flush()  # one reply per request, now: rl-env waits for it


if __name__ == "__main__":
    sys.exit(main())
