"""make events: follows a running `make run`'s table streams (AWS_ENDPOINT_URL_DYNAMODB, or
127.0.0.1:DYNAMODB_PORT) from now and prints each change event as template.yaml's pipes would publish
it (id, time and account are stand-ins); a record not announced, or changed outside the API, gets a note."""

import contextlib
import json
import os
import sys
import time

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

import pipes


def note(text):
    print(f"make events: {text}", file=sys.stderr, flush=True)


def show(pipe, record, region):
    """Prints the event `pipe` makes of `record`, or why there is none."""
    try:
        event = pipe.event(record, region=region)
    except ValueError as error:
        return note(f"{pipe.name} cannot render record {record['eventID']}: {error}")
    if event is None:
        return note(f"{record['eventName']} on {pipe.table_name}: not announced ({json.dumps(pipe.patterns)} only)")
    detail = event["detail"] if isinstance(event["detail"], dict) else {}
    if detail.get("updated_by") == "" and detail.get("updated_fields") == []:
        note(f"{pipe.name}: the item has no updated_by or updated_fields (changed outside the API)")
    print(json.dumps(event, indent=2), flush=True)


def main():
    url = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or f"http://127.0.0.1:{os.environ.get('DYNAMODB_PORT', '8000')}"
    region = os.environ.get("AWS_REGION", "us-east-1")
    config = Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 2})  # not there? say so, retry
    dynamodb, streams = pipes.clients(url, region, config=config)
    pipes_by_table, readers, waiting = pipes.load_pipes(), None, False
    while True:
        try:
            if readers is None:
                readers = {table: pipes.StreamReader(dynamodb, streams, pipe.table_name, "LATEST")
                           for table, pipe in pipes_by_table.items()}
                waiting = False
                note(f"following {', '.join(p.table_name for p in pipes_by_table.values())} at {url}; "
                     "update a record to see its event")
            for table, reader in readers.items():
                for record in reader.read():
                    show(pipes_by_table[table], record, region)
        except (ClientError, BotoCoreError) as error:
            if not waiting:
                note(f"waiting for the tables at {url} (make run starts them): {error}")
            readers, waiting = None, True
            time.sleep(1)
        except ValueError as error:  # a table without a NEW_IMAGE stream
            raise SystemExit(f"make events: {error}") from None
        time.sleep(0.5)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops it
        main()
