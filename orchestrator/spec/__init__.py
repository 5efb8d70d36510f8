"""What a user submits (a run spec) and how its tools resolve against what the deployment
and its workers offer. Above the tool kinds and the policy it chooses among."""
