"""Read one MCP server's headers from the MCP-server table and open them (docs/secrets.md): one
GetItem, one KMS Decrypt of the record's data key with the context {"field": "headers",
"project_id": ..., "id": ...}, and AES-256-GCM for each value:

    value key    = HKDF-SHA256(ikm = data key, salt, info = "agent-server sealed values v2")
    sealed value = 0x02 || salt (32 bytes) || nonce (12 bytes) || ciphertext || tag (16 bytes)
    associated   = 0x02 || "headers" 0x00 project_id 0x00 id 0x00 header name

(layout 1: 0x01 || nonce || ciphertext || tag under the data key itself, associated data led by 0x01).

    python open_mcp_headers.py PROJECT_ID RECORD_ID   # prints the headers as JSON

Needs dynamodb:GetItem and kms:Decrypt (a role in SecretReaderRoleArns), boto3's usual configuration,
MCP_SERVERS_TABLE (default agent-server-mcp-servers) and the `cryptography` package. Tested by
tests/tests/integration/mcp_sealing.rs.
"""

import json
import os
import sys

import boto3
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12
SALT_BYTES = 32
WRITE_KEY_INFO = b"agent-server sealed values v2"


def associated_data(layout, field, project_id, record_id, name):
    """What binds a sealed value to its record and its header name."""
    parts = [field, project_id, record_id, name]
    return bytes([layout]) + b"\0".join(part.encode() for part in parts)


def open_value(data_key, project_id, record_id, name, sealed):
    """The text of one sealed header value (raises if it was not sealed for
    this record and name, or was altered)."""
    sealed = bytes(sealed)
    layout = sealed[0] if sealed else None
    if layout == 2:
        salt, rest = sealed[1:1 + SALT_BYTES], sealed[1 + SALT_BYTES:]
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=WRITE_KEY_INFO).derive(data_key)
    elif layout == 1:
        key, rest = data_key, sealed[1:]
    else:
        raise ValueError(f"header {name!r}: not a sealed value of layout version 1 or 2")
    nonce, ciphertext = rest[:NONCE_BYTES], rest[NONCE_BYTES:]
    aad = associated_data(layout, "headers", project_id, record_id, name)
    return AESGCM(key).decrypt(nonce, ciphertext, aad).decode("utf-8")


def open_headers(project_id, record_id, table=None, session=None):
    """The headers of MCP server `record_id` of `project_id`, as a dict of
    name to value."""
    session = session or boto3.session.Session(region_name=os.environ.get("AWS_REGION"))
    table = table or os.environ.get("MCP_SERVERS_TABLE", "agent-server-mcp-servers")
    item = session.client("dynamodb").get_item(
        TableName=table, Key={"project_id": {"S": project_id}, "id": {"S": record_id}},
        ProjectionExpression="headers, headers_key", ConsistentRead=True).get("Item")
    if item is None:
        raise LookupError(f"no MCP server {record_id} in project {project_id} in {table}")
    members = item.get("headers", {}).get("M", {})
    sealed_key = item.get("headers_key", {}).get("B")
    data_key = None
    if sealed_key is not None:
        data_key = session.client("kms").decrypt(
            CiphertextBlob=sealed_key,
            EncryptionContext={"field": "headers", "project_id": project_id, "id": record_id},
        )["Plaintext"]
    headers = {}
    for name, value in members.items():
        if "S" in value:
            # Written before sealing and not yet sealed by `seal-secrets`.
            headers[name] = value["S"]
        elif data_key is None:
            raise LookupError(f"header {name!r} is sealed but the record holds no data key")
        else:
            headers[name] = open_value(data_key, project_id, record_id, name, value["B"])
    return headers


def main(argv):
    if len(argv) != 3:
        print("usage: open_mcp_headers.py PROJECT_ID RECORD_ID", file=sys.stderr)
        return 2
    try:
        print(json.dumps(open_headers(argv[1], argv[2]), sort_keys=True))
    except LookupError as error:
        print(f"open_mcp_headers: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
