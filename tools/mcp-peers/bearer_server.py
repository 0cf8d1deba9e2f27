"""An MCP server written with the Python SDK (`mcp`, pinned in tools/requirements.txt):
Streamable HTTP at /mcp, JSON answers, two tools, and every request refused with 401 unless
it carries `Authorization: Bearer <TOKEN>`. The peer verify=true is tested against for the
JSON transport and a wrong token.

Usage: bearer_server.py PORT TOKEN
"""

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

port, token = int(sys.argv[1]), sys.argv[2]
server = MCPServer(name="bearer-peer", version="1.4.2")


@server.tool()
def echo(text: str) -> str:
    """Answers its text."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


app = server.streamable_http_app(json_response=True)
expected = f"Bearer {token}".encode()


async def guarded(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
        headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})
        return
    await app(scope, receive, send)


uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")
