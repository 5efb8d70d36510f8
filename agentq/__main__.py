from agentq.cli.main import main

# `python -m agentq` is the same program as the `agentq` script (usage, completion).
main(prog_name="agentq")
