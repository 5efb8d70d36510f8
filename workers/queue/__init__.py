"""agentq's job protocol over arq's layout: claim, lease, give back."""
