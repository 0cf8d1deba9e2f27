"""Usage: check_emf.py LOG [LOG ...]. Each JSON log line carrying `_aws` must fit the embedded metric format (the
schema beside this file; each directive's dimensions string members of the root, its metrics numbers), carry an RFC
3339 `timestamp` and a Lambda `level` (else Lambda's log-level filtering drops it), and the Outcome its status maps
to (`replayed` for a replay); one per routed access line, with the same request_id. Exits non-zero on any failure or no metrics line."""

import datetime
import json
import pathlib
import sys

import jsonschema

OUTCOMES = {200: "updated", 400: "invalid", 405: "invalid", 413: "invalid", 415: "invalid", 422: "invalid",
            401: "forbidden", 403: "forbidden", 404: "not_found", 412: "conflict", 503: "unavailable"}
LEVELS = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}


def rfc3339(text):  # a T, seconds, an offset
    try:
        return len(text) >= 20 and text[10] == "T" and datetime.datetime.fromisoformat(text).tzinfo is not None
    except (TypeError, ValueError):
        return False


def problems(document, validator):
    found = [error.message for error in validator.iter_errors(document)]
    if not rfc3339(document.get("timestamp")):
        found.append(f"no RFC 3339 timestamp: {document.get('timestamp')!r}")
    if document.get("level") not in LEVELS:
        found.append(f"no level Lambda knows: {document.get('level')!r}")
    for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
        for name in (name for dimension_set in directive.get("Dimensions", []) for name in dimension_set):
            if not isinstance(document.get(name), str):
                found.append(f"dimension {name} is not a string member of the root")
        for metric in directive.get("Metrics", []):
            value = document.get(metric.get("Name"))
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                found.append(f"metric {metric.get('Name')} has no numeric value")
    if "replayed" in document and (document["replayed"] is not True or document.get("status") != 200):
        found.append(f"replayed is {document['replayed']!r} on a {document.get('status')}: only a 200 replays")
    outcome = "replayed" if document.get("replayed") is True else OUTCOMES.get(document.get("status"), "error")
    if document.get("Outcome") != outcome:
        found.append(f"status {document.get('status')} is outcome {outcome}, not {document.get('Outcome')}")
    return found


def main(paths):
    schema = json.loads((pathlib.Path(__file__).parent / "emf.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    passed, failed, access_ids, metric_ids = 0, 0, [], []
    replays = {}  # request_id -> whether its access line and its metrics line say replayed
    for path in paths:
        for line in pathlib.Path(path).read_text(errors="replace").splitlines():
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if not isinstance(document, dict):
                continue
            route = document.get("route", "")
            if document.get("target") == "access" and route.startswith("/api/agent-server/") and "{id}" in route:
                access_ids.append(document.get("request_id"))
                replays.setdefault(document.get("request_id"), []).append(document.get("replayed") is True)
            if "_aws" in document:
                metric_ids.append(document.get("request_id"))
                replays.setdefault(document.get("request_id"), []).append(document.get("replayed") is True)
                found = problems(document, validator)
                passed, failed = passed + (not found), failed + bool(found)
                if found:
                    print(f"FAIL {path}: {found}: {line[:300]}")
    if sorted(access_ids) != sorted(metric_ids):
        failed += 1
        print(f"FAIL: {len(access_ids)} routed access lines but {len(metric_ids)} metrics lines, or their ids differ")
    disagree = [request_id for request_id, said in replays.items() if len(set(said)) > 1]
    if disagree:
        failed += 1
        print(f"FAIL: the access and metrics lines of {disagree[:5]} disagree on replayed")
    print(f"emf: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
