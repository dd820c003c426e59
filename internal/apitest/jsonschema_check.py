"""Checks HTTP answers against the OpenAPI document with python3-jsonschema.

The second validator of internal/apitest (jsonschema.go), beside
libopenapi's: another implementation of JSON Schema, in the dialect the
document declares (jsonSchemaDialect). Usage:

    python3 jsonschema_check.py DOCUMENT ANSWERS

ANSWERS is a JSON array of {"method", "path", "status", "body"} (body absent
for none, as HEAD's) or {"event": true, "body"} (the data of a /v1/events
message). Prints one JSON object: {"dialect", "document": [problems of the
document], "answers": [null, or what is wrong with that answer, ...]}.
"""

import json
import sys
import warnings

import jsonschema
from jsonschema import validators

BASE = "urn:leasekeeper:openapi"

# What a path or a method the document does not have may answer, as
# internal/apitest's stand-ins say: components/responses by status.
UNKNOWN_PATH = {401: "Unauthenticated", 404: "NotFound", 500: "Internal", 503: "Unavailable"}
UNKNOWN_METHOD = {401: "Unauthenticated", 405: "MethodNotAllowed", 500: "Internal", 503: "Unavailable"}


def pointer(*parts):
    return "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def follow(doc, ptr):
    node = doc
    for part in ptr[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def make_validator(cls, doc):
    """A function validating an instance against the schema at a pointer."""
    try:
        # jsonschema 4.18 and newer: referencing's registry.
        from referencing import Registry, Resource
        from referencing.jsonschema import specification_with

        spec = specification_with(doc["jsonSchemaDialect"])
        registry = Registry().with_resource(BASE, Resource(contents=doc, specification=spec))

        def validate(ptr, instance):
            return list(cls({"$ref": BASE + ptr}, registry=registry,
                            format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
    except ImportError:
        # jsonschema 4.17 and older (Debian 12 has 4.10): RefResolver.
        warnings.simplefilter("ignore", DeprecationWarning)
        resolver = jsonschema.RefResolver(base_uri=BASE, referrer=doc, store={BASE: doc})

        def validate(ptr, instance):
            return list(cls({"$ref": BASE + ptr}, resolver=resolver,
                            format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
    return validate


def response_pointer(doc, answer):
    """The pointer of the response the document gives this answer, or an error."""
    method, path, status = answer["method"].lower(), answer["path"], answer["status"]
    item = doc["paths"].get(path)
    op = None
    if item is not None:
        op = item.get(method) or (item.get("get") if method == "head" else None)
    if op is None:
        if item is None or not path.startswith("/v1/"):
            where, names = "path %s is not in the document" % path, UNKNOWN_PATH
        else:
            where, names = "%s %s is not in the document" % (answer["method"], path), UNKNOWN_METHOD
        if status not in names:
            return None, "%s, and it answered %d, none of %s" % (where, status, sorted(names))
        return pointer("components", "responses", names[status]), None
    if str(status) not in op["responses"]:
        return None, "%s %s answered %d, a status it does not list" % (answer["method"], path, status)
    method_key = method if method in item else "get"
    return pointer("paths", path, method_key, "responses", str(status)), None


def check_answer(doc, validate, answer):
    if answer.get("event"):
        ptr = pointer("components", "schemas", "Event")
    else:
        ptr, err = response_pointer(doc, answer)
        if err:
            return err
        response = follow(doc, ptr)
        if "$ref" in response:
            ptr = response["$ref"]
            response = follow(doc, ptr)
        content = response.get("content")
        if "body" not in answer:
            if answer["method"] != "HEAD":
                return "%s %s answered %d without a body" % (answer["method"], answer["path"], answer["status"])
            return None
        if not content or "application/json" not in content:
            return "%s %s answered %d with a JSON body; the document has none for it" % (
                answer["method"], answer["path"], answer["status"])
        ptr = ptr + "/content/application~1json/schema"
    errors = validate(ptr, answer["body"])
    if not errors:
        return None
    what = "an event" if answer.get("event") else "%s %s answered %d" % (answer["method"], answer["path"], answer["status"])
    lines = ["%s, which does not match %s:" % (what, ptr)]
    for e in sorted(errors, key=lambda e: list(e.absolute_path))[:5]:
        at = "$" + "".join("[%r]" % p if isinstance(p, int) else "." + str(p) for p in e.absolute_path)
        lines.append("  at %s: %s" % (at, e.message))
    return "\n".join(lines)


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    with open(sys.argv[2]) as f:
        answers = json.load(f)
    out = {"dialect": doc.get("jsonSchemaDialect"), "document": [], "answers": []}
    cls = validators.validator_for({"$schema": out["dialect"]}, default=None) if out["dialect"] else None
    if cls is None:
        out["document"].append("jsonSchemaDialect is %r, which names no dialect python3-jsonschema %s knows; "
                               "tools fall back to draft-07" % (out["dialect"], jsonschema_version()))
        print(json.dumps(out))
        return
    for name, schema in doc["components"]["schemas"].items():
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            out["document"].append("components/schemas/%s is not a schema of %s: %s" % (name, out["dialect"], e.message))
    validate = make_validator(cls, doc)
    for answer in answers:
        try:
            out["answers"].append(check_answer(doc, validate, answer))
        except Exception as e:  # a document the checker cannot walk: say so for the answer
            out["answers"].append("checking it failed: %r" % (e,))
    print(json.dumps(out))


def jsonschema_version():
    try:
        from importlib.metadata import version
        return version("jsonschema")
    except Exception:
        return "(version unknown)"


if __name__ == "__main__":
    main()
