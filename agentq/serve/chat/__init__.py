"""The AI SDK chat door: `useChat` requests, their messages, and the UI message stream."""
