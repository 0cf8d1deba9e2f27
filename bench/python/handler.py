"""The Python peer for `make bench`: PUT /api/agent-server/models/{id} as most teams would write
it on the Python 3.11 runtime with boto3, doing the same work as the Rust function: UUID checks,
Content-Type and size checks, strict JSON, the model field rules, one conditional UpdateItem
returning ALL_NEW, and the same envelope. Benchmark code, not part of the service.
"""

import json
import os
import re
import uuid
from datetime import datetime, timezone
from decimal import Decimal

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import ClientError

TABLE = os.environ.get("MODELS_TABLE", "agent-server-models")
PROVIDERS = ("OpenAI", "Anthropic", "Gemini", "xAI")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
DYNAMODB = boto3.client(
    "dynamodb",
    config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=0.5, read_timeout=1),
)
SERIALIZE = TypeSerializer().serialize
DESERIALIZE = TypeDeserializer().deserialize


def envelope(status, message, data=None, details=None, headers=None):
    body = {"error": status != 200, "message": message, "data": data, "status": status,
            "errorDetails": details or {}}
    return {"statusCode": status, "headers": {"Content-Type": "application/json", **(headers or {})},
            "body": json.dumps(body)}


def bad(status, message, code, fields=None):
    details = {"code": code}
    if fields:
        details["fields"] = fields
    return envelope(status, message, details=details)


def canonical_uuid(raw):
    if not isinstance(raw, str) or len(raw) != 36:
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def text_problem(value):
    if not isinstance(value, str):
        return "invalid_type"
    if not 1 <= len(value) <= 255:
        return "too_long" if value else "too_short"
    if CONTROL.search(value):
        return "control_character"
    if value.isspace():
        return "blank"
    return None


def depth_and_numbers(value, depth, path, problems):
    if isinstance(value, (dict, list)) and depth > 16:
        problems.append({"field": path, "code": "too_deep", "message": "must nest at most 16 levels deep"})
        return
    if isinstance(value, dict):
        for key in sorted(value):
            if key == "":
                problems.append({"field": path, "code": "empty_key", "message": "object keys must not be empty"})
            else:
                depth_and_numbers(value[key], depth + 1, f"{path}.{key}", problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            depth_and_numbers(item, depth + 1, f"{path}[{index}]", problems)
    elif isinstance(value, Decimal) and value != 0:
        digits = value.normalize().as_tuple()
        exponent = len(digits.digits) + digits.exponent - 1
        if len(digits.digits) > 38 or not -130 <= exponent <= 125:
            problems.append({"field": path, "code": "invalid_number", "message": "out of DynamoDB's range"})


def validate(body):
    problems = []
    for name in sorted(body):
        value = body[name]
        if name in ("name", "model_id"):
            code = text_problem(value)
            if code:
                problems.append({"field": name, "code": code, "message": "must be 1 to 255 characters"})
        elif name == "provider_type":
            if value not in PROVIDERS:
                problems.append({"field": name, "code": "invalid_enum",
                                 "message": "must be one of OpenAI, Anthropic, Gemini, xAI"})
        elif name == "parameters":
            if not isinstance(value, dict):
                problems.append({"field": name, "code": "invalid_type", "message": "must be an object"})
            elif len(json.dumps(value, separators=(",", ":"), default=str)) > 16384:
                problems.append({"field": name, "code": "too_large", "message": "at most 16384 bytes"})
            else:
                depth_and_numbers(value, 1, name, problems)
        elif name in ("id", "project_id", "created_at", "updated_at"):
            problems.append({"field": name, "code": "read_only", "message": "is read-only"})
        else:
            problems.append({"field": name, "code": "unknown_field", "message": "is not a field of this record"})
    return problems


def handler(event, context):
    record_id = canonical_uuid((event.get("pathParameters") or {}).get("id"))
    if not record_id:
        return bad(400, "Invalid id: must be a UUID", "invalid_id")
    project_ids = [v for k, v in _query(event.get("rawQueryString", "")) if k == "project_id"]
    project_id = canonical_uuid(project_ids[0]) if len(project_ids) == 1 else None
    if not project_id:
        return bad(400, "Invalid project_id: exactly one UUID is required", "invalid_project_id")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    content_type = headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        return bad(415, "Content-Type must be application/json", "unsupported_media_type")
    raw = event.get("body") or ""
    if len(raw.encode()) > 65536:
        return bad(413, "Request body is larger than 65536 bytes", "payload_too_large")
    try:
        body = json.loads(raw, parse_float=Decimal, parse_int=Decimal,
                          object_pairs_hook=_unique_keys)
    except ValueError:
        return bad(400, "Request body must be a JSON object", "invalid_json")
    if not isinstance(body, dict):
        return bad(400, "Request body must be a JSON object", "invalid_json")
    if not body:
        return bad(400, "Nothing to update: the request body has no fields", "empty_update")
    problems = validate(body)
    if problems:
        return bad(400, "Invalid request body", "validation_failed", problems[:100])

    names = {"#id": "id", "#updated_at": "updated_at", "#version": "version"}
    values = {":now": {"S": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")},
              ":zero": {"N": "0"}, ":one": {"N": "1"}}
    sets = []
    for index, (name, value) in enumerate(sorted(body.items())):
        names[f"#f{index}"] = name
        values[f":f{index}"] = SERIALIZE(value)
        sets.append(f"#f{index} = :f{index}")
    sets += ["#updated_at = :now", "#version = if_not_exists(#version, :zero) + :one"]
    try:
        output = DYNAMODB.update_item(
            TableName=TABLE,
            Key={"project_id": {"S": project_id}, "id": {"S": record_id}},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(#id)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return bad(404, "Model not found", "not_found")
        return bad(503, "Service temporarily unavailable, retry later", "unavailable")
    item = {k: DESERIALIZE(v) for k, v in output["Attributes"].items()}
    fields = ("id", "project_id", "name", "model_id", "provider_type", "parameters", "created_at", "updated_at")
    data = {name: item.get(name) for name in fields}
    return envelope(200, "Model updated successfully", json.loads(json.dumps(data, default=_number)),
                    headers={"ETag": f'"{item.get("version", 0)}"'})


def _query(raw):
    from urllib.parse import parse_qsl
    return parse_qsl(raw, keep_blank_values=True)


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("repeated key")
    return dict(pairs)


def _number(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(type(value))
