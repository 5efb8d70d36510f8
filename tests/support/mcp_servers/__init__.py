"""MCP servers for the tests, and helpers to start them and to call their tools."""
