"""The engine's entry points, above the runner, the history and the reports (DESIGN §7.11's
layering): ``holodeck test`` (:mod:`.test`), ``holodeck rescore`` (:mod:`.rescore`) and the
stages the Dagster assets call one by one (:mod:`.stages`). They run a suite, then write its
EvalRun and reports and ingest the history; nothing below imports them."""
