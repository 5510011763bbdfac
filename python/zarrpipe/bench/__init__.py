"""zarrpipe's throughput benchmark harness: datasets, adapters, a process-per-row runner, reports."""
