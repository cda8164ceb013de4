"""Running suites: the journal, the stages and `holodeck test`."""
