"""The Spark trace pipeline: ingest NDJSON traces, normalise them to Parquet, check the safety invariants of
spec/README.md over all traces at once, validate them against the TLA+ spec in parallel, and report.

Entry point: `kraft_tck.traces.pipeline.run.run_pipeline` (the `kraft-tck pipeline` command).
"""
