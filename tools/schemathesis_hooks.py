"""Schemathesis hooks for `make api-test` (scripts/api-test.sh sets SCHEMATHESIS_HOOKS).

openapi.yaml's `Endpoint` pattern states a URL's shape only; the service's host rules (no metadata, link-local,
reserved or, unless allowed, private address) no pattern can state, and are tested in Rust. So bodies meant to be
valid get an endpoint from public DNS names, which every deployment accepts; invalid bodies stay as generated."""

import re

import schemathesis
from hypothesis import strategies as st

PUBLIC_ENDPOINT = (
    r"[Hh][Tt][Tt][Pp][Ss]?://([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]+(:[1-9][0-9]{0,3})?"
    r"(/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?"
)
PUBLIC_ENDPOINTS = st.from_regex(PUBLIC_ENDPOINT, fullmatch=True)


def other_endpoint(body):
    """The body's endpoint when it is a string that is not a public DNS name, else None."""
    endpoint = body.get("endpoint") if isinstance(body, dict) else None
    return endpoint if isinstance(endpoint, str) and not re.fullmatch(PUBLIC_ENDPOINT, endpoint) else None


@schemathesis.hook
def flatmap_case(context, case):
    body, meta = case.body, case.meta
    if meta is None or meta.generation.mode != schemathesis.GenerationMode.POSITIVE or other_endpoint(body) is None:
        return st.just(case)
    return PUBLIC_ENDPOINTS.map(lambda public: setattr(case, "body", {**body, "endpoint": public}) or case)


def stated_by_no_pattern(body, error):
    """A field refusal no schema can state: the host rules on a non-public endpoint, header names equal regardless
    of case, or text whose only candidate visible characters (or noncharacters) lie beyond U+FFFF, where JSON
    Schema's regexes see surrogates."""
    value = body.get(error.get("field")) if isinstance(body, dict) else None
    if error.get("code") in {"forbidden_host", "private_host"}:
        return error.get("field") == "endpoint" and other_endpoint(body) is not None
    if error.get("code") == "duplicate_name":  # names unique regardless of case: no schema states it
        return str(error.get("field")).startswith("headers.")
    return error.get("code") in {"blank", "noncharacter"} and isinstance(value, str) and max(value, default="") > "\uffff"


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Drops only a schema-valid body (ST202) refused as 400 for what no pattern states (the coverage phase builds
    without the hook above: `HTTPS://000…` is 0.0.0.0); any other refusal stays a failure."""
    if failure.code != "ST202" or response.status_code != 400:
        return True
    try:
        details = response.json()["errorDetails"]
    except (ValueError, KeyError, TypeError):
        return True
    fields = details.get("fields") or []
    unstated = all(stated_by_no_pattern(case.body, error) for error in fields)
    return not (details.get("code") == "validation_failed" and fields and unstated)
