"""Read one MCP server's headers from the MCP-server table and open them.

The API stores each header value sealed (docs/secrets.md): the names stay
readable, each value is AES-256-GCM under the record's own data key, and the
data key is stored beside them as KMS sealed it (GenerateDataKey under the
secrets key, with the encryption context {"field": "headers", "project_id":
"<project>", "id": "<record id>"}). Opening them is one GetItem, one KMS
Decrypt of the data key with that context, and AES-GCM for each value:

    sealed value = 0x01 || nonce (12 bytes) || ciphertext || tag (16 bytes)
    associated   = 0x01 || "headers" 0x00 project_id 0x00 id 0x00 header name

    python open_mcp_headers.py PROJECT_ID RECORD_ID   # prints the headers as JSON

The caller needs dynamodb:GetItem on the table and kms:Decrypt on the secrets
key with the context field=headers (a role in the stack's
SecretReaderRoleArns has it). Everything else is boto3's standard
configuration: credentials, the region (AWS_REGION, else boto3's own
AWS_DEFAULT_REGION or profile), and AWS_ENDPOINT_URL_DYNAMODB /
AWS_ENDPOINT_URL_KMS for the local emulators. The table is
MCP_SERVERS_TABLE (default agent-server-mcp-servers; a deployed stack's
McpServersTableName output). AES-GCM comes from the `cryptography` package.

Tested by `make sealing-test` (tools/sealing/sealing_test.py) against
DynamoDB Local and the local KMS.
"""

import json
import os
import sys

import boto3
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

LAYOUT_VERSION = 1
NONCE_BYTES = 12


def associated_data(field, project_id, record_id, name):
    """What binds a sealed value to its record and its header name."""
    parts = [field, project_id, record_id, name]
    return bytes([LAYOUT_VERSION]) + b"\0".join(part.encode() for part in parts)


def open_value(data_key, project_id, record_id, name, sealed):
    """The text of one sealed header value (raises if it was not sealed for
    this record and name, or was altered)."""
    sealed = bytes(sealed)
    if not sealed or sealed[0] != LAYOUT_VERSION:
        raise ValueError(f"header {name!r}: not a sealed value of layout version {LAYOUT_VERSION}")
    nonce, ciphertext = sealed[1:1 + NONCE_BYTES], sealed[1 + NONCE_BYTES:]
    aad = associated_data("headers", project_id, record_id, name)
    return AESGCM(data_key).decrypt(nonce, ciphertext, aad).decode("utf-8")


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
