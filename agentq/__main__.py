from agentq.cli import main

main()
