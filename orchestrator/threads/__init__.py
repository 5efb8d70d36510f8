"""Threads: conversations whose runs continue one another (`client.threads`)."""
