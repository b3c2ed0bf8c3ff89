"""Real MCP servers for the tests, written with the SDK's MCPServer (FastMCP in mcp 1.x)."""
