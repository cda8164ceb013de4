"""Running suites: the call scheduler, the journal, the stages and `holodeck test`."""
