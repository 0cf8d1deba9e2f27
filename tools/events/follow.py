"""make events: follows the table streams of a running `make run` and prints
each change event as the pipes of template.yaml would put it on the bus.

Reads DynamoDB Local at AWS_ENDPOINT_URL_DYNAMODB, or 127.0.0.1:DYNAMODB_PORT
(default 8000), from the moment it starts (the pipes start at LATEST too).
Each event is printed to stdout as JSON; a record a pipe's filter drops (an
INSERT when the samples load, say) gets a note on stderr, and so does an
event of an item changed outside the API (updated_by "" and updated_fields
[], as the pipe renders attributes the item lacks). The envelope's id, time
and account are local stand-ins; the detail is exactly what the pipe's input
template makes of the record: who wrote (updated_by) and the names of the
fields the write set (updated_fields, [[...]]), never a value. Ctrl-C stops it.
"""

import json
import os
import sys
import time

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

import pipes

POLL_SECONDS = 0.5


def endpoint():
    return os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or \
        f"http://127.0.0.1:{os.environ.get('DYNAMODB_PORT', '8000')}"


def note(text):
    print(f"make events: {text}", file=sys.stderr, flush=True)


def connect(dynamodb, streams, pipes_by_table):
    """A reader per table, at the end of its stream; None while a table is
    missing (DynamoDB Local still starting, or no `make run`)."""
    readers = {}
    for table, pipe in pipes_by_table.items():
        try:
            description = dynamodb.describe_table(TableName=pipe.table_name)["Table"]
        except (ClientError, BotoCoreError):
            return None
        spec = description.get("StreamSpecification", {})
        if not spec.get("StreamEnabled") or spec.get("StreamViewType") != "NEW_IMAGE":
            raise SystemExit(f"make events: {pipe.table_name} has no NEW_IMAGE stream; local-api creates the tables "
                             "with one (local/src/setup.rs): rebuild it and restart make run")
        readers[table] = pipes.StreamReader(streams, description["LatestStreamArn"], start="LATEST")
    return readers


def main():
    url = endpoint()
    region = os.environ.get("AWS_REGION", "us-east-1")
    # No long retries: when nothing answers, say so and try again.
    options = dict(endpoint_url=url, region_name=region, aws_access_key_id="local", aws_secret_access_key="local",
                   config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 2, "mode": "standard"}))
    dynamodb = boto3.client("dynamodb", **options)
    streams = boto3.client("dynamodbstreams", **options)
    pipes_by_table = pipes.load_pipes()
    readers, waiting = None, False
    while True:
        if readers is None:
            readers = connect(dynamodb, streams, pipes_by_table)
            if readers is None:
                if not waiting:
                    note(f"waiting for the tables at {url} (start them with make run)")
                    waiting = True
                time.sleep(1)
                continue
            waiting = False
            note(f"following {', '.join(p.table_name for p in pipes_by_table.values())} at {url}; "
                 "update a record to see its event")
        try:
            batches = {table: reader.read() for table, reader in readers.items()}
        except (ClientError, BotoCoreError) as error:
            note(f"lost the streams ({error}); reconnecting")
            readers = None
            continue
        for table, records in batches.items():
            pipe = pipes_by_table[table]
            for record in records:
                try:
                    event = pipe.event(record, region=region)
                except pipes.TemplateError as error:
                    note(f"{pipe.name} fails on record {record.get('eventID')}: {error}")
                    continue
                if event is None:
                    note(f"{record.get('eventName')} on {pipe.table_name}: not announced "
                         f"({pipe.name} passes {json.dumps(pipe.patterns)} only)")
                    continue
                detail = event.get("detail")
                if isinstance(detail, dict) and detail.get("updated_by") == "" and detail.get("updated_fields") == []:
                    note(f"{pipe.name}: the item has no updated_by or updated_fields (changed outside the API, "
                         "or by a build that did not record them)")
                print(json.dumps(event, indent=2), flush=True)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
