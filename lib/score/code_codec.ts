/**
 * The plain-data codec both processes of the code_exec harness share (Python source, prepended to
 * each program of code_harness.ts): how a value crosses from the solution's process to the tests'
 * process, and arguments the other way, as one line of JSON.
 *
 * Plain data is None, bool, int, float (nan and infinities included), complex, str, bytes,
 * bytearray, list, tuple, dict, set, frozenset, range, and an iterator (a generator, map, zip...)
 * whose items are plain data, at most 100 levels deep and 100,000 items per iterator. JSON null,
 * booleans, numbers, strings and arrays stand for themselves; every other type is a tagged object
 * `{"t": tag, "v": ...}` (a dict as a list of key-value pairs, so its keys may be any plain value).
 * A subclass of a plain type travels as its base value: a Counter or defaultdict as a dict, a
 * namedtuple as a tuple, an int subclass as its int. Anything else (an instance of the solution's
 * class, a function) raises `Unsupported`.
 *
 * The decoder is the half that matters for safety: the solution's process may write any bytes in
 * place of the encoder's output, and `_dec` builds only builtin plain types from them, or raises.
 *
 * @module
 */

/** Python: `Unsupported`, `_enc`, `_dec`, `_send`. */
export const CODEC_PY = String.raw`
import json as _json, os as _os

_MAX_DEPTH = 100
_MAX_ITEMS = 100_000
_NATIVE_INT_BITS = 4000


class Unsupported(Exception):
    """A value that is not plain data, or a message that does not hold one."""


def _enc(v, depth=0, ref=None):
    """Plain data as JSON: null, bools, ints, finite floats, strings and lists as themselves, any other
    type as {"t": tag, "v": ...}. A subclass of a plain type travels as its base value (a Counter as
    a dict, a namedtuple as a tuple)."""
    if depth > _MAX_DEPTH:
        raise Unsupported("a value nested more than %d levels deep" % _MAX_DEPTH)
    d = depth + 1
    if v is None or v is True or v is False:
        return v
    if isinstance(v, int):
        v = int.__int__(v)
        return v if v.bit_length() <= _NATIVE_INT_BITS else {"t": "int", "v": hex(v)}
    if isinstance(v, float):
        v = float.__float__(v)
        return v if v - v == 0 else {"t": "float", "v": repr(v)}
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, list):
        return [_enc(x, d, ref) for x in list.__iter__(v)]
    if isinstance(v, tuple):
        return {"t": "tuple", "v": [_enc(x, d, ref) for x in tuple.__iter__(v)]}
    if isinstance(v, dict):
        return {"t": "dict", "v": [[_enc(k, d, ref), _enc(x, d, ref)] for k, x in dict.items(v)]}
    if isinstance(v, frozenset):
        return {"t": "frozenset", "v": [_enc(x, d, ref) for x in frozenset.__iter__(v)]}
    if isinstance(v, set):
        return {"t": "set", "v": [_enc(x, d, ref) for x in set.__iter__(v)]}
    if isinstance(v, bytes):
        return {"t": "bytes", "v": bytes.hex(v)}
    if isinstance(v, bytearray):
        return {"t": "bytearray", "v": bytearray.hex(v)}
    if isinstance(v, complex):
        v = complex.__complex__(v)
        return {"t": "complex", "v": [_enc(v.real, d), _enc(v.imag, d)]}
    if type(v) is range:
        return {"t": "range", "v": [v.start, v.stop, v.step]}
    if ref is not None and ref(v) is not None:
        return {"t": "ref", "v": ref(v)}
    if _is_iterator(v):
        items = []
        for x in v:
            if len(items) == _MAX_ITEMS:
                raise Unsupported("an iterator of more than %d items" % _MAX_ITEMS)
            items.append(_enc(x, d, ref))
        return {"t": "iter", "v": items}
    raise Unsupported("a value of type %s is not plain data" % type(v).__name__)


def _is_iterator(v):
    return hasattr(type(v), "__next__") and hasattr(type(v), "__iter__")


def _dec(x, depth=0, deref=None):
    """The inverse of _enc, strict: anything but the shapes _enc makes raises Unsupported, and only
    builtin plain types come out."""
    if depth > _MAX_DEPTH:
        raise Unsupported("a value nested more than %d levels deep" % _MAX_DEPTH)
    d = depth + 1
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is list:
        return [_dec(i, d, deref) for i in x]
    if t is not dict or len(x) != 2 or "t" not in x or "v" not in x:
        raise Unsupported("not an encoded value")
    tag, v = x["t"], x["v"]
    if tag == "int" and type(v) is str:
        return int(v, 16)
    if tag == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    if tag in ("bytes", "bytearray") and type(v) is str:
        return bytes.fromhex(v) if tag == "bytes" else bytearray.fromhex(v)
    if tag == "ref" and deref is not None and type(v) is str:
        return deref(v)
    if type(v) is not list:
        raise Unsupported("not an encoded value")
    if tag == "complex" and len(v) == 2:
        re, im = _dec(v[0], d), _dec(v[1], d)
        if type(re) is float and type(im) is float:
            return complex(re, im)
    if tag == "range" and len(v) == 3 and all(type(i) is int for i in v) and v[2] != 0:
        return range(v[0], v[1], v[2])
    if tag == "dict" and all(type(p) is list and len(p) == 2 for p in v):
        return {_dec(k, d, deref): _dec(i, d, deref) for k, i in v}
    items = [_dec(i, d, deref) for i in v]
    if tag == "tuple":
        return tuple(items)
    if tag == "set":
        return set(items)
    if tag == "frozenset":
        return frozenset(items)
    if tag == "iter":
        return iter(items)
    raise Unsupported("not an encoded value")


def _send(fd, message):
    data = (_json.dumps(message) + "\n").encode()
    while data:
        data = data[_os.write(fd, data):]
`;
