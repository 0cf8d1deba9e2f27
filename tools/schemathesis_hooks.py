"""Schemathesis hooks for `make api-test` (scripts/api-test.sh sets SCHEMATHESIS_HOOKS).

openapi.yaml's `Endpoint` pattern states a URL's shape and no more, so that a
client validating with it never refuses an endpoint the service accepts
(tests/tests/integration/openapi.rs holds it to that). The host rules (no metadata,
link-local or reserved address; private ranges only where allowed) are the
service's, and no pattern can state them, so a schema-valid endpoint may still
be refused. Schemathesis requires every schema-valid body to be accepted: in
the bodies it means to be valid, an endpoint is therefore drawn from public DNS
names, which every deployment accepts. Invalid bodies are left as generated,
so the shape rules are still tested from the document; the host rules are
tested in Rust (shared/src/rules/endpoint.rs).
"""

import re

import schemathesis
from hypothesis import strategies as st

PUBLIC_ENDPOINT = (
    r"[Hh][Tt][Tt][Pp][Ss]?://([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]+(:[1-9][0-9]{0,3})?"
    r"(/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?"
)
PUBLIC_ENDPOINTS = st.from_regex(PUBLIC_ENDPOINT, fullmatch=True)


@schemathesis.hook
def flatmap_case(context, case):
    body = case.body
    meta = case.meta
    positive = meta is not None and meta.generation.mode == schemathesis.GenerationMode.POSITIVE
    endpoint = body.get("endpoint") if isinstance(body, dict) else None
    if not positive or not isinstance(endpoint, str) or re.fullmatch(PUBLIC_ENDPOINT, endpoint):
        return st.just(case)

    def with_public_endpoint(public):
        case.body = {**body, "endpoint": public}
        return case

    return PUBLIC_ENDPOINTS.map(with_public_endpoint)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but a schema-valid body refused for its endpoint alone.

    The coverage phase builds boundary values without the hook above (a
    2048-character `HTTPS://000…` reaches 0.0.0.0): such an endpoint fits the
    pattern and is refused by the host or URL rules the pattern cannot state.
    Dropped only when the endpoint is not a public DNS name (those must be
    accepted) and the host rules alone refused it: any other refusal, an
    `invalid_url` included, stays a failure.
    """
    if failure.code != "ST202" or response.status_code != 400:
        return True
    body = case.body if isinstance(case.body, dict) else {}
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or re.fullmatch(PUBLIC_ENDPOINT, endpoint):
        return True
    try:
        details = response.json()["errorDetails"]
    except (ValueError, KeyError, TypeError):
        return True
    fields = details.get("fields") or []
    endpoint_only = details.get("code") == "validation_failed" and fields and all(
        field.get("field") == "endpoint"
        and field.get("code") in {"forbidden_host", "private_host"}
        for field in fields
    )
    return not endpoint_only
