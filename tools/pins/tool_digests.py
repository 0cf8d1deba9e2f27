"""Tool pins computed independently of the service: PyPI's rfc8785 (pinned in
tools/requirements.txt) and hashlib, as docs/api.md ("Tool pins") states them.

    tool_digests.py < tools.json
        tools.json: a JSON array of tool objects, as a tools/list result holds them.
    tool_digests.py URL [HEADER_NAME HEADER_VALUE]
        asks the MCP server at URL for its tools itself (initialize,
        notifications/initialized, then every tools/list page), over JSON answers
        or an event stream.

Prints {"tool_digests": {name: digest}, "tools_digest": digest}: what a verification
records. The tests compare it with what the service stored. rfc8785 0.1.4 refuses any
integral number beyond 2^53 (IntegerDomainError), which RFC 8785 writes as ECMAScript does
(18446744073709551615 as 18446744073709552000); a tool holding one cannot be checked here.
"""

import hashlib
import json
import sys
import urllib.request

import rfc8785


def digest(value) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def pin(tools: list) -> dict:
    digests = {}
    for tool in tools:
        tool = {name: value for name, value in tool.items() if name != "_meta"}
        digests[tool["name"]] = digest(tool)
    return {"tool_digests": digests, "tools_digest": digest(digests)}


def listed(url: str, headers: dict) -> list:
    session = {}

    def call(message: dict):
        request = urllib.request.Request(
            url,
            data=json.dumps(message).encode(),
            headers={
                **headers,
                **session,
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            if "mcp-session-id" in answer.headers:
                session["mcp-session-id"] = answer.headers["mcp-session-id"]
            body = answer.read().decode()
            if "id" not in message:
                return None
            if answer.headers.get_content_type() == "text/event-stream":
                for line in body.splitlines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event.get("id") == message["id"]:
                            return event["result"]
                raise SystemExit("no answer in the event stream")
            return json.loads(body)["result"]

    initialized = call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tool-digests", "version": "1"}}})
    session["mcp-protocol-version"] = initialized["protocolVersion"]
    call({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools, cursor, page = [], None, 2
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = call({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params})
        tools.extend(result["tools"])
        cursor, page = result.get("nextCursor"), page + 1
        if not cursor:
            return tools


if __name__ == "__main__":
    if len(sys.argv) > 1:
        headers = dict([sys.argv[2:4]]) if len(sys.argv) > 3 else {}
        tools = listed(sys.argv[1], headers)
    else:
        tools = json.load(sys.stdin)
    print(json.dumps(pin(tools)))
