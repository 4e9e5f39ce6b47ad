"""Every HTTP exchange of the integration tests, checked against docs/openapi.yaml.

The harness (harness.py: Daemon.request, Daemon.connection, Daemon.raw) hands each request and
its answer to check_exchange(); tests that open their own connections use CheckedHTTPConnection
or check_raw(). An exchange the description does not allow is a Mismatch (an AssertionError),
raised where the request was made and also recorded, so that a test which caught it (a retry
loop, a thread) still fails at its end (HourglassTestCase checks problems_since()).

What is checked, against the operation the method and path name:
  * the request: path parameters, query parameters (unknown ones too: the daemon refuses them),
    parameters a POST carries in its body (form or JSON object), a JSON request body against
    its schema. A request the description calls invalid must be answered with a 4xx;
  * the answer: its status is one the operation lists; headers marked required are there; a
    body only where one is described, of a documented media type, valid against its schema
    (strict: the schemas say additionalProperties: false, so an undocumented field fails);
  * a request no operation takes (unknown path, method, malformed HTTP) must get one of the
    answers under the description's `x-hourglass-unmatched`.

Schemas are JSON Schema 2020-12 (OpenAPI 3.1), validated by Debian's python3-jsonschema after
this module has resolved their $refs into one document (the description has no recursive
schema), so it works with jsonschema 4.10 (Debian 12) as with later ones.
"""

from __future__ import annotations

import http.client
import io
import json
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import yaml

DESCRIPTION = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# statuses an HTTP gateway (nginx, NginxServer) answers itself when no daemon does
GATEWAY_STATUSES = (502, 504)


class Mismatch(AssertionError):
    """An exchange the description does not allow."""


class _Op:
    def __init__(self, template: str, method: str, op: dict, path_params: list[dict]) -> None:
        self.template = template
        self.method = method
        self.op = op
        self.params: dict[tuple[str, str], dict] = {}
        for p in path_params + op.get("parameters", []):
            self.params[(p["in"], p["name"])] = p  # the operation's own win over the path's

    def __repr__(self) -> str:
        return f"{self.method.upper()} {self.template}"


class Description:
    """docs/openapi.yaml, ready to check exchanges against."""

    def __init__(self, path: Path | str = DESCRIPTION, doc: dict | None = None) -> None:
        if doc is None:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        self.doc = doc
        self._validators: dict[int, jsonschema.protocols.Validator] = {}
        self._lock = threading.Lock()
        self.templates: list[tuple[re.Pattern, str, list[str]]] = []
        self.ops: dict[str, dict[str, _Op]] = {}
        for template, item in doc["paths"].items():
            item = self.resolve(item)
            path_params = [self.resolve(p) for p in item.get("parameters", [])]
            self.ops[template] = {}
            for m in METHODS:
                if m in item:
                    op = self.resolve(item[m])
                    op = dict(op, parameters=[self.resolve(p) for p in op.get("parameters", [])])
                    self.ops[template][m] = _Op(template, m, op, path_params)
            names = re.findall(r"\{([^}]+)\}", template)
            rx = re.escape(template)
            for n in names:
                rx = rx.replace(re.escape("{" + n + "}"), "([^/]*)")
            self.templates.append((re.compile(rx + r"\Z"), template, names))
        # literal paths first ("/console/" before "/console/{file}"), then by literal length
        self.templates.sort(key=lambda t: (len(t[2]) > 0, -len(re.sub(r"\{[^}]+\}", "", t[1]))))
        self.unmatched = {k: self.resolve(v) for k, v in doc["x-hourglass-unmatched"]["responses"].items()}

    # -- $refs
    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are supported: {ref}")
        node: Any = self.doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def resolve(self, node: Any) -> Any:
        """node with a top-level $ref followed (siblings of the $ref kept, as 3.1 allows)."""
        while isinstance(node, dict) and "$ref" in node:
            target = self._pointer(node["$ref"])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest} if rest else target
        return node

    def inline(self, node: Any, depth: int = 0) -> Any:
        """A copy of a schema with every $ref replaced by its target."""
        if depth > 64:
            raise ValueError("$ref nesting too deep (a recursive schema?)")
        if isinstance(node, dict):
            if "$ref" in node:
                target = self.inline(self._pointer(node["$ref"]), depth + 1)
                rest = {k: self.inline(v, depth + 1) for k, v in node.items() if k != "$ref"}
                if not rest:
                    return target
                if isinstance(target, dict):
                    return {**target, **rest}
                return {"allOf": [target], **rest}
            return {k: self.inline(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self.inline(v, depth + 1) for v in node]
        return node

    def schema_errors(self, schema: Any, value: Any) -> list[str]:
        """Why value does not match schema (empty when it does)."""
        with self._lock:
            v = self._validators.get(id(schema))
            if v is None:
                full = self.inline(schema)
                if full is True or full == {}:
                    full = {}
                jsonschema.Draft202012Validator.check_schema(full)
                v = jsonschema.Draft202012Validator(full)
                self._validators[id(schema)] = v
                self._keep = getattr(self, "_keep", []) + [schema]  # keep id(schema) unique
        try:
            errors = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
        except RecursionError:
            return ["nested too deeply to check"]
        out = []
        for e in errors[:5]:
            while e.context:  # oneOf/anyOf: say what the alternative of the value's type lacks
                e = jsonschema.exceptions.best_match([c for c in e.context if c.validator != "type"] or e.context)
            out.append(f"{'/'.join(str(p) for p in e.absolute_path) or '(the value)'}: {e.message[:300]}")
        return out

    # -- matching
    def match(self, method: str, target: str) -> tuple[str | None, _Op | None, dict[str, str], str]:
        """(template, operation, raw path arguments, query) for a request target; template None
        when no path matches, operation None when the path does not take the method."""
        split = urllib.parse.urlsplit(target)
        path = split.path or "/"
        for rx, template, names in self.templates:
            m = rx.match(path)
            if m:
                args = dict(zip(names, m.groups()))
                ops = self.ops[template]
                op = ops.get(method.lower())
                # HEAD is GET without a body (RFC 9110, 9.3.2) and the daemon takes it wherever it
                # takes GET: a path that describes no head of its own is checked by its get
                # (response_problems wants no body for HEAD)
                if op is None and method.upper() == "HEAD":
                    op = ops.get("get")
                return template, op, args, split.query
        return None, None, {}, split.query


_DESCRIPTION: Description | None = None
_DESCRIPTION_LOCK = threading.Lock()
_PROBLEMS: list[str] = []
_PROBLEMS_LOCK = threading.Lock()


def description() -> Description:
    global _DESCRIPTION
    with _DESCRIPTION_LOCK:
        if _DESCRIPTION is None:
            _DESCRIPTION = Description()
        return _DESCRIPTION


def problems_since(mark: int) -> list[str]:
    """The mismatches recorded since problem_mark() returned mark."""
    with _PROBLEMS_LOCK:
        return list(_PROBLEMS[mark:])


def problem_mark() -> int:
    with _PROBLEMS_LOCK:
        return len(_PROBLEMS)


# --------------------------------------------------------------------------- values


def _coerce(value: str, schema: dict) -> Any:
    """A query/path/form string as the JSON value its schema's type asks for (the string itself
    when it does not read as one: the schema then says why)."""
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types or types == [None]:
        return value
    if "integer" in types and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if "number" in types and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
        return float(value) if "." in value else int(value)
    if "boolean" in types and value in ("true", "false"):
        return value == "true"
    return value


def _json_param_text(v: Any) -> str | None:
    """A JSON body parameter as the daemon reads it into text (params_parse_json)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v) if not isinstance(v, float) else repr(v)
    return None


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    if hasattr(headers, "get"):
        v = headers.get(name)
        if v is not None:
            return v
    items = headers.items() if hasattr(headers, "items") else headers
    for k, v in items:
        if k.lower() == name.lower():
            return v
    return None


def _media_base(ctype: str | None) -> str:
    return (ctype or "").split(";")[0].strip().lower()


# --------------------------------------------------------------------------- requests


def request_problems(desc: Description, op: _Op, args: Mapping[str, str], query: str,
                     headers: Any, body: bytes | None) -> list[str]:
    """Why the request is not one the operation describes (empty when it is)."""
    out: list[str] = []
    given: dict[tuple[str, str], str] = {}
    for name, raw in args.items():
        given[("path", name)] = urllib.parse.unquote(raw, errors="strict")
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query),
                                       errors="strict")
    except (ValueError, UnicodeDecodeError) as e:
        return [f"malformed query string: {e}"]
    for k, v in pairs:
        if ("query", k) in given:
            out.append(f"query parameter {k} given twice")
        given[("query", k)] = v

    body = body or b""
    rb = desc.resolve(op.op.get("requestBody")) if op.op.get("requestBody") else None
    ctype = _header(headers, "Content-Type")
    if rb is None:
        if body:
            out.append(f"{op} takes no request body")
    elif not body:
        if rb.get("required"):
            out.append(f"{op} needs a request body")
    else:
        content = rb.get("content", {})
        base = _media_base(ctype) or "application/x-www-form-urlencoded"
        media = next((m for t, m in content.items() if _media_base(t) == base), None)
        if media is None:
            out.append(f"request body of type {base!r}; {op} takes {', '.join(content)}")
        else:
            schema = media.get("schema", {})
            resolved = desc.resolve(schema)
            value: Any
            if base == "application/json":
                try:
                    value = json.loads(body)
                except (ValueError, RecursionError) as e:  # (deeper than Python's stack: invalid too)
                    return out + [f"request body is not JSON this checker can read: {str(e)[:200]}"]
            else:
                try:
                    value = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True,
                                                        strict_parsing=True, errors="strict"))
                except (ValueError, UnicodeDecodeError) as e:
                    return out + [f"request body is not a form: {e}"]
            out += [f"request body: {e}" for e in desc.schema_errors(schema, value)]
            # parameters carried in the body (action endpoints): checked as the query's are
            props = resolved.get("properties", {}) if isinstance(resolved, dict) else {}
            if props and isinstance(value, dict) and all(("query", k) in op.params for k in props):
                for k, v in value.items():
                    text = _json_param_text(v)
                    if text is None:
                        continue  # the schema check above said why
                    if ("query", k) in given:
                        out.append(f"parameter {k} given in the query and the body")
                    given[("query", k)] = text

    for (where, name), value in given.items():
        p = op.params.get((where, name))
        if p is None:
            out.append(f"{where} parameter {name!r} is not one {op} takes")
            continue
        schema = p.get("schema", {})
        resolved = desc.resolve(schema)
        out += [f"{where} parameter {name}={value!r}: {e}"
                for e in desc.schema_errors(schema, _coerce(value, resolved if isinstance(resolved, dict) else {}))]
    for (where, name), p in op.params.items():
        if where == "header":
            v = _header(headers, name)
            if v is not None:
                out += [f"header {name}: {e}" for e in desc.schema_errors(p.get("schema", {}), v)]
        elif p.get("required") and (where, name) not in given:
            out.append(f"{where} parameter {name} is required")
    return out


# --------------------------------------------------------------------------- answers


def response_problems(desc: Description, responses: Mapping[str, Any], what: str, method: str,
                      status: int, headers: Any, body: bytes) -> list[str]:
    """Why the answer is not one of `responses` (empty when it is)."""
    spec = responses.get(str(status))
    if spec is None:
        return [f"{what}: status {status} is not documented (documented: {', '.join(responses)})"]
    spec = desc.resolve(spec)
    out: list[str] = []
    for name, h in (spec.get("headers") or {}).items():
        h = desc.resolve(h)
        v = _header(headers, name)
        if v is None:
            if h.get("required"):
                out.append(f"{what} {status}: header {name} missing")
            continue
        out += [f"{what} {status}: header {name}: {e}" for e in desc.schema_errors(h.get("schema", {}), v)]
    content = spec.get("content") or {}
    no_body = method.upper() == "HEAD" or status in (204, 304)
    if no_body or not content:
        if body:
            out.append(f"{what} {status}: a body where none is described: {body[:200]!r}")
        return out
    ctype = _header(headers, "Content-Type")
    media = content.get(ctype) if ctype else None
    if media is None:
        media = next((m for t, m in content.items() if _media_base(t) == _media_base(ctype) and ";" not in t), None)
    if media is None:
        return out + [f"{what} {status}: Content-Type {ctype!r} is not documented ({', '.join(content)})"]
    schema = media.get("schema", {})
    if _media_base(ctype) == "application/json":
        try:
            value = json.loads(body)
        except ValueError as e:
            return out + [f"{what} {status}: body is not JSON ({e}): {body[:200]!r}"]
        errs = desc.schema_errors(schema, value)
        out += [f"{what} {status}: body: {e}" for e in errs]
    elif desc.resolve(schema).get("contentEncoding") != "binary":
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return out + [f"{what} {status}: body is not UTF-8 text"]
        out += [f"{what} {status}: body: {e}" for e in desc.schema_errors(schema, text)]
    return out


def exchange_problems(method: str, target: str, req_headers: Any, req_body: bytes | None,
                      status: int, resp_headers: Any, resp_body: bytes,
                      desc: Description | None = None, malformed: str | None = None) -> list[str]:
    """Everything wrong with one exchange (empty when the description allows it). malformed:
    the request was not well-formed HTTP (why): its answer must be a documented error."""
    desc = desc or description()
    what = f"{method} {target[:200]}"
    unmatched = desc.unmatched
    if malformed is not None:
        allowed = {k: v for k, v in unmatched.items() if k in ("400", "404", "405", "413", "503")}
        return response_problems(desc, allowed, f"{what} (malformed: {malformed})", "GET", status,
                                 resp_headers, resp_body)
    template, op, args, query = desc.match(method, target)
    if template is None:
        allowed = {k: v for k, v in unmatched.items() if k in ("400", "404", "413")}
        return response_problems(desc, allowed, f"{what} (no such path)", method, status, resp_headers, resp_body)
    if op is None:
        allowed = {k: v for k, v in unmatched.items() if k in ("400", "405", "413", "503")}
        return response_problems(desc, allowed, f"{what} (no {method} on {template})", method, status,
                                 resp_headers, resp_body)
    try:
        bad = request_problems(desc, op, args, query, req_headers, req_body)
    except UnicodeDecodeError as e:
        bad = [f"not UTF-8: {e}"]
    out = response_problems(desc, op.op.get("responses", {}), f"{what} ({op})", method, status,
                            resp_headers, resp_body)
    if bad and 200 <= status < 400:
        out.append(f"{what} ({op}): answered {status}, but the description calls the request invalid: "
                   + "; ".join(bad))
    return out


def check_exchange(method: str, target: str, req_headers: Any, req_body: bytes | None,
                   status: int, resp_headers: Any, resp_body: bytes, gateway: bool = False,
                   malformed: str | None = None) -> None:
    """Raise (and record) a Mismatch when the exchange is not one the description allows.
    gateway: the answer came through an HTTP gateway, whose own 502/504 are not the daemon's."""
    if gateway and status in GATEWAY_STATUSES:
        return
    problems = exchange_problems(method, target, req_headers, req_body, status, resp_headers, resp_body,
                                 malformed=malformed)
    if problems:
        text = "docs/openapi.yaml does not allow this exchange:\n  " + "\n  ".join(problems)
        with _PROBLEMS_LOCK:
            _PROBLEMS.append(text)
        raise Mismatch(text)


def webhook_problems(headers: Any, body: bytes, desc: Description | None = None) -> list[str]:
    """Why a webhook delivery the daemon made is not the description's `webhooks.jobDelivery`."""
    desc = desc or description()
    op = desc.resolve(desc.doc["webhooks"]["jobDelivery"]["post"])
    out = []
    for p in op.get("parameters", []):
        p = desc.resolve(p)
        v = _header(headers, p["name"])
        if v is None:
            if p.get("required"):
                out.append(f"webhook delivery: header {p['name']} missing")
            continue
        out += [f"webhook delivery: header {p['name']}: {e}" for e in desc.schema_errors(p.get("schema", {}), v)]
    ctype = _header(headers, "Content-Type")
    content = desc.resolve(op["requestBody"])["content"]
    if ctype not in content:
        return out + [f"webhook delivery: Content-Type {ctype!r} is not {', '.join(content)}"]
    try:
        value = json.loads(body)
    except ValueError as e:
        return out + [f"webhook delivery: body is not JSON: {e}"]
    return out + [f"webhook delivery: body: {e}" for e in desc.schema_errors(content[ctype]["schema"], value)]


def check_webhook(headers: Any, body: bytes) -> None:
    """Record (for the running test to fail at its end) a webhook delivery that does not match
    the description. Not raised: it is called on the receiver's thread, whose answer the test
    is about."""
    problems = webhook_problems(headers, body)
    if problems:
        with _PROBLEMS_LOCK:
            _PROBLEMS.append("docs/openapi.yaml does not allow this webhook delivery:\n  " + "\n  ".join(problems))


# --------------------------------------------------------------------------- raw HTTP


_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


def parse_requests(data: bytes) -> tuple[list[tuple[str, str, list[tuple[str, str]], bytes]], str | None]:
    """The well-formed requests at the start of raw bytes sent, and why the rest is not one
    (None when everything sent was complete, well-formed requests)."""
    out = []
    rest = data
    while rest:
        head, sep, after = rest.partition(b"\r\n\r\n")
        if not sep:
            return out, "incomplete request head"
        if b"\0" in head:
            return out, "NUL in the request head"
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not _TOKEN.match(parts[0]) or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1") \
                or not parts[1].startswith(b"/"):
            return out, f"bad request line {lines[0][:80]!r}"
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not _TOKEN.match(name):
                return out, f"bad header line {line[:80]!r}"
            try:
                headers.append((name.decode(), value.strip().decode()))
            except UnicodeDecodeError:
                return out, "non-UTF-8 header"
        names = [h[0].lower() for h in headers]
        te = [v for k, v in headers if k.lower() == "transfer-encoding"]
        cl = [v for k, v in headers if k.lower() == "content-length"]
        if te:
            if te != ["chunked"] or cl:
                return out, "unsupported Transfer-Encoding"
            body = b""
            while True:
                size_line, sep, after = after.partition(b"\r\n")
                if not sep or not re.fullmatch(rb"[0-9a-fA-F]+", size_line):
                    return out, "malformed chunk"
                size = int(size_line, 16)
                if size == 0:
                    if not after.startswith(b"\r\n"):
                        return out, "trailers or an incomplete chunked body"
                    after = after[2:]
                    break
                if len(after) < size + 2 or after[size:size + 2] != b"\r\n":
                    return out, "incomplete chunk"
                body += after[:size]
                after = after[size + 2:]
        elif cl:
            if len(cl) != 1 or not cl[0].isdigit():
                return out, "bad Content-Length"
            n = int(cl[0])
            if len(after) < n:
                return out, "body shorter than its Content-Length"
            body, after = after[:n], after[n:]
        else:
            body = b""
        if names.count("host") > 1:
            return out, "two Host headers"
        out.append((parts[0].decode(), parts[1].decode("latin-1"), headers, body))
        rest = after
    return out, None


def check_raw(sent: bytes, received: bytes, gateway: bool = False) -> None:
    """Check the answers read back from raw bytes sent on one connection: each answer to a
    well-formed request against its operation; an answer past the last well-formed request
    must be one of the documented errors. Responses cut short (the server closed) are not
    judged."""
    requests, bad = parse_requests(sent)
    responses = []
    rest = received
    while rest:
        one = _first_response(rest)
        if one is None:
            break
        responses.append(one[0])
        rest = one[1]
    for i, resp in enumerate(responses):
        if i < len(requests):
            method, target, headers, body = requests[i]
            if method == "HEAD":
                break  # a HEAD answer has no body: the split of what follows is unknown
            check_exchange(method, target, headers, body, resp.status, resp.headers, resp.body, gateway)
        else:
            check_exchange("?", "?", [], b"", resp.status, resp.headers, resp.body, gateway,
                           malformed=bad or "more answers than requests")


def _first_response(data: bytes):
    """(the first response, the rest) when data starts with a complete one, else None."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return None
    headers = http.client.HTTPMessage()
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    n = headers.get("Content-Length")
    if n is None or not n.isdigit() or len(rest) < int(n):
        return None
    return RawResponse(int(parts[1]), headers, rest[:int(n)]), rest[int(n):]


class RawResponse:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


# --------------------------------------------------------------------------- http.client


class CheckedHTTPConnection(http.client.HTTPConnection):
    """http.client.HTTPConnection whose every exchange is checked (check_exchange) once its
    answer has been read: getresponse() reads the whole body, checks it, and hands back a
    response that reads it from memory, so callers use it as usual."""

    gateway = False

    def request(self, method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None,
                **kw: Any) -> None:
        headers = dict(headers or {})
        data = body.encode() if isinstance(body, str) else body
        if data is not None and not isinstance(data, (bytes, bytearray)):
            data = b"".join(data)  # an iterable: sent as is, checked as a whole
        self._hg_request = (method, url, headers, bytes(data) if data is not None else None)
        super().request(method, url, body=data, headers=headers, **kw)

    def getresponse(self) -> http.client.HTTPResponse:
        r = super().getresponse()
        payload = r.read()
        method, url, headers, data = self._hg_request
        # what the caller reads: the same bytes, from memory
        r.fp = io.BufferedReader(io.BytesIO(payload))  # type: ignore[assignment]
        r.length = len(payload)
        r.chunked = False
        check_exchange(method, url, headers, data, r.status, r.headers, payload, self.gateway)
        return r


__all__ = ["Description", "Mismatch", "CheckedHTTPConnection", "check_exchange", "check_raw", "check_webhook",
           "exchange_problems", "description", "problem_mark", "problems_since", "parse_requests",
           "DESCRIPTION"]
