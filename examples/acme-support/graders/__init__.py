"""Code graders of the acme-support example (``type: code``, ``grader: module:callable``)."""
