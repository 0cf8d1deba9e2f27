"""Usage: check_emf.py LOG [LOG ...]

Reads JSON log lines and checks every line carrying `_aws` against the
embedded metric format: the schema beside this file, and what a schema
cannot state (each dimension a directive names is a string member of the
root, each metric a number). Also checks this service's own promise: one
line per access line, with the same request_id, and the Outcome its status
maps to; and, as on every line, an RFC 3339 `timestamp` and a Lambda
`level`, without which Lambda's log-level filtering counts the line as
INFO and drops it above INFO. Prints `emf: N passed, M failed`; exits non-zero on any failure or
when no metrics line was found (never a silent pass)."""

import datetime
import json
import pathlib
import sys

import jsonschema

OUTCOMES = {200: "updated", 400: "invalid", 405: "invalid", 413: "invalid", 415: "invalid",
            401: "forbidden", 403: "forbidden", 404: "not_found", 412: "conflict", 503: "unavailable"}


LEVELS = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}


def rfc3339(text):
    """Whether `text` is an RFC 3339 date-time (a T, seconds, an offset)."""
    if not isinstance(text, str) or len(text) < 20 or text[10] != "T":
        return False
    try:
        return datetime.datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def problems(document, validator):
    found = [error.message for error in validator.iter_errors(document)]
    if not rfc3339(document.get("timestamp")):
        found.append(f"no RFC 3339 timestamp: {document.get('timestamp')!r}")
    if document.get("level") not in LEVELS:
        found.append(f"no level Lambda knows: {document.get('level')!r}")
    for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
        for dimension_set in directive.get("Dimensions", []):
            for name in dimension_set:
                if not isinstance(document.get(name), str):
                    found.append(f"dimension {name} is not a string member of the root")
        for metric in directive.get("Metrics", []):
            value = document.get(metric.get("Name"))
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                found.append(f"metric {metric.get('Name')} has no numeric value")
    outcome = OUTCOMES.get(document.get("status"), "error")
    if document.get("Outcome") != outcome:
        found.append(f"status {document.get('status')} is outcome {outcome}, not {document.get('Outcome')}")
    return found


def main(paths):
    schema = json.loads((pathlib.Path(__file__).parent / "emf.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    passed = failed = 0
    access_ids, metric_ids = [], []
    for path in paths:
        for line in pathlib.Path(path).read_text(errors="replace").splitlines():
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if not isinstance(document, dict):
                continue
            if document.get("target") == "access" and document.get("route", "").startswith("/api/agent-server/") \
                    and "{id}" in document.get("route", ""):
                access_ids.append(document.get("request_id"))
            if "_aws" not in document:
                continue
            metric_ids.append(document.get("request_id"))
            found = problems(document, validator)
            if found:
                failed += 1
                print(f"FAIL {path}: {found}: {line[:300]}")
            else:
                passed += 1
    if sorted(access_ids) != sorted(metric_ids):
        failed += 1
        print(f"FAIL: {len(access_ids)} routed access lines but {len(metric_ids)} metrics lines, or their ids differ")
    print(f"emf: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
