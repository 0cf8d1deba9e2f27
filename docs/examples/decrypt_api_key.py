"""Read one provider API key from the API-key table and open its seal (docs/secrets.md): one GetItem
and one KMS Decrypt with the context {"field": "api_key", "id": "<record id>"}; the ciphertext
names its key, and one copied to another record does not open.

    python decrypt_api_key.py RECORD_ID            # prints the key to stdout

Needs dynamodb:GetItem and kms:Decrypt (a role in SecretReaderRoleArns), boto3's usual configuration
(AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_KMS for the emulators) and
API_KEYS_TABLE (default agent-server-api-keys). Tested by tests/tests/integration/sealing.rs.
"""

import os
import sys

import boto3


def decrypt_api_key(record_id, table=None, session=None):
    """The plain api_key of API-key record `record_id`."""
    session = session or boto3.session.Session(region_name=os.environ.get("AWS_REGION"))
    table = table or os.environ.get("API_KEYS_TABLE", "agent-server-api-keys")
    item = session.client("dynamodb").get_item(
        TableName=table, Key={"id": {"S": record_id}},
        ProjectionExpression="api_key", ConsistentRead=True).get("Item")
    if item is None:
        raise LookupError(f"no API key record {record_id} in {table}")
    stored = item.get("api_key")
    if stored is None:
        raise LookupError(f"API key record {record_id} holds no api_key")
    if "S" in stored:
        # Written before sealing and not yet sealed by `seal-api-keys`.
        return stored["S"]
    plaintext = session.client("kms").decrypt(
        CiphertextBlob=stored["B"],
        EncryptionContext={"field": "api_key", "id": record_id},
    )["Plaintext"]
    return plaintext.decode("ascii")


def main(argv):
    if len(argv) != 2:
        print("usage: decrypt_api_key.py RECORD_ID", file=sys.stderr)
        return 2
    try:
        print(decrypt_api_key(argv[1]))
    except LookupError as error:
        print(f"decrypt_api_key: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
