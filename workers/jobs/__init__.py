"""One module per job kind: the functions a worker runs for each job."""
